"""The Metropolis-Hastings correction, as pytensor graphs (one for every kernel).

The one rule, shared by every implementation (these graphs, the numpy reference
:func:`pymc_lbp.samplers.common.mh_log_ratio` / :func:`~pymc_lbp.samplers.common.mh_accept`
and its row-wise version, the numba pairwise kernel): a proposal that is impossible (target
``-inf``), whose forward or reverse proposal probability is zero or not finite, or anything NaN
is a rejection: log-ratio ``-inf``, acceptance probability 0, never NaN. From an impossible
current state (``logp_x = -inf``) a possible proposal is accepted (ratio ``+inf``, probability
1), so a chain never stays where the target has no mass. The graphs reproduce the numpy reference
draw for draw given the same uniform.

Both rules compute in float64 whatever ``floatX`` is: the log-probabilities and proposal
log-probabilities are cast to float64 before they are combined, and the uniform before it is
compared, so under ``floatX="float32"`` the ratio of four float32 terms carries no rounding of
its own and an acceptance decision is never flipped by a float32 sum or comparison (under
float64 the casts are no-ops and the graphs are unchanged).
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
    """``f(y) - f(x) + log q(x|y) - log q(y|x)`` in float64; ``-inf`` unless ``f(y)`` and both
    proposal log-probabilities are finite, or where the ratio is NaN (``+inf`` from
    ``f(x) = -inf``)."""
    logp_x, logp_y, log_q_fwd, log_q_rev = (
        pt.cast(v, "float64") for v in (logp_x, logp_y, log_q_fwd, log_q_rev)
    )
    ok = finite(logp_y) & finite(log_q_fwd) & finite(log_q_rev)
    ratio = logp_y - logp_x + log_q_rev - log_q_fwd
    return pt.switch(ok & ~pt.isnan(ratio), ratio, -np.inf)


def mh_accept(log_ratio: Variable, u: Variable) -> tuple[Variable, Variable]:
    """Acceptance probability ``min(1, exp(log_ratio))`` (0 for NaN) and ``u < prob``.

    ``u`` is a Uniform(0, 1) draw; both are compared in float64.
    """
    log_ratio, u = pt.cast(log_ratio, "float64"), pt.cast(u, "float64")
    prob = pt.switch(pt.isnan(log_ratio), 0.0, pt.exp(pt.minimum(log_ratio, 0.0)))
    return prob, pt.lt(u, prob)
