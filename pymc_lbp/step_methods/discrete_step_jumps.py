"""DiscreteStep's integer sites: which are drawn from their full conditional over a small support
(support Gibbs) and which jump, the compiled jumps (compiled at the first draw that moves an
integer site, the one rule), and the tuning of the jumps' scale exponent.

A mixin of :class:`pymc_lbp.step_methods.base.DiscreteStep`; the jump kernel itself is in
:mod:`pymc_lbp.samplers.integer`.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse as sp

from pymc_lbp.logp.differences import Differences
from pymc_lbp.logp.layout import BINARY, INTEGER
from pymc_lbp.logp.site_colouring import greedy_colouring
from pymc_lbp.logp.site_pieces import site_pieces
from pymc_lbp.samplers.balancing import log_sqrt
from pymc_lbp.samplers.integer.graph import CompiledJumps
from pymc_lbp.samplers.integer.reference import (
    LARGEST_SCALE_EXPONENT,
    MAX_SCALE_EXPONENT,
    grown_exponent,
    scale_exponent,
    start_exponent,
    uses_support_gibbs,
)
from pymc_lbp.samplers.single_site.graph import graph_balancing

_log = logging.getLogger("pymc_lbp")

SUPPORT_GIBBS_MAX_ELEMENTS = 2**22
"""Integer sites are drawn from their full conditional over a small support only while one
batched evaluation of the support costs at most this many elements (rows times the model's
size, :func:`_model_size`); beyond it they jump (a few dozen rows)."""


def _model_size(model, point: dict) -> int:
    """Elements of the model's free values (at ``point``) and observed data: what one row of a
    batched logp evaluation touches, up to a constant."""
    size = sum(int(np.size(v)) for v in point.values())
    for rv in model.observed_RVs:
        data = model.rvs_to_values.get(rv)
        value = getattr(data, "data", None)
        if value is None and hasattr(data, "get_value"):
            value = data.get_value()
        size += int(np.size(value)) if value is not None else 1
    return max(size, 1)


class DiscreteStepJumps:
    """The integer sites of :class:`DiscreteStep`: support Gibbs and jumps."""

    def _support_gibbs_sites(self, model, initial_point: dict) -> np.ndarray:
        """Integer sites drawn from their full conditional over their support
        (:func:`pymc_lbp.samplers.integer.reference.support_gibbs`) instead of jumping: those with a
        fixed support of at most :data:`SUPPORT_GIBBS_MAX_VALUES` values, when the block's supports
        are all fixed and the batched evaluation of the support stays below
        :data:`SUPPORT_GIBBS_MAX_ELEMENTS` (rows times the model's size)."""
        lay = self.layout
        if not self._jump_target.bounds_are_constant():
            return np.zeros(0, dtype=np.int64)
        small = [s for s in self._integer_sites if uses_support_gibbs(lay.lower[s], lay.upper[s])]
        if not small:
            return np.zeros(0, dtype=np.int64)
        rows = max(int(lay.upper[s] - lay.lower[s]) + 1 for s in small)
        if rows * _model_size(model, initial_point) > SUPPORT_GIBBS_MAX_ELEMENTS:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(small, dtype=np.int64)

    def _site_supports(self, sites: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` of ``sites`` (float, infinite where unbounded): ``0 .. K - 1`` for
        binary and categorical sites, the layout's bounds for integer ones."""
        lay = self.layout
        kind = lay.site_kind[sites]
        lower = np.where(kind == INTEGER, lay.lower[sites], 0)
        upper = np.where(
            kind == INTEGER,
            lay.upper[sites],
            np.where(kind == BINARY, 1, lay.site_ncat[sites] - 1),
        )
        return lower.astype(np.float64), upper.astype(np.float64)

    def _sites_are_independent(self, model, initial_point: dict, specs, shared: dict) -> bool:
        """Whether the block's sites are conditionally independent given the rest of the model:
        no term of the logp touches two of them (the dependency analysis of
        :mod:`pymc_lbp.logp.local_differences`), as the inclusion indicators of a spike-and-slab
        prior or per-unit latent classes. Then informed proposals have nothing to balance (a
        site's move changes no other site's conditional), and a draw gives every site one draw
        from its full conditional over its support, all sites in one compiled call (the
        support Gibbs of :mod:`pymc_lbp.samplers.integer.reference`), and ``steps_per_draw``
        defaults to 0. False when ``steps_per_draw`` is given (the sampler's own steps, as asked),
        when the analysis cannot tell, for a block of one site, where a site's support is not fixed
        or is larger than :data:`~pymc_lbp.samplers.integer.reference.SUPPORT_GIBBS_MAX_VALUES`, or
        where evaluating the supports would cost more than :data:`SUPPORT_GIBBS_MAX_ELEMENTS`."""
        lay = self.layout
        if not self.independent_sites_at_once or lay.n_sites < 2 or self._steps_per_draw:
            return False
        target = Differences(model, specs, lay, shared)  # the block's graph, nothing compiled
        if not target.bounds_are_constant():
            return False
        target.refresh_bounds(self._x0)  # the integer sites' (fixed) supports into the layout
        lower, upper = self._site_supports(np.arange(lay.n_sites))
        if not all(uses_support_gibbs(lo, hi) for lo, hi in zip(lower, upper, strict=True)):
            return False
        rows = int(np.max(upper - lower)) + 1  # finite: uses_support_gibbs checked each
        if rows * _model_size(model, initial_point) > SUPPORT_GIBBS_MAX_ELEMENTS:
            return False
        pieces = site_pieces(model, target._replace, target._x, lay.n_sites, self._x0)
        if pieces is None:
            return False
        self._site_pieces = pieces  # reused by the colour classes
        incidence = sp.csr_matrix(pieces.element_sites)
        shared_terms = incidence.T @ incidence
        return shared_terms.nnz == lay.n_sites  # only the diagonal: no two sites share a term

    def _block_jump_exponent(self) -> int:
        """``J`` of the jump offsets at the start (supports refreshed at the start point).

        When the jumping sites' supports are fixed and finite, the largest
        :func:`scale_exponent` of them (the largest jump spans every support), fixed for good.
        Otherwise (an unbounded support, or one that follows other variables and may widen) the
        chain's starting exponent (:meth:`_jump_exponent_at`: at least
        :data:`MAX_SCALE_EXPONENT`, enough for the start's magnitude), which tuning may grow
        (:meth:`_tune_jump_exponent`). Offsets beyond a site's support weigh 0 either way, see
        :mod:`pymc_lbp.samplers.integer.graph`. Sets :attr:`_jump_exponent_grows`.
        """
        lay = self.layout
        fixed = self._jump_target.bounds_are_constant() and all(
            math.isfinite(float(lay.upper[site]) - float(lay.lower[site]))
            for site in self._jump_sites
        )
        self._jump_exponent_grows = not fixed
        if fixed:
            return max(
                (scale_exponent(lay.lower[site], lay.upper[site]) for site in self._jump_sites),
                default=1,
            )
        return self._jump_exponent_at(self._x0)

    @property
    def _site_logp(self):
        """The compiled batched logp at one-site changes the jumps evaluate (the numpy
        reference's input, for tests; the compiled jumps build on its graph, so it is compiled
        only on first use)."""
        return self._jump_target.site_logp_function()

    @property
    def jumps(self) -> CompiledJumps:
        """The compiled integer jumps (:class:`pymc_lbp.samplers.integer.graph.CompiledJumps`),
        compiled on first use: the step's first draw that moves an integer site, and again
        after tuning grows ``J``."""
        if self._jumps is None:
            self._jumps = self._compile_jumps()
        return self._jumps

    def _compile_jumps(self) -> CompiledJumps:
        """The compiled jumps at the current :attr:`_jump_exponent` (kept per exponent: chains
        that tune ``J`` again from their start reuse them)."""
        cached = self.__dict__.setdefault("_jumps_by_exponent", {})
        if self._jump_exponent not in cached:
            cached[self._jump_exponent] = self.build_jumps(compile_now=True)
        return cached[self._jump_exponent]

    def build_jumps(self, compile_now: bool = False) -> CompiledJumps:
        """The integer sites' moves at the current :attr:`_jump_exponent` as one
        :class:`~pymc_lbp.samplers.integer.graph.CompiledJumps`, compiled or (default) only its
        graphs (:mod:`pymc_lbp.whole_model` compiles them to JAX)."""
        name, fn = self._balancing()
        log_g = graph_balancing(name, fn) if callable(fn) else graph_balancing("sqrt", log_sqrt)
        target = self._jump_target
        jump_classes, gibbs_classes, pieces = self._move_classes
        lower, upper = self._site_supports(self._gibbs_sites)
        jumps = CompiledJumps(
            self._jump_sites,
            self._jump_exponent,
            target.site_logp_graph,
            target.bounds_graph,
            log_g,
            self._jump_compile_kwargs,
            gibbs_sites=self._gibbs_sites,
            gibbs_lower=lower.astype(np.int64),
            gibbs_upper=upper.astype(np.int64),
            jump_classes=jump_classes,
            gibbs_classes=gibbs_classes,
            class_rows=None if pieces is None else pieces.class_rows,
            n_sites=self.layout.n_sites,
            compile_now=compile_now,
        )
        return jumps

    def _independent_classes(self, model) -> tuple[list | None, list | None, object]:
        """Colour classes of the jumping and of the support-Gibbs sites: sites that share no
        term of the logp (the dependency analysis of :mod:`pymc_lbp.logp.local_differences`) move
        at once, their one-site changes evaluated from the logp's elements
        (:meth:`~pymc_lbp.logp.site_pieces.SitePieces.class_rows`). None for a group whose
        sites all interact; all None when the graph cannot be analysed or a term couples sites the
        analysis cannot name."""
        groups = (self._jump_sites, self._gibbs_sites)
        if max(g.size for g in groups) < 2:
            return None, None, None
        pieces = self._site_pieces
        if pieces is None:
            target = self._jump_target
            pieces = site_pieces(model, target._replace, target._x, self.layout.n_sites, self._x0)
        if pieces is None:
            return None, None, None
        incidence = pieces.element_sites
        adjacency = sp.csr_matrix(incidence.T @ incidence)
        out = []
        for sites in groups:
            if sites.size < 2:
                out.append(None)
                continue
            colours = greedy_colouring(sp.csr_matrix(adjacency[sites][:, sites]))
            classes = [np.flatnonzero(colours == c) for c in range(int(colours.max()) + 1)]
            out.append(classes if len(classes) < sites.size else None)
        return out[0], out[1], pieces

    def _jump_integer_sites(self, x: np.ndarray) -> tuple[np.ndarray, float, dict, int, int]:
        """One move per integer site in one compiled call (:attr:`jumps`); returns the state,
        its logp, the stats, the jumps accepted and the logp evaluations made.

        While tuning, the jumps' exponent ``J`` adapts where the supports do not fix it
        (:meth:`_tune_jump_exponent`); after tuning it is frozen, so the kernel is one fixed
        pi-invariant kernel.
        """
        if self.tune and self._jump_exponent_grows and self._tune_draws == 0:
            self._restart_jump_exponent(x)  # a chain's first tuning draw: J from its start
        n = self._integer_sites.size
        jumps = self.jumps
        res = jumps(x, self.rng.random((n, 2)))
        if self.tune and self._jump_exponent_grows:
            self._tune_jump_exponent(x, res.x)
        stats = {"integer_accept": res.sum_accept / n, "integer_jump": res.sum_distance / n}
        return res.x, res.logp, stats, res.n_accepted, jumps.logp_evals_per_call

    def _jump_exponent_at(self, x: np.ndarray) -> int:
        """``J`` a chain started at ``x`` starts from, on a block whose supports do not fix it:
        the largest :func:`~pymc_lbp.samplers.integer.reference.start_exponent` of the jumping sites
        at ``x`` (at least :data:`MAX_SCALE_EXPONENT`, enough bits for the start's magnitude,
        a finite support spanned)."""
        if not self._jump_target.bounds_are_constant():
            self._jump_target.refresh_bounds(x)  # the supports at this start
        lay = self.layout
        return max(
            (start_exponent(x[s], lay.lower[s], lay.upper[s]) for s in self._jump_sites),
            default=MAX_SCALE_EXPONENT,
        )

    def _restart_jump_exponent(self, x: np.ndarray) -> None:
        """Start tuning ``J`` afresh from the chain's start ``x`` (its first tuning draw): every
        chain tunes its own, as a copy of the untuned step does under ``pm.sample(cores > 1)``,
        whether the chains run in sequence or in parallel."""
        exponent = self._jump_exponent_at(x)
        if exponent != self._jump_exponent:
            _log.debug(
                "%s on %s: integer jumps start at J = %d (offsets up to +-2^%d).",
                type(self).__name__,
                self.var_names,
                exponent,
                exponent,
            )
            self._set_jump_exponent(exponent)

    def _tune_jump_exponent(self, x: np.ndarray, y: np.ndarray) -> None:
        """Grow ``J`` after a tuning draw ``x -> y`` in which a jumping site's accepted jump used
        the largest offset ``2^J`` (:func:`~pymc_lbp.samplers.integer.reference.grown_exponent`:
        doubled, at most 62); the jumps are compiled again at the next draw.

        A jump to the edge of the offsets says larger moves are wanted: a chain started far
        from its posterior, or a posterior wider than ``2^J``. Only the tuning draws adapt ``J``
        (tune-then-freeze), and it is a property of the step, not of the state, so each frozen
        kernel has the same offsets forward and in reverse.
        """
        exponent = int(self._jump_exponent)
        sites = self._jump_sites
        if exponent >= LARGEST_SCALE_EXPONENT or sites.size == 0:
            return
        # each jumping site jumps once per call: its change is its accepted offset (int64-safe)
        moved = np.abs(np.asarray(y, dtype=np.int64)[sites] - np.asarray(x, dtype=np.int64)[sites])
        if not np.any(moved == 2**exponent):
            return
        grown = grown_exponent(exponent)
        _log.info(
            "%s on %s: a tuning jump used the largest offset 2^%d; integer jumps now reach "
            "+-2^%d (J %d -> %d, compiled again for the next draw).",
            type(self).__name__,
            self.var_names,
            exponent,
            grown,
            exponent,
            grown,
        )
        self._set_jump_exponent(grown)

    def _set_jump_exponent(self, exponent: int) -> None:
        """Make ``exponent`` the jumps' ``J``; their compiled call follows lazily (:attr:`jumps`,
        from the cache of :meth:`_compile_jumps` when this ``J`` was compiled before)."""
        self._jump_exponent = int(exponent)
        self._jumps = None
