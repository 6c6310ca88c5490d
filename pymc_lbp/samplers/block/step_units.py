"""NeuralBlock's update units and how they are resolved from the blocks: the unit record
(:class:`_Unit`), the model logp it scores block states with where the factors are not used
(:class:`ModelLogp`), and the block-resolution methods (:class:`NeuralBlockUnits`: the units,
the chain blocks' colour classes, the choice of target, the start and cardinality checks).

A mixin of :class:`pymc_lbp.samplers.block.step.NeuralBlock`, which builds its units in
``__init__`` with :meth:`NeuralBlockUnits._build_units`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import clone_replace, vectorize_graph

from pymc_lbp.compiling import pm_compile
from pymc_lbp.factor_graph.model_info import UAIModelInfo
from pymc_lbp.logp.differences import Differences
from pymc_lbp.logp.layout import BINARY
from pymc_lbp.logp.local_logp import FactorLogp, FactorSubset
from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.logp.site_pieces import site_adjacency
from pymc_lbp.logp.vectorising import checks_per_row, unblock_gathers
from pymc_lbp.samplers.block.motifs.chain import (
    CHAIN_PARAMS_FROM,
    chain_shape,
)
from pymc_lbp.samplers.block.motifs.finding import block_dependencies, chain_order
from pymc_lbp.samplers.block.reference import (
    enumerate_block_states,
)

_NO_DELTAS = np.zeros(0)


class ModelLogp(Differences):
    """The model logp at a block state, and batched at many states (no neighbour differences).

    The block samplers' :attr:`~pymc_lbp.step_methods.base.DiscreteStep.target`: ``__call__``
    returns ``(logp, empty array)``, the shape of the neighbour samplers' target.
    """

    kind = "logp"
    logp_evals_per_call = 1

    def __init__(self, model, specs, layout, shared, compile_kwargs=None, balancing=None):
        super().__init__(model, specs, layout, shared, compile_kwargs, balancing)
        self._logp_graph = clone_replace(model_logp(model), replace=self._replace)
        self._kw = dict(on_unused_input="ignore", **self._compile_kwargs)
        # made on first use (a sampler of chain blocks scores rows only)
        self._fn = None
        self._batch_fn = None

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        return self.logp(x), _NO_DELTAS

    def logp(self, x: np.ndarray) -> float:
        """Model logp at the block state ``x`` (other variables at their shared values)."""
        return float(self._logp_function()(x))

    def _logp_function(self):
        if self._fn is None:
            self._fn = pm_compile([self._x], self._logp_graph, **self._kw)
            self._fn.trust_input = True
        return self._fn

    def rows_graph(self, X_var):
        """Graph of the model logp at every row of the block-state matrix ``X_var``."""
        # each row's parameter checks its own; gathers from tables batched natively
        return unblock_gathers(
            vectorize_graph(checks_per_row(self._logp_graph), replace={self._x: X_var})
        )

    def logp_batch(self, X: np.ndarray) -> np.ndarray:
        """Model logp at every row of ``X`` (shape (n, block size))."""
        if self._batch_fn is None:
            X_var = pt.matrix("X_block", dtype="int64")
            self._batch_fn = pm_compile([X_var], self.rows_graph(X_var), **self._kw)
            self._batch_fn.trust_input = True
        return np.asarray(self._batch_fn(np.ascontiguousarray(X, dtype=np.int64)))


@dataclass
class _Unit:
    """One update unit: a motif block (``neural`` or ``exact``) or an uncovered site."""

    kind: str  # "neural", "exact", "eliminate" (BlockGibbs' elimination blocks) or "site"
    block_idx: np.ndarray  # positions of the block entries in z = [x, outside values]
    cond_idx: np.ndarray  # positions of the conditioning entries in z
    params: np.ndarray
    free: np.ndarray  # bool per block entry: sampled by this step
    sites: np.ndarray  # positions in x of the free entries
    states: np.ndarray | None  # exact / site units: all joint states of the free entries
    label: str
    factors: FactorSubset | None = None  # factor-local logp: the factors that meet the sites
    prepared: tuple | None = None  # (network version, first-layer pre-activation of params)
    chain: tuple[int, int] | None = None  # (K, L): parameters read from the model per update
    elimination: Any = None  # "eliminate" units: their EliminationBlock (set by BlockGibbs)


class NeuralBlockUnits:
    """Block resolution of :class:`NeuralBlock`: its update units from the blocks."""

    # ------------------------------------------------------------------ block resolution
    def _site_cards(self) -> np.ndarray:
        lay = self.layout
        return np.where(lay.site_kind == BINARY, 2, lay.site_ncat).astype(np.int64)

    def _build_units(self, model, initial_point, logp_mode: str) -> None:
        offsets = {s.name: s.offset for s in self.specs}
        cards = self._site_cards()
        n = self.layout.n_sites
        outside: list[tuple] = []  # ("const", value) or ("shared", name, position)
        outside_pos: dict[tuple, int] = {}

        def ext(source: tuple) -> int:
            if source not in outside_pos:
                outside_pos[source] = n + len(outside)
                outside.append(source)
            return outside_pos[source]

        def place(name: str, pos: int, fixed: int) -> tuple[int, bool, int]:
            """(position in z, sampled by this step, cardinality or -1)."""
            if name in offsets:
                site = offsets[name] + pos
                return site, True, int(cards[site])
            if fixed >= 0:
                return ext(("const", int(fixed))), False, -1
            if name and name in initial_point:
                return ext(("shared", name, int(pos))), False, -1
            raise ValueError(f"cannot find model variable {name!r}")

        info = getattr(model, "uai_info", None)
        uai_z = None
        if isinstance(info, UAIModelInfo):
            uai_z = [place(*info.locate(v)[:3]) for v in range(info.network.n_vars)]
            uai_z = [(z, mine, int(info.network.cards[v])) for v, (z, mine, _) in enumerate(uai_z)]
        bs = self.blockset

        def locate(i: int) -> tuple[int, bool, int]:
            if bs.index == "uai":
                if uai_z is None:
                    raise ValueError(
                        "blocks use UAI network indices, but the model is not from read_uai"
                    )
                if not 0 <= i < len(uai_z):
                    raise ValueError(f"block entry {i} is not a network variable")
                return uai_z[i]
            start = 0
            for name in bs.variables:
                if name not in initial_point:
                    raise ValueError(f"blocks index {name!r}, which is not a free model variable")
                size = int(np.size(initial_point[name]))
                if start <= i < start + size:
                    return place(name, i - start, -1)
                start += size
            raise ValueError(f"block entry {i} is outside the {start} indexed sites")

        units: list[_Unit] = []
        covered = np.zeros(n, dtype=bool)
        if bs is not None and len(bs):
            motif = bs.motif
            for b in bs:
                bpos, free, bcards = [], [], []
                for j, i in enumerate(b.block.tolist()):
                    z, mine, card = locate(i)
                    if motif is not None:  # a block set without a motif: blocks of any shape
                        self._check_card(card, motif.block_cards[j], "proposed", i, b.label, motif)
                        card = motif.block_cards[j]
                    bpos.append(z)
                    free.append(mine)
                    bcards.append(card)
                cpos = []
                for j, (i, pad) in enumerate(zip(b.cond.tolist(), b.pad.tolist(), strict=True)):
                    if i < 0:
                        cpos.append(ext(("const", int(pad))))
                        continue
                    z, _, card = locate(i)
                    self._check_card(card, motif.cond_cards[j], "conditioning", i, b.label, motif)
                    cpos.append(z)
                free = np.array(free, dtype=bool)
                if not free.any():
                    raise ValueError(
                        f"block {b.label!r} has no variable sampled by this step (all are "
                        "evidence or belong to other steps)"
                    )
                bpos = np.array(bpos, dtype=np.int64)
                sites = bpos[free]
                covered[sites] = True
                kind = self.proposal if self.proposal in ("exact", "eliminate") else "neural"
                states = None
                if kind == "exact":
                    states = self._states_for(np.asarray(bcards)[free], b.label)
                chain = None
                if bs.params_from == CHAIN_PARAMS_FROM:
                    chain = chain_shape(motif)
                    if not free.all():
                        raise ValueError(
                            f"chain block {b.label!r} holds variables this step does not sample; "
                            "chain blocks must lie in the step's variables"
                        )
                units.append(
                    _Unit(
                        kind,
                        bpos,
                        np.array(cpos, np.int64),
                        b.params,
                        free,
                        sites,
                        states,
                        b.label,
                        chain=chain,
                    )
                )
        self.uncovered_sites = np.flatnonzero(~covered)
        for site in self.uncovered_sites.tolist():
            units.append(
                _Unit(
                    "site",
                    np.array([site]),
                    np.zeros(0, np.int64),
                    np.zeros(0),
                    np.ones(1, bool),
                    np.array([site]),
                    enumerate_block_states([cards[site]]),
                    f"site {site}",
                )
            )
        if not units:
            raise ValueError("NeuralBlock has nothing to update")
        self._units = units
        self.units = [u.label for u in units]
        self._outside = outside
        self._outside_values = np.array(
            [s[1] if s[0] == "const" else 0 for s in outside], dtype=np.int64
        )
        self._shared_outside = [(k, s[1], s[2]) for k, s in enumerate(outside) if s[0] == "shared"]
        self._refresh_outside()
        self._factors = None
        self.logp_mode = self._choose_logp(logp_mode, model, info, uai_z)
        self.colours = self._chain_colours(model)
        self._deps = None  # construction only: not carried into pickles

    @property
    def has_elimination_blocks(self) -> bool:
        """Whether some unit is an elimination block (drawn by bucket elimination, in numpy)."""
        return any(u.kind == "eliminate" for u in self._units)

    def _dependencies(self, model) -> list | None:
        """The model terms' dependencies on the block (one analysis for motif finding and the
        colour classes; :func:`pymc_lbp.samplers.block.motifs.finding.block_dependencies`)."""
        if self._deps is None:
            self._deps = block_dependencies(model, self.target, self.specs, self._x0)
        return self._deps

    def _chain_colours(self, model) -> list[np.ndarray] | None:
        """Colour classes of chain blocks that may be updated at once, or None.

        Only for chain blocks of a variable the model graph confirms to be a chain
        (:func:`pymc_lbp.samplers.block.motifs.finding.chain_order`), with every site in some block
        and the model logp (not factor tables) as target: two blocks get different colours when they
        share a site or a term touches a site of each (the dependency analysis), so no term
        touches two blocks of one colour and their updates given the rest are independent.
        """
        bs = self.blockset
        if (
            bs is None
            or bs.params_from != CHAIN_PARAMS_FROM
            or self.uncovered_sites.size
            or self._factors is not None
            or len(self.specs) != 1
        ):
            return None
        n = self.layout.n_sites
        deps = self._dependencies(model)
        adjacency = site_adjacency(deps, n)
        if adjacency is None or chain_order(deps, 0, n)[0] is None:
            return None
        # units conflict when they share a site or a term touches a site of each
        member = np.zeros((len(self._units), n), dtype=bool)
        for i, u in enumerate(self._units):
            member[i, u.sites] = True
        touched = (member.astype(np.int64) @ (adjacency != 0).astype(np.int64)) > 0
        conflict = (touched.astype(np.int64) @ member.T.astype(np.int64)) > 0
        colour = np.full(len(self._units), -1)
        for i in range(len(self._units)):
            taken = {int(colour[j]) for j in range(i) if conflict[i, j] or conflict[j, i]}
            colour[i] = min(c for c in range(len(self._units) + 1) if c not in taken)
        return [np.flatnonzero(colour == c) for c in range(int(colour.max()) + 1)]

    def _choose_logp(self, mode: str, model, info, uai_z) -> str:
        """Set up factor-local differences when asked for (or when "auto" finds them valid)."""
        if mode == "model":
            return "model"
        unmodified = uai_z is not None and self._is_plain_uai_model(model, info)
        if not unmodified:
            if mode == "factors":
                raise ValueError(
                    "logp='factors' needs a model built by read_uai and left unchanged (no "
                    "added variables or potentials)"
                )
            return "model"
        positions = np.array([z for z, _, _ in uai_z], dtype=np.int64)
        self._factors = FactorLogp(info.network, info.kind, positions)
        site_var = np.full(self.layout.n_sites, -1, dtype=np.int64)
        for v, (z, mine, _) in enumerate(uai_z):
            if mine:
                site_var[z] = v
        for unit in self._units:
            unit.factors = self._factors.subset(site_var[unit.sites].tolist())
        if not self._factors_agree_with_model():
            if mode == "factors":
                raise ValueError("factor-local differences disagree with the model logp")
            for unit in self._units:
                unit.factors = None
            self._factors = None
            return "model"
        return "factors"

    @staticmethod
    def _is_plain_uai_model(model, info) -> bool:
        names = set(info.members)
        rvs_ok = all(rv.name in names for rv in model.free_RVs + model.observed_RVs)
        pots_ok = all(
            info.kind == "MARKOV" and p.name and p.name.startswith("factors_")
            for p in model.potentials
        )
        return rvs_ok and pots_ok

    def _factors_agree_with_model(self) -> bool:
        """Compare factor-local and model logp differences on a few random moves."""
        rng = np.random.default_rng(0)
        x = self._state_vector_start.copy()
        logp_x = self.target.logp(x)
        cards = self._site_cards()
        for unit in self._units[: min(len(self._units), 4)]:
            y = x.copy()
            y[unit.sites] = (y[unit.sites] + 1 + rng.integers(0, cards[unit.sites] - 1)) % cards[
                unit.sites
            ]
            local = self._local_delta(unit, x, y)
            model = self.target.logp(y) - logp_x
            if np.isfinite(local) != np.isfinite(model):
                return False
            if np.isfinite(local) and abs(local - model) > 1e-8 * max(1.0, abs(model)):
                return False
        return True

    def _check_start(self, initial_point: dict) -> None:
        super()._check_start(initial_point)
        self._state_vector_start = self.state_vector(initial_point)

    @staticmethod
    def _check_card(card, expected, role, i, label, motif) -> None:
        if card > 0 and card != expected:
            raise ValueError(
                f"block {label!r}: {role} variable {i} has {card} categories, motif "
                f"{motif.name!r} expects {expected}"
            )

    def _states_for(self, cards: np.ndarray, label: str) -> np.ndarray:
        total = int(np.prod(cards, dtype=np.float64))
        if total > self.max_states:
            raise ValueError(
                f"block {label!r} has {total} joint states, more than max_states={self.max_states}"
            )
        return enumerate_block_states(cards)

    def _refresh_outside(self) -> None:
        """Read the current values of other steps' variables that blocks touch."""
        for k, name, pos in self._shared_outside:
            self._outside_values[k] = int(np.asarray(self.shared[name].get_value()).ravel()[pos])
