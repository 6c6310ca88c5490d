"""A block's integer moves as a component its step holds: :class:`IntegerMoves`.

It owns the block's moving integer sites: which are drawn from their full conditional over a
small support (support Gibbs) and which jump, the jumps' scale exponent ``J`` and its growth while
tuning, and the compiled call that makes a draw's moves
(:class:`~pymc_lbp.samplers.integer.graph.CompiledJumps`, compiled at the first draw that moves
an integer site, the one rule). A step (:class:`pymc_lbp.step_methods.base.DiscreteStep`) holds
one, ``step.integer_moves``, where its block has integer sites or conditionally independent
sites (:func:`sites_are_independent`), and calls :meth:`IntegerMoves.draw` once per draw; the
compiled whole-model program (:mod:`pymc_lbp.whole_model`) reads the same object through
:meth:`IntegerMoves.start_chains` and :meth:`IntegerMoves.build`.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from pymc_lbp.logp.differences import Differences, ExactDifferences
from pymc_lbp.logp.layout import BINARY, INTEGER, BlockLayout
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
size, :func:`model_size`); beyond it they jump (a few dozen rows)."""


def model_size(model, point: dict) -> int:
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


def site_supports(layout: BlockLayout, sites: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` of ``sites`` (float, infinite where unbounded): ``0 .. K - 1`` for
    binary and categorical sites, the layout's bounds for integer ones."""
    kind = layout.site_kind[sites]
    lower = np.where(kind == INTEGER, layout.lower[sites], 0)
    upper = np.where(
        kind == INTEGER,
        layout.upper[sites],
        np.where(kind == BINARY, 1, layout.site_ncat[sites] - 1),
    )
    return lower.astype(np.float64), upper.astype(np.float64)


def sites_are_independent(model, specs, layout: BlockLayout, shared: dict, x0, point: dict):
    """``(independent, pieces)``: whether the block's sites are conditionally independent given
    the rest of the model, no term of the logp touching two of them (the dependency analysis of
    :mod:`pymc_lbp.logp.local_differences`), as the inclusion indicators of a spike-and-slab prior
    or per-unit latent classes, and the analysis (:func:`~pymc_lbp.logp.site_pieces.site_pieces`,
    None where it did not run or could not tell), which :class:`IntegerMoves` reuses for its
    colour classes. Not independent where a site's support is not fixed or is larger than
    :data:`~pymc_lbp.samplers.integer.reference.SUPPORT_GIBBS_MAX_VALUES`, or where evaluating
    the supports would cost more than :data:`SUPPORT_GIBBS_MAX_ELEMENTS`. Then informed
    proposals have nothing to balance, and a draw gives every site one draw from its full
    conditional over its support, all sites in one compiled call."""
    target = Differences(model, specs, layout, shared)  # the block's graph, nothing compiled
    if not target.bounds_are_constant():
        return False, None
    target.refresh_bounds(x0)  # the integer sites' (fixed) supports into the layout
    lower, upper = site_supports(layout, np.arange(layout.n_sites))
    if not all(uses_support_gibbs(lo, hi) for lo, hi in zip(lower, upper, strict=True)):
        return False, None
    rows = int(np.max(upper - lower)) + 1  # finite: uses_support_gibbs checked each
    if rows * model_size(model, point) > SUPPORT_GIBBS_MAX_ELEMENTS:
        return False, None
    pieces = site_pieces(model, target._replace, target._x, layout.n_sites, x0)
    if pieces is None:
        return False, None
    incidence = sp.csr_matrix(pieces.element_sites)
    shared_terms = incidence.T @ incidence
    return shared_terms.nnz == layout.n_sites, pieces  # only the diagonal: no term shared


class IntegerDraw(NamedTuple):
    """A draw's integer moves: the state, its logp, the stats (``integer_accept``,
    ``integer_jump_size``), the moves accepted and the model logp evaluations made."""

    x: np.ndarray
    logp: float
    stats: dict
    n_accepted: int
    logp_evals: int


class IntegerMoves:
    """One move per moving site of a block each draw: an informed jump
    (:func:`pymc_lbp.samplers.integer.reference.jump`) or, for a site of small fixed support, a
    draw from its full conditional (:func:`~pymc_lbp.samplers.integer.reference.support_gibbs`),
    all in one compiled call.

    Parameters
    ----------
    layout : BlockLayout
        The step's block (its integer bounds are refreshed in place).
    sites : array of int
        The moving sites: the block's integer sites, or every site of a block of conditionally
        independent sites (then all drawn from their full conditionals: ``all_gibbs``).
    target : ExactDifferences
        Whose batched logp at one-site changes the moves evaluate.
    model, point, x0 :
        The model, the start point and its block vector, read at construction only.
    all_gibbs : bool
        Every site drawn from its full conditional (conditionally independent sites).
    pieces : SitePieces, optional
        The dependency analysis, when :func:`sites_are_independent` ran it.
    balancing : tuple
        ``(name, log-space function)`` of the step's balancing (sqrt when it has none).
    compile_kwargs : dict, optional
        Passed to the jumps' compilation.
    label : str
        How the log names the step.

    Attributes
    ----------
    sites, jump_sites, gibbs_sites : arrays of int
        Every moving site; those that jump; those drawn over their support.
    exponent : int
        ``J`` of the jumps' offsets ``+-1 .. +-2^J``.
    start_exponent : int
        ``J`` at construction, which :meth:`reset` restores.
    exponent_grows : bool
        Whether tuning adapts ``J`` (a jumping site's support is unbounded or not fixed).
    jump_classes, gibbs_classes : lists of arrays of int or None
        Colour classes of the jumping and the support-Gibbs sites (sites sharing no term of the
        logp move at once).
    """

    def __init__(
        self,
        layout: BlockLayout,
        sites: np.ndarray,
        target: ExactDifferences,
        *,
        model,
        point: dict,
        x0: np.ndarray,
        all_gibbs: bool = False,
        pieces=None,
        balancing: tuple = (None, None),
        compile_kwargs: dict | None = None,
        label: str = "IntegerMoves",
    ):
        self.layout = layout
        self.sites = np.asarray(sites, dtype=np.int64)
        self.target = target
        self.balancing = balancing
        self.compile_kwargs = compile_kwargs
        self.label = label
        # the supports at the start decide which sites jump and which are drawn over them
        target.refresh_bounds(x0)
        self.gibbs_sites = self.sites if all_gibbs else self._support_gibbs_sites(model, point)
        self.jump_sites = np.setdiff1d(self.sites, self.gibbs_sites)
        self.exponent_grows = not self._exponent_is_fixed()
        self.start_exponent = self.exponent = self._first_exponent(x0)
        self.jump_classes, self.gibbs_classes, self._pieces = self._colour_classes(
            model, x0, pieces
        )
        self._compiled: dict[int, CompiledJumps] = {}  # per J: chains that tune again reuse them

    # -- construction -------------------------------------------------------------------------
    def _support_gibbs_sites(self, model, point: dict) -> np.ndarray:
        """Integer sites drawn from their full conditional over their support instead of
        jumping: those with a fixed support of at most
        :data:`~pymc_lbp.samplers.integer.reference.SUPPORT_GIBBS_MAX_VALUES` values, when the
        block's supports are all fixed and the batched evaluation of the support stays below
        :data:`SUPPORT_GIBBS_MAX_ELEMENTS` (rows times the model's size)."""
        lay = self.layout
        none = np.zeros(0, dtype=np.int64)
        if not self.target.bounds_are_constant():
            return none
        small = [s for s in self.sites if uses_support_gibbs(lay.lower[s], lay.upper[s])]
        if not small:
            return none
        rows = max(int(lay.upper[s] - lay.lower[s]) + 1 for s in small)
        if rows * model_size(model, point) > SUPPORT_GIBBS_MAX_ELEMENTS:
            return none
        return np.asarray(small, dtype=np.int64)

    def _exponent_is_fixed(self) -> bool:
        """Whether the jumping sites' supports are fixed and finite (then ``J`` spans them)."""
        lay = self.layout
        return self.target.bounds_are_constant() and all(
            math.isfinite(float(lay.upper[site]) - float(lay.lower[site]))
            for site in self.jump_sites
        )

    def _first_exponent(self, x0: np.ndarray) -> int:
        """``J`` at the start: where the supports fix it, the largest :func:`scale_exponent` of
        the jumping sites (the largest jump spans every support), for good; otherwise the
        chain's starting exponent (:meth:`exponent_at`), which tuning may grow (:meth:`grow`).
        Offsets beyond a site's support weigh 0 either way."""
        if self.exponent_grows:
            return self.exponent_at(x0)
        lay = self.layout
        return max(
            (scale_exponent(lay.lower[site], lay.upper[site]) for site in self.jump_sites),
            default=1,
        )

    def _colour_classes(self, model, x0, pieces) -> tuple[list | None, list | None, object]:
        """Colour classes of the jumping and of the support-Gibbs sites: sites that share no
        term of the logp move at once, their one-site changes evaluated from the logp's elements
        (:meth:`~pymc_lbp.logp.site_pieces.SitePieces.class_rows`). None for a group whose sites
        all interact; all None when the graph cannot be analysed or a term couples sites the
        analysis cannot name."""
        groups = (self.jump_sites, self.gibbs_sites)
        if max(g.size for g in groups) < 2:
            return None, None, None
        if pieces is None:
            target = self.target
            pieces = site_pieces(model, target._replace, target._x, self.layout.n_sites, x0)
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

    # -- the compiled moves ---------------------------------------------------------------------
    @property
    def n_sites(self) -> int:
        """Moves a draw makes: one per moving site."""
        return int(self.sites.size)

    @property
    def site_logp(self):
        """The compiled batched logp at one-site changes the moves evaluate (the numpy
        reference's input, for tests; compiled on first use)."""
        return self.target.site_logp_function()

    @property
    def log_g(self):
        """The balancing function the jumps are weighted with, ``d -> log g(e^d)`` (numpy; sqrt
        where the step has none)."""
        fn = self.balancing[1]
        return fn if callable(fn) else log_sqrt

    def build(self, compile_now: bool = False) -> CompiledJumps:
        """The moves at the current :attr:`exponent` as one
        :class:`~pymc_lbp.samplers.integer.graph.CompiledJumps`, compiled or (default) only its
        graphs (:mod:`pymc_lbp.whole_model` compiles them to JAX)."""
        name, fn = self.balancing
        log_g = graph_balancing(name, fn) if callable(fn) else graph_balancing("sqrt", log_sqrt)
        lower, upper = site_supports(self.layout, self.gibbs_sites)
        return CompiledJumps(
            self.jump_sites,
            self.exponent,
            self.target.site_logp_graph,
            self.target.bounds_graph,
            log_g,
            self.compile_kwargs,
            gibbs_sites=self.gibbs_sites,
            gibbs_lower=lower.astype(np.int64),
            gibbs_upper=upper.astype(np.int64),
            jump_classes=self.jump_classes,
            gibbs_classes=self.gibbs_classes,
            class_rows=None if self._pieces is None else self._pieces.class_rows,
            n_sites=self.layout.n_sites,
            compile_now=compile_now,
        )

    @property
    def jumps(self) -> CompiledJumps:
        """The compiled moves at the current :attr:`exponent`, compiled on first use (the
        step's first draw that moves an integer site, and again after tuning grows ``J``; kept
        per exponent)."""
        jumps = self._compiled.get(self.exponent)
        if jumps is None:
            jumps = self._compiled[self.exponent] = self.build(compile_now=True)
        return jumps

    @property
    def is_compiled(self) -> bool:
        """Whether the moves at the current :attr:`exponent` are compiled."""
        return self.exponent in self._compiled

    def draw(
        self, x: np.ndarray, rng, *, tuning: bool = False, chain_start: bool = False
    ) -> IntegerDraw:
        """One move per moving site from ``x`` in one compiled call (:attr:`jumps`), two
        uniforms per site from ``rng`` (the step's).

        While ``tuning``, ``J`` adapts where the supports do not fix it: from the chain's start
        at its first tuning draw (``chain_start``, :meth:`restart`), then grown after a jump to
        the largest offset (:meth:`grow`); after tuning it is frozen, so the kernel is one fixed
        pi-invariant kernel.
        """
        adapt = tuning and self.exponent_grows
        if adapt and chain_start:
            self.restart(x)
        jumps = self.jumps
        res = jumps(x, rng.random((self.n_sites, 2)))
        if adapt:
            self.grow(x, res.x)
        n = self.n_sites
        stats = {"integer_accept": res.sum_accept / n, "integer_jump_size": res.sum_distance / n}
        return IntegerDraw(res.x, res.logp, stats, res.n_accepted, jumps.logp_evals_per_call)

    # -- the exponent J ---------------------------------------------------------------------------
    def exponent_at(self, x: np.ndarray) -> int:
        """``J`` a chain started at ``x`` starts from, where the supports do not fix it: the
        largest :func:`~pymc_lbp.samplers.integer.reference.start_exponent` of the jumping sites
        at ``x`` (at least :data:`MAX_SCALE_EXPONENT`, enough bits for the start's magnitude, a
        finite support spanned)."""
        if not self.target.bounds_are_constant():
            self.target.refresh_bounds(x)  # the supports at this start
        lay = self.layout
        return max(
            (start_exponent(x[s], lay.lower[s], lay.upper[s]) for s in self.jump_sites),
            default=MAX_SCALE_EXPONENT,
        )

    def start_chains(self, starts) -> None:
        """``J`` for chains started at each of ``starts`` (the compiled program's, which keeps
        it): the largest :meth:`exponent_at` over them, where the supports do not fix it."""
        if self.exponent_grows and len(starts):
            self.exponent = max(self.exponent_at(x) for x in starts)

    def reset(self) -> None:
        """Restore the untuned ``J`` (the step's ``reset_tuning``)."""
        self.exponent = self.start_exponent

    def restart(self, x: np.ndarray) -> None:
        """Start tuning ``J`` afresh from the chain's start ``x`` (its first tuning draw): every
        chain tunes its own, as a copy of the untuned step does under ``pm.sample(cores > 1)``,
        whether the chains run in sequence or in parallel."""
        exponent = self.exponent_at(x)
        if exponent != self.exponent:
            _log.debug(
                "%s: integer jumps start at J = %d (offsets up to +-2^%d).",
                self.label,
                exponent,
                exponent,
            )
            self.exponent = exponent

    def grow(self, x: np.ndarray, y: np.ndarray) -> None:
        """Grow ``J`` after a tuning draw ``x -> y`` in which a jumping site's accepted jump used
        the largest offset ``2^J`` (:func:`~pymc_lbp.samplers.integer.reference.grown_exponent`:
        doubled, at most 62); the jumps are compiled again at the next draw.

        A jump to the edge of the offsets says larger moves are wanted: a chain started far
        from its posterior, or a posterior wider than ``2^J``. Only the tuning draws adapt ``J``
        (tune-then-freeze), and it is a property of the step, not of the state, so each frozen
        kernel has the same offsets forward and in reverse.
        """
        exponent = int(self.exponent)
        sites = self.jump_sites
        if exponent >= LARGEST_SCALE_EXPONENT or sites.size == 0:
            return
        # each jumping site jumps once per call: its change is its accepted offset (int64-safe)
        moved = np.abs(np.asarray(y, dtype=np.int64)[sites] - np.asarray(x, dtype=np.int64)[sites])
        if not np.any(moved == 2**exponent):
            return
        grown = grown_exponent(exponent)
        _log.info(
            "%s: a tuning jump used the largest offset 2^%d; integer jumps now reach +-2^%d "
            "(J %d -> %d, compiled again for the next draw).",
            self.label,
            exponent,
            grown,
            exponent,
            grown,
        )
        self.exponent = grown
