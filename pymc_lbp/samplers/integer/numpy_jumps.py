"""The integer jumps of a draw in numpy: :class:`CompiledJumps`' twin, run until compiling pays.

A step moves every integer site once per draw. :class:`~pymc_lbp.samplers.integer.graph.
CompiledJumps` does it in one compiled call, but compiling that call costs seconds warm and tens
of seconds with an empty compile cache (the coal-mining switch point: 20 s of a 23 s step
construction), more than a whole run of a few sites needs. :class:`NumpyJumps` makes the same
moves from the same uniforms with the numpy references
(:func:`~pymc_lbp.samplers.integer.reference.jump`,
:func:`~pymc_lbp.samplers.integer.reference.support_gibbs`), site after site in the compiled
call's order (the sites of a colour class share no term, so moving them one by one is moving them
at once), with the supports read at the current state as the graph reads them. The step runs it
until :func:`compiling_pays` and then compiles (the twin tests check move for move that the
switch changes nothing but the speed).

When compiling pays depends on what the compile directory holds, which the step reads from its
record (:mod:`pymc_lbp.compile_record`, whose rule this is): the jumps compiled there before (a
warm compile of a second or less), after :data:`COMPILE_AFTER_SECONDS_WARM` of numpy moves;
never compiled there (tens of seconds of gcc), once the numpy moves of this run and the earlier
ones together took :data:`COMPILE_AFTER_SECONDS_COLD`. The rows the numpy jumps score come from
the batched logp where it was compiled there before, else from the model's own logp row after row
(no vectorised graph compiled: :meth:`~pymc_lbp.logp.differences.ExactDifferences.site_logp_rows`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pymc_lbp.compile_record import (
    COMPILE_AFTER_SECONDS_COLD,
    COMPILE_AFTER_SECONDS_WARM,
    compiling_pays,
)
from pymc_lbp.samplers.balancing import LogBalancing
from pymc_lbp.samplers.integer.graph import JumpsResult, move_order
from pymc_lbp.samplers.integer.reference import jump, offsets, support_gibbs


class _GivenUniforms:
    """A generator stand-in whose ``random()`` hands out one row of the call's uniforms."""

    def __init__(self, row: np.ndarray):
        self._row = iter(row.tolist())

    def random(self) -> float:
        return next(self._row)


class NumpyJumps:
    """One move per integer site from ``(x, uniforms)``, as :class:`CompiledJumps` makes it.

    Parameters
    ----------
    sites, gibbs_sites : arrays of int
        The jumping and the support-Gibbs sites (positions in the block vector).
    exponent : int
        ``J`` of the jumps' offsets.
    site_logp : callable
        ``(x, sites, values) -> (logp(x), rows)``: the compiled batched logp
        (:meth:`pymc_lbp.logp.differences.ExactDifferences.site_logp_function`) or the model's
        logp row after row (:meth:`~pymc_lbp.logp.differences.ExactDifferences.site_logp_rows`).
    supports : callable
        ``x -> (lower, upper)``: every site's support at ``x`` (read for the jumping sites).
    gibbs_lower, gibbs_upper : arrays
        The support-Gibbs sites' fixed supports, in the order of ``gibbs_sites``.
    log_g : callable
        Balancing function in log space (numpy).
    jump_classes, gibbs_classes : lists of arrays of int, optional
        The colour classes the compiled call moves at once; they fix the order of the rows.
    """

    def __init__(
        self,
        sites: np.ndarray,
        gibbs_sites: np.ndarray,
        exponent: int,
        site_logp: Callable,
        supports: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
        gibbs_lower: np.ndarray,
        gibbs_upper: np.ndarray,
        log_g: LogBalancing,
        jump_classes: list[np.ndarray] | None = None,
        gibbs_classes: list[np.ndarray] | None = None,
    ):
        self.order = move_order(sites, gibbs_sites, jump_classes, gibbs_classes)
        self._gibbs = {
            int(site): (float(lo), float(hi))
            for site, lo, hi in zip(gibbs_sites, gibbs_lower, gibbs_upper, strict=True)
        }
        self.exponent = int(exponent)
        self._n_offsets = offsets(self.exponent).size
        self._site_logp = site_logp
        self._supports = supports
        self._log_g = log_g
        self.logp_evals = 0  # rows evaluated by the last call

    def __call__(self, x: np.ndarray, uniforms: np.ndarray) -> JumpsResult:
        """Move every integer site once from ``x``; ``uniforms`` has shape ``(len(order), 2)``."""
        x = np.asarray(x, dtype=np.int64).copy()
        logp = None
        sum_accept, sum_distance, n_moved, evals = 0.0, 0, 0, 0
        for row, site in enumerate(self.order.tolist()):
            given = _GivenUniforms(uniforms[row])
            if site in self._gibbs:
                support = self._gibbs[site]
                out = support_gibbs(self._site_logp, x, site, support, given)
                evals += int(support[1] - support[0]) + 1
            else:
                lower, upper = self._supports(x)
                support = (float(lower[site]), float(upper[site]))
                out = jump(self._site_logp, x, site, self.exponent, self._log_g, given, support)
                evals += 2 * (self._n_offsets + 1)
            x, logp = out.x, out.logp
            sum_accept += out.accept
            sum_distance += out.distance
            n_moved += int(out.distance > 0)
        if logp is None:
            logp = float(self._site_logp(x, np.zeros(0, np.int64), np.zeros(0, np.int64))[0])
        self.logp_evals = evals
        return JumpsResult(x, float(logp), float(sum_accept), int(sum_distance), n_moved)


__all__ = [
    "COMPILE_AFTER_SECONDS_COLD",
    "COMPILE_AFTER_SECONDS_WARM",
    "NumpyJumps",
    "compiling_pays",
]
