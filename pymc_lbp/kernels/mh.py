"""The Metropolis-Hastings correction, as pytensor graphs (one for every kernel).

A non-finite ratio (an impossible proposal or reverse, a proposal of zero or undefined target
probability, NaN anywhere) is a rejection: log-ratio ``-inf``, acceptance probability 0, never
NaN. The numpy reference is :func:`pymc_lbp.proposals.common.mh_log_ratio` /
:func:`pymc_lbp.proposals.common.mh_accept`, which these graphs reproduce draw for draw given the
same
uniform.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable


def finite(v: Variable) -> Variable:
    """Elementwise ``isfinite`` (False for NaN and +-inf)."""
    return pt.lt(pt.abs(v), np.inf)


def mh_log_ratio(
    logp_x: Variable, logp_y: Variable, log_q_fwd: Variable, log_q_rev: Variable
) -> Variable:
    """``f(y) - f(x) + log q(x|y) - log q(y|x)``, or ``-inf`` unless all terms are finite."""
    ok = finite(logp_y) & finite(log_q_fwd) & finite(log_q_rev)
    ratio = logp_y - logp_x + log_q_rev - log_q_fwd
    return pt.switch(ok & finite(ratio), ratio, -np.inf)


def mh_accept(log_ratio: Variable, u: Variable) -> tuple[Variable, Variable]:
    """Acceptance probability ``min(1, exp(log_ratio))`` (0 for non-finite) and ``u < prob``.

    ``u`` is a Uniform(0, 1) draw.
    """
    prob = pt.switch(finite(log_ratio), pt.exp(pt.minimum(log_ratio, 0.0)), 0.0)
    return prob, pt.lt(u, prob)
