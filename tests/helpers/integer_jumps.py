"""A step's integer moves with the numpy reference, for the twin tests of its compiled jumps."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pymc_lbp.samplers.integer.graph import move_order
from pymc_lbp.samplers.integer.moves import site_supports
from pymc_lbp.samplers.integer.reference import JumpsResult, block_jumps


def reference_jumps(step) -> tuple[np.ndarray, Callable[[np.ndarray, np.ndarray], JumpsResult]]:
    """``(order, moves)`` of ``step``'s integer sites at its current ``J``: the sites in the
    order of the rows of a call's uniforms, and ``moves(x, uniforms)``, what
    ``step.integer_moves.jumps`` makes from them, made by
    :func:`pymc_lbp.samplers.integer.reference.block_jumps` site after site with the step's
    compiled batched logp, its supports read at the current state and its support-Gibbs sites'
    fixed supports."""
    it = step.integer_moves
    order = move_order(it.jump_sites, it.gibbs_sites, it.jump_classes, it.gibbs_classes)
    lower, upper = site_supports(it.layout, it.gibbs_sites)
    gibbs = {
        int(s): (float(lo), float(hi))
        for s, lo, hi in zip(it.gibbs_sites, lower, upper, strict=True)
    }
    exponent = it.exponent

    def moves(x: np.ndarray, uniforms: np.ndarray) -> JumpsResult:
        return block_jumps(
            it.site_logp, x, uniforms, order, exponent, it.log_g, it.target.bounds_at, gibbs
        )

    return order, moves
