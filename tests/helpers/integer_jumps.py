"""A step's integer moves with the numpy reference, for the twin tests of its compiled jumps."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pymc_lbp.samplers.balancing import log_sqrt
from pymc_lbp.samplers.integer.graph import move_order
from pymc_lbp.samplers.integer.reference import JumpsResult, block_jumps


def reference_jumps(step) -> tuple[np.ndarray, Callable[[np.ndarray, np.ndarray], JumpsResult]]:
    """``(order, moves)`` of ``step``'s integer sites at its current ``J``: the sites in the
    order of the rows of a call's uniforms, and ``moves(x, uniforms)``, what ``step.jumps`` makes
    from them, made by :func:`pymc_lbp.samplers.integer.reference.block_jumps` site after site
    with the step's compiled batched logp, its supports read at the current state and its
    support-Gibbs sites' fixed supports."""
    jump_classes, gibbs_classes, _ = step._move_classes
    order = move_order(step._jump_sites, step._gibbs_sites, jump_classes, gibbs_classes)
    lower, upper = step._site_supports(step._gibbs_sites)
    gibbs = {
        int(s): (float(lo), float(hi))
        for s, lo, hi in zip(step._gibbs_sites, lower, upper, strict=True)
    }
    _, fn = step._balancing()
    log_g = fn if callable(fn) else log_sqrt
    exponent = step._jump_exponent

    def moves(x: np.ndarray, uniforms: np.ndarray) -> JumpsResult:
        return block_jumps(
            step._site_logp,
            x,
            uniforms,
            order,
            exponent,
            log_g,
            step._jump_target.bounds_at,
            gibbs,
        )

    return order, moves
