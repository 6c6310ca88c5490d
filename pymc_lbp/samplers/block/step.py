"""NeuralBlock: Metropolis-Hastings with learned block proposals (Wang et al. 2018).

The step class whole, top to bottom: the options and the update units resolved from the blocks
(motif blocks, exact blocks, uncovered sites; the chain blocks' colour classes; the target, the
model logp or factor-local, :class:`ModelLogp`), the draw's block updates
(:meth:`NeuralBlock.run_steps`), the numpy random-scan step (:meth:`NeuralBlock.scan_step`: what
runs where no compiled version takes the units, and elsewhere the compiled scan's reference),
the compiled sweep and random scan (graphs in :mod:`pymc_lbp.samplers.block.sweep_graph` and
:mod:`pymc_lbp.samplers.block.random_scan_graph`), and the inspection methods
(:meth:`NeuralBlock.motif_examples`, :meth:`NeuralBlock.unit_transitions`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.step_methods.compound import Competence
from pytensor.graph.replace import clone_replace, vectorize_graph

from pymc_lbp.compiling import pm_compile
from pymc_lbp.factor_graph.model_info import UAIModelInfo
from pymc_lbp.logp.differences import Differences
from pymc_lbp.logp.layout import BINARY, CATEGORICAL
from pymc_lbp.logp.local_logp import FactorLogp, FactorSubset
from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.logp.site_pieces import site_adjacency
from pymc_lbp.logp.vectorising import checks_per_row, unblock_gathers
from pymc_lbp.samplers.block.motifs.chain import (
    CHAIN_PARAMS_FROM,
    canonical_chain_params,
    chain_potentials_from_reference,
    chain_reference_states,
    chain_shape,
)
from pymc_lbp.samplers.block.motifs.finding import block_dependencies, chain_order, default_blocks
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet
from pymc_lbp.samplers.block.neural_proposal import NeuralProposal
from pymc_lbp.samplers.block.random_scan_graph import CompiledRandomScan, ScanFactors, ScanUnits
from pymc_lbp.samplers.block.reference import (
    block_log_probs,
    clamp_mixture,
    draw_blocks,
    enumerate_block_states,
    exact_block_log_probs,
    pick_index,
)
from pymc_lbp.samplers.block.sweep_graph import ChainColour, CompiledChainSweep
from pymc_lbp.samplers.common import (
    mh_accept_probs,
    mh_log_ratio,
    mh_log_ratios,
)
from pymc_lbp.step_methods.base import DiscreteStep, DrawResult, StepResult, model_and_start
from pymc_lbp.step_methods.stats import document_stats, dtypes_shapes

_log = logging.getLogger("pymc_lbp")


LOGP_MODES = ("auto", "factors", "model")


#: ``max_states``' default: the largest exact update (joint states enumerated), the largest
#: elimination table (``BlockGibbs``).
EXACT_MAX_STATES = 2**16


def check_max_states(owner: str, value: object) -> int:
    """``max_states`` as a positive integer, or a ``ValueError`` naming the option."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{owner}: max_states must be a positive integer, got {value!r}")
    return int(value)


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
        if self._fn is None:
            self._fn = pm_compile([self._x], self._logp_graph, **self._kw)
            self._fn.trust_input = True
        return float(self._fn(x))

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


@document_stats
class NeuralBlock(DiscreteStep):
    """Block Metropolis-Hastings with learned (or exact) block proposals (Wang et al. 2018).

    Each MH step picks an update unit uniformly at random. For a motif block ``B`` with
    conditioning set ``C`` it proposes ``x'_B ~ q(. | x_C, params)`` from a trained
    :class:`~pymc_lbp.NeuralProposal` and accepts with
    ``min{1, pi(x'_B, x_rest) q(x_B | .) / (pi(x_B, x_rest) q(x'_B | .))}``: ``q`` does not
    depend on the current ``x_B``, so both of its values come from one network evaluation, and
    the target ratio is the model's own (so the chain is exact whatever the network has
    learned). Block entries this step does not sample (evidence, other steps' variables) are
    clamped: the mixture is conditioned on their values. With ``proposal="exact"`` a block is
    instead resampled from its exact conditional (block Gibbs: the target at every joint state
    of the block; acceptance 1). Sites not covered by any block get a single-site Gibbs update
    (their exact full conditional over all categories) as units of their own.

    A draw's updates run compiled, compiled at the first draw: a colour-class sweep of chain
    blocks (see :attr:`colours`) in one compiled call per sweep
    (:mod:`pymc_lbp.samplers.block.sweep_graph`: for neural blocks reference logps, parameters,
    network, proposals, their logps and the MH decisions, for exact ones the logp at every joint
    state and the draws, every class in one graph; the network weights are inputs, so
    retraining needs no recompilation), the random scan (blocks without colour classes, single
    sites) as all of a draw's steps in one compiled ``scan``
    (:mod:`pymc_lbp.samplers.block.random_scan_graph`: for motif blocks the network, clamping,
    proposal, factor-local or model target and MH decision, for exact units the target at every
    joint state and the draw). Their speed and compile times are in docs/neural_block.md. Chain
    blocks under random-scan steps (parameters read from the model at every update) and
    ``BlockGibbs``' elimination blocks have no compiled version: their random scan runs the
    numpy step (:meth:`scan_step`), which is also the compiled scan's reference (the same
    moves from the same uniforms, tested).

    Parameters
    ----------
    vars : list of variables, optional
        Binary (Bernoulli) and categorical discrete variables. Default: all the model's free
        variables.
    blocks : BlockSet, None or "auto", default "auto"
        The motif blocks (e.g. :func:`pymc_lbp.samplers.block.motifs.grid_bn.uai_grid_blocks`,
        :func:`pymc_lbp.samplers.block.motifs.lattice_blocks.lattice_blocks`,
        :func:`pymc_lbp.samplers.block.motifs.chain.chain_blocks`), or, for ``proposal="exact"``
        only, a block set without a motif whose blocks have any sizes and cardinalities
        (:func:`pymc_lbp.samplers.block.motifs.uai_blocks.uai_exact_blocks`, e.g. on the clusters of
        :func:`pymc_lbp.factor_graph.clusters.uai_clusters`). ``"auto"``: found in the model graph
        with the proposal (:mod:`pymc_lbp.samplers.block.motifs.finding`: a UAI grid BN gets the
        grid-BN blocks and the shipped ``grid-bn`` proposal, a chain variable (an HMM's states)
        chain blocks with the shipped chain proposal for its number of categories or exact block
        Gibbs, anything else single-site Gibbs; the choice and its reason are in
        :attr:`blocks_reason` and logged). ``None``: no blocks, every site gets single-site Gibbs
        updates.
    proposal : NeuralProposal or "exact"
        A proposal for the blocks' motif (same shapes; see :func:`pymc_lbp.load_proposal`), or
        ``"exact"`` for exact block Gibbs on the same blocks. Chosen by ``blocks="auto"``
        (pass both or neither).
    steps_per_draw : int, optional
        MH steps per recorded draw; ``None`` (default): the number of units (blocks plus
        uncovered sites), i.e. one sweep's worth of updates per draw (the ``mh_steps`` stat).
    logp : {"auto", "factors", "model"}, default "auto"
        How the logp that scores block proposals (and the states of exact updates) is
        computed: ``"model"`` evaluates the compiled model logp (one call per proposal, batched
        over the states of exact updates); ``"factors"`` sums the log factors that meet the
        moved sites (models from :func:`read_uai` only, see :mod:`pymc_lbp.logp.local_logp`;
        checked against the model logp at construction); ``"auto"`` takes ``"factors"`` for
        unmodified ``read_uai`` models and ``"model"`` otherwise. The choice is
        :attr:`logp_mode`.
    max_states : int, default 65536
        Largest number of joint block states an exact update may enumerate (a larger exact
        block is a ``ValueError``).
    {pymc_arguments}

    Attributes
    ----------
    units : list of str
        Label of every update unit: the blocks first (in the block set's order), then the
        uncovered sites (``"site i"``, ``i`` the position in the raveled ``vars``).
    uncovered_sites : ndarray of int
        Positions (in the raveled ``vars``) of the sites no block covers.
    logp_mode : str
        ``"factors"`` or ``"model"``: how the logp is computed (the ``logp`` option).
    blocks_reason : str
        How the blocks and the proposal were chosen.
    colours : list of ndarray or None
        For chain blocks of a variable the model graph confirms to be a chain: classes of units
        (indices into ``units``) that share no term. A default draw (``steps_per_draw`` a
        multiple of the number of units) then sweeps the classes in order, updating each class
        at once (the compiled sweep: the blocks of a class share no term, so their updates are
        independent) instead of one randomly chosen unit per step. None: the random scan.

    Notes
    -----
    Sampler statistics (one scalar per draw):

    {stats_table}

    A proposal's tables include a uniform floor ``epsilon`` (see
    :mod:`pymc_lbp.samplers.block.mdn`), so the current block state always has positive reverse
    probability, also under deterministic conditionals. Chain blocks (``params_from="chain"``) read
    their parameters from the model at every update (:meth:`chain_params`: one batched logp call at
    the block's reference states), counted in ``logp_evals``. Not auto-assigned by ``pm.sample``.
    """

    jax_kind = "random_scan"
    name = "neural_block"
    auto_assignable = False
    auto_assign_needs = (
        "the variables of one motif chosen by you (it finds the motif's blocks and proposal in "
        "the variables it is given, or takes blocks=..., proposal=...)"
    )
    stats_dtypes_shapes: ClassVar[dict] = dtypes_shapes(*DiscreteStep.stats_dtypes_shapes, "block")
    conditional_stats: ClassVar[tuple[str, ...]] = ("model_logp",)

    def __init__(
        self,
        vars=None,
        *,
        blocks: BlockSet | str | None = "auto",
        proposal: NeuralProposal | str | None = None,
        steps_per_draw: int | None = None,
        logp: str = "auto",
        max_states: int = EXACT_MAX_STATES,
        **kwargs,
    ):
        if isinstance(blocks, str):
            if blocks != "auto":
                raise ValueError(f"blocks must be a BlockSet, None or 'auto', not {blocks!r}")
            if proposal is not None:
                raise ValueError(
                    "blocks='auto' picks the proposal too (a shipped one or exact block Gibbs); "
                    "pass blocks=... with proposal=..."
                )
        elif blocks is not None and not isinstance(blocks, BlockSet):
            raise TypeError(
                f"blocks must be a BlockSet (e.g. from uai_grid_blocks), got {type(blocks)}"
            )
        if isinstance(blocks, BlockSet) and len(blocks):
            if blocks.motif is None and not (isinstance(proposal, str) and proposal == "exact"):
                raise ValueError(
                    "blocks without a motif (any sizes and cardinalities, e.g. from "
                    "uai_exact_blocks) are for exact block Gibbs only: pass proposal='exact'"
                )
            if isinstance(proposal, str):
                if proposal != "exact":
                    raise ValueError(
                        f"proposal must be a NeuralProposal or 'exact', not {proposal!r}"
                    )
            elif not isinstance(proposal, NeuralProposal):
                raise TypeError(
                    "proposal must be a NeuralProposal (see pymc_lbp.load_proposal) or 'exact', "
                    f"got {type(proposal)}"
                )
            elif not proposal.motif.same_shape(blocks.motif):
                p, m = proposal.motif, blocks.motif
                raise ValueError(
                    f"the proposal is for motif {p.name!r} ({p.block_size} proposed, "
                    f"{p.cond_size} conditioning variables, {p.n_params} parameters); the blocks "
                    f"are motif {m.name!r} ({m.block_size}, {m.cond_size}, {m.n_params})"
                )
            if blocks.motif is not None and blocks.motif.n_continuous:
                raise ValueError(
                    f"motif {blocks.motif.name!r} has {blocks.motif.n_continuous} continuous "
                    "entries; NeuralBlock samples discrete blocks only. A flag and the "
                    "continuous value it switches on are sampled by NeuralMixedBlock (motif "
                    "flag-value-g32, pymc_lbp.samplers.block.motifs.flag_value)"
                )
        if logp not in LOGP_MODES:
            raise ValueError(f"logp must be one of {LOGP_MODES}, got {logp!r}")
        self._scan_arrays: tuple | None = None  # (network version, the scan's network arrays)
        self.blockset = None if isinstance(blocks, str) else blocks
        self.proposal = proposal
        self.blocks_reason = "blocks given" if blocks is not None else "blocks=None: single sites"
        self.max_states = check_max_states(type(self).__name__, max_states)
        self._draw_evals = 0
        model, initial_point = model_and_start(kwargs)
        super().__init__(vars, steps_per_draw=steps_per_draw, **kwargs)
        if not np.all(np.isin(self.layout.site_kind, (BINARY, CATEGORICAL))):
            bad = [s.name for s in self.specs if s.kind == "integer"]
            raise ValueError(
                f"NeuralBlock samples binary and categorical variables; {bad} are integer-valued"
            )
        self._deps: list | None = None  # the terms' dependencies, analysed once if needed
        if isinstance(blocks, str):
            self.blockset, self.proposal, self.blocks_reason = self._auto_blocks(model)
            _log.info("%s on %s: %s.", type(self).__name__, self.var_names, self.blocks_reason)
        self._build_units(model, initial_point, logp)

    def _auto_blocks(self, model) -> tuple[BlockSet | None, Any, str]:
        """``(blocks, proposal, reason)`` of ``blocks="auto"``: the motif found in the model
        graph (:func:`pymc_lbp.samplers.block.motifs.finding.default_blocks`); ``BlockGibbs``
        overrides it with clusters of the model's structure."""
        return default_blocks(model, self.target, self.specs, self._x0, self._dependencies(model))

    def program_steps(self, model, to_jax):
        """This step's steps of a draw in :func:`pymc_lbp.sample`'s compiled program
        (:func:`pymc_lbp.samplers.block.jax_steps.program_steps`)."""
        from pymc_lbp.samplers.block.jax_steps import program_steps

        return program_steps(self, model, to_jax)

    def sweep_steps(self) -> int:
        """Steps per draw of ``steps_per_draw=None``: one update of each unit on average."""
        return len(self._units)

    def _build_target(self, model, shared: dict, initial_point: dict) -> ModelLogp:
        """The model logp, which scores the block proposals (no neighbour differences)."""
        return ModelLogp(model, self.specs, self.layout, shared, self._compile_kwargs)

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

    # ------------------------------------------------------------------ sampling
    def astep(self, q0):
        self._refresh_outside()
        self._draw_evals = 0
        return super().astep(q0)

    def summarize_extras(self, extras: dict[str, list]) -> dict[str, Any]:
        return {"block": int(extras["block"][-1]), "logp_evals": 1 + self._draw_evals}

    def run_steps(self, x: np.ndarray, logp: float, deltas: np.ndarray, n_steps: int) -> DrawResult:
        """The draw's block updates: with colour classes (chain blocks, :attr:`colours`) and
        ``n_steps`` a multiple of the number of units, whole sweeps in colour order in the
        compiled sweep; otherwise random-scan steps, all of the draw's in one compiled call
        where the compiled scan takes the units (:attr:`scan_compilable`), else
        :meth:`scan_step` in a loop."""
        sweeps = self.colours is not None and n_steps % len(self._units) == 0
        if sweeps and self.sweep_compilable:
            sweep = self.chain_sweep
            # the uniforms the reference colour_update takes, sweep by sweep, class by class
            draws = [
                [self.rng.random((c.sites.shape[0], c.uniform_width)) for c in sweep.colours]
                for _ in range(n_steps // len(self._units))
            ]
            uniforms = [np.stack(per_class) for per_class in zip(*draws, strict=True)]
            x, logp, accept, won, evals = sweep(x, logp, uniforms, self.sweep_weights())
            last = [int(self.colours[-1][-1])]
        elif self.scan_compilable:
            noise = self.rng.random((n_steps, self.scan_width))  # the rows scan_step would draw
            x, logp, accept, won, evals, unit = self.random_scan(
                x, logp, self._outside_values, noise, self._scan_network()
            )
            last = [unit]
        else:
            return super().run_steps(x, logp, deltas, n_steps)
        self._draw_evals += evals
        return DrawResult(x, logp, deltas, accept, won, evals, 0, {"block": last})

    # ------------------------------------------------------------------ targets
    def _z(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([x, self._outside_values]) if self._outside else x

    def _local_delta(self, unit: _Unit, x: np.ndarray, y: np.ndarray) -> float:
        """Factor-local ``log pi(y) - log pi(x)`` for states differing on the unit's sites."""
        lv = self._factors.log_value(unit.factors, np.stack([self._z(x), self._z(y)]))
        if not np.isfinite(lv[1]):
            return -np.inf
        return float(lv[1] - lv[0])

    def _target_states(self, unit: _Unit, x: np.ndarray, states: np.ndarray):
        """``(Y, log pi(Y))``: ``x`` with the unit's sites set to each row of ``states``, and
        the target there (up to a constant shared by all rows)."""
        Y = np.repeat(x[None, :], states.shape[0], axis=0)
        Y[:, unit.sites] = states
        if unit.factors is None:
            return Y, self.target.logp_batch(Y)
        outside = np.broadcast_to(self._outside_values, (Y.shape[0], self._outside_values.size))
        return Y, self._factors.log_value(unit.factors, np.concatenate([Y, outside], axis=1))

    def unit_proposal(self, u: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (clamped) mixture that unit ``u`` proposes its free entries from at state ``x``.

        Returns
        -------
        log_w : ndarray, shape (K,)
        log_tables : ndarray, shape (K, D_free, C)
        """
        unit = self._units[u]
        z = self._z(x)
        if unit.chain is not None:
            prepared = self.proposal.prepare(self.chain_params(unit, x))
        else:
            version = self.proposal.net.version
            if unit.prepared is None or unit.prepared[0] != version:
                unit.prepared = (version, self.proposal.prepare(unit.params))
            prepared = unit.prepared[1]
        log_w, log_tables = self.proposal.mixture_at(z[unit.cond_idx], prepared)
        return clamp_mixture(log_w, log_tables, ~unit.free, z[unit.block_idx])

    def chain_params(self, unit: _Unit, x: np.ndarray) -> np.ndarray:
        """The chain motif's parameters of ``unit`` at ``x``: the model logp at the block's
        reference states (:func:`pymc_lbp.samplers.block.motifs.chain.chain_reference_states`, one
        batched call) turned into canonical log-potentials. They depend on the rest of the state
        only, never on the block's own values."""
        K, L = unit.chain
        ref = chain_reference_states(K, L)
        _, lp = self._target_states(unit, x, ref)
        self._draw_evals += ref.shape[0]
        return canonical_chain_params(*chain_potentials_from_reference(lp, K, L))

    @cached_property
    def scan_width(self) -> int:
        """Uniforms per random-scan step (:meth:`scan_step`): the unit, the component (or the
        joint state of an exact unit), one per block entry, the MH coin (the units are fixed at
        construction; read at every step)."""
        return max(u.block_idx.size for u in self._units) + 3

    def mh_step(self, x: np.ndarray, logp: float, deltas: np.ndarray) -> StepResult:
        return self.scan_step(x, logp, deltas, self.rng.random(self.scan_width))

    def scan_step(
        self, x: np.ndarray, logp: float, deltas: np.ndarray, u: np.ndarray
    ) -> StepResult:
        """One random-scan step from the uniforms ``u`` (:attr:`scan_width` of them): the unit
        ``floor(u[0] * units)``; for an exact unit (or an uncovered site) the joint state by
        inverse CDF from ``u[1]``; for a motif block the mixture's component from ``u[1]``, free
        entry ``i`` from ``u[2 + i]`` (clamped entries keep their values), the MH coin
        ``u[-1]``. The numpy reference of the compiled random scan
        (:mod:`pymc_lbp.samplers.block.random_scan_graph`), which takes the same uniforms. An
        elimination block (``BlockGibbs``) draws its values from ``self.rng`` instead."""
        j = min(int(u[0] * len(self._units)), len(self._units) - 1)
        unit = self._units[j]
        extra = {"block": j}
        if unit.kind == "eliminate":
            return self._eliminate_step(unit, x, logp, deltas, extra)
        if unit.kind != "neural":
            return self._exact_step(unit, x, logp, deltas, extra, u[1])
        log_w, log_tables = self.unit_proposal(j, x)
        columns = np.concatenate(([1], 2 + np.flatnonzero(unit.free)))
        new = draw_blocks(log_w[None], log_tables[None], u[None, columns])[0]
        old = x[unit.sites]
        if np.array_equal(new, old):
            return StepResult(x, logp, deltas, 1.0, True, evaluated=False, extra=extra)
        y = x.copy()
        y[unit.sites] = new
        if unit.factors is None:
            logp_y = self.target.logp(y)
        else:
            logp_y = logp + self._local_delta(unit, x, y)
        self._draw_evals += 1
        log_q_new, log_q_old = block_log_probs(log_w, log_tables, np.stack([new, old]))
        prob = float(mh_accept_probs(mh_log_ratio(logp, logp_y, log_q_new, log_q_old)))
        if u[-1] < prob:
            return StepResult(y, logp_y, deltas, prob, True, extra=extra)
        return StepResult(x, logp, deltas, prob, False, extra=extra)

    def _eliminate_step(self, unit: _Unit, x, logp, deltas, extra) -> StepResult:
        """An elimination block's exact update (only :class:`BlockGibbs` makes such units)."""
        raise NotImplementedError(f"{type(self).__name__} has no elimination blocks")

    def _exact_step(self, unit: _Unit, x, logp, deltas, extra, u: float) -> StepResult:
        Y, lp = self._target_states(unit, x, unit.states)
        self._draw_evals += Y.shape[0]
        lp = np.where(np.isnan(lp), -np.inf, lp)
        if not np.isfinite(lp).any():  # cannot happen from a feasible x
            return StepResult(x, logp, deltas, 0.0, False, extra=extra)
        s = int(pick_index(np.exp(lp - lp.max()), np.asarray(u)))
        if unit.factors is None:
            logp_y = float(lp[s])
        else:
            current = int(np.flatnonzero((unit.states == x[unit.sites]).all(axis=1))[0])
            logp_y = logp + float(lp[s] - lp[current])
        return StepResult(Y[s], logp_y, deltas, 1.0, True, extra=extra)

    # ------------------------------------------------------------------ compiled sweep
    @cached_property
    def sweep_compilable(self) -> bool:
        """Whether the sweeps can run compiled: colour classes of chain blocks (neural or exact
        block updates), scored with the model logp (fixed at construction; checked once)."""
        if self.colours is None or not isinstance(self.target, ModelLogp):
            return False
        for colour in self.colours:
            units = [self._units[u] for u in colour]
            if not all(u.free.all() and u.kind == units[0].kind for u in units):
                return False
            if units[0].kind == "neural" and not all(u.chain is not None for u in units):
                return False
            same = all(np.array_equal(u.states, units[0].states) for u in units)
            if units[0].kind == "exact" and not same:
                return False
            if units[0].kind not in ("neural", "exact"):
                return False
        return True

    @cached_property
    def chain_sweep(self) -> CompiledChainSweep:
        """The compiled sweep (:class:`pymc_lbp.samplers.block.sweep_graph.CompiledChainSweep`),
        compiled on first use."""
        return CompiledChainSweep(
            self.chain_colours(),
            self.layout.n_sites,
            self.target.rows_graph,
            self.proposal.net if isinstance(self.proposal, NeuralProposal) else None,
            self.target._compile_kwargs,
        )

    def chain_colours(self) -> list[ChainColour]:
        """The colour classes as the sweep's graph takes them (a step whose
        :attr:`sweep_compilable`)."""
        colours = []
        for colour in self.colours:
            units = [self._units[u] for u in colour]
            sites = np.stack([u.sites for u in units])
            if units[0].kind == "exact":
                colours.append(ChainColour(sites, states=units[0].states))
            else:
                colours.append(ChainColour(sites, *units[0].chain))
        return colours

    def sweep_weights(self) -> list[np.ndarray]:
        """The network arrays the sweep takes (:data:`~pymc_lbp.samplers.block.sweep_graph.
        WEIGHT_NAMES`; placeholders for exact block updates only, which do not read them)."""
        if isinstance(self.proposal, NeuralProposal):
            return self.proposal.graph_inputs()
        return [np.zeros((1,) * nd) for nd in (1, 2, 2, 1, 2, 1)]

    # ------------------------------------------------------------------ compiled random scan
    @cached_property
    def scan_compilable(self) -> bool:
        """Whether the random-scan steps can run compiled
        (:mod:`pymc_lbp.samplers.block.random_scan_graph`): every unit but chain blocks, whose
        parameters are read from the model at each update (they run as colour-class sweeps), and
        elimination blocks (``BlockGibbs``), drawn by bucket elimination in numpy."""
        return all(u.chain is None and u.kind != "eliminate" for u in self._units)

    def scan_units(self) -> tuple[ScanUnits, ScanFactors | None]:
        """The units (and factor-local targets) as the padded arrays of the compiled scan;
        positions index ``z = [x, outside values, 0]``, padding points at the last entry."""
        units = self._units
        U, D = len(units), self.scan_width - 3
        dummy = self.layout.n_sites + len(self._outside)
        M = max(u.cond_idx.size for u in units)
        neural = np.array([u.kind == "neural" for u in units])
        block_idx = np.full((U, D), dummy, dtype=np.int64)
        free = np.zeros((U, D), dtype=bool)
        cond_idx = np.full((U, M), dummy, dtype=np.int64)
        tables: dict[bytes, np.ndarray] = {}  # the distinct tables of joint states
        state_set, n_states = np.zeros(U, dtype=np.int64), np.zeros(U, dtype=np.int64)
        for i, u in enumerate(units):
            if u.kind == "neural":
                block_idx[i, : u.block_idx.size] = u.block_idx
                free[i, : u.free.size] = u.free
                cond_idx[i, : u.cond_idx.size] = u.cond_idx
                continue
            block_idx[i, : u.sites.size] = u.sites
            free[i, : u.sites.size] = True
            key = u.states.tobytes() + str(u.states.shape).encode()
            tables.setdefault(key, u.states)
            state_set[i], n_states[i] = list(tables).index(key), u.states.shape[0]
        state_list = list(tables.values())
        S = max((t.shape[0] for t in state_list), default=1)
        states = np.zeros((max(len(state_list), 1), S, D), dtype=np.int64)
        for t, st in enumerate(state_list):
            states[t, : st.shape[0], : st.shape[1]] = st
        scan_units = ScanUnits(neural, block_idx, free, cond_idx, states, state_set, n_states)
        if self._factors is None:
            return scan_units, None
        F = max(u.factors.offsets.size for u in units)
        R = self._factors.scope_pos.shape[1]
        flat = np.concatenate([self._factors.flat, [0.0]])
        offsets = np.full((U, F), flat.size - 1, dtype=np.int64)
        positions = np.zeros((U, F, R), dtype=np.int64)
        strides = np.zeros((U, F, R), dtype=np.int64)
        slot = np.full((U, F, R), -1, dtype=np.int64)
        for i, u in enumerate(units):
            f = u.factors.offsets.size
            offsets[i, :f] = u.factors.offsets
            positions[i, :f] = u.factors.positions
            strides[i, :f] = u.factors.strides
            if u.kind != "neural":
                for d, site in enumerate(u.sites.tolist()):
                    slot[i, :f][u.factors.positions == site] = d
        return scan_units, ScanFactors(flat, offsets, positions, strides, slot)

    @cached_property
    def random_scan(self) -> CompiledRandomScan:
        """The compiled random scan
        (:class:`pymc_lbp.samplers.block.random_scan_graph.CompiledRandomScan`), compiled on first
        use."""
        neural = isinstance(self.proposal, NeuralProposal)
        return CompiledRandomScan(
            *self.scan_units(),
            self.target.rows_graph,
            self.layout.n_sites,
            len(self._outside),
            self.proposal.net if neural else None,
            self.target._compile_kwargs,
        )

    def _scan_network(self) -> list[np.ndarray]:
        """The network arrays of the compiled scan (:data:`~pymc_lbp.samplers.block.
        random_scan_graph.NETWORK_NAMES`) for the current weights."""
        if not isinstance(self.proposal, NeuralProposal):
            return [np.zeros((1,) * nd) for nd in (2, 3, 2, 1, 2, 1)]
        version = self.proposal.net.version
        if self._scan_arrays is None or self._scan_arrays[0] != version:  # once per weights
            R, base, _ = self.proposal._first_layer()
            prepared = np.zeros((len(self._units), base.size))
            for i, u in enumerate(self._units):
                if u.kind == "neural":
                    prepared[i] = self.proposal.prepare(u.params)
            w = self.proposal.net._w64
            self._scan_arrays = (version, [prepared, R, w["W1"], w["b1"], w["W2"], w["b2"]])
        return self._scan_arrays[1]

    # ------------------------------------------------------------------ training data
    def motif_examples(self, idata, *, model=None, max_draws: int | None = None):
        """Training examples of the blocks' motif cut from posterior draws of this model.

        For every draw (all chains, at most ``max_draws``, evenly spaced) and every block: the
        block's values, its conditioning values and its local parameters at that draw (chain
        blocks: read from the model with the draw's values of every other variable). Train a
        proposal for your own model with them, e.g. from a run of exact block Gibbs::

            exact = NeuralBlock([z], blocks=chain_blocks("z", T, K, 4), proposal="exact")
            idata = pm.sample(step=[exact])
            proposal = NeuralProposal.create(exact.blockset.motif)
            proposal.fit(exact.motif_examples(idata), steps=5000)

        (Forward samples of the prior,
        :func:`pymc_lbp.samplers.block.motifs.training_samples.prior_motif_samples`, need a model
        without ``pm.Potential`` terms; posterior draws work for any model.)

        Parameters
        ----------
        idata : arviz.InferenceData
            With a posterior group holding the step's variables and the variables its blocks'
            parameters depend on.
        model : pymc.Model, optional
            Default: the model on the context stack.
        max_draws : int, optional

        Returns
        -------
        x_block, x_cond, params : ndarrays
            One row per (draw, block), as :meth:`NeuralProposal.fit` takes them.
        """
        model = pm.modelcontext(model)
        if self.blockset is None or not len(self.blockset):
            raise ValueError("this step has no motif blocks (blocks=None or none found)")
        if self.blockset.motif is None:
            raise ValueError(
                "blocks without a motif (exact block Gibbs only) have no motif examples"
            )
        post = idata.posterior
        n_total = post.sizes["chain"] * post.sizes["draw"]
        keep = np.arange(n_total)
        if max_draws is not None and max_draws < n_total:
            keep = np.linspace(0, n_total - 1, int(max_draws)).round().astype(np.int64)

        def flat(name: str) -> np.ndarray:
            v = post[name].values
            return v.reshape(n_total, *v.shape[2:])[keep]

        mine = {s.name: flat(s.name) for s in self.specs}
        others = {}
        by_value = {v.name: v for v in model.value_vars}
        for name in self.shared:
            rv = model.values_to_rvs[by_value[name]]
            values = flat(rv.name)
            transform = model.rvs_to_transforms.get(rv)
            if transform is not None:
                values = transform.forward(pt.as_tensor(values), *rv.owner.inputs).eval()
            others[name] = np.asarray(values)
        saved = {name: sh.get_value() for name, sh in self.shared.items()}
        xb, xc, pr = [], [], []
        try:
            for d in range(keep.size):
                for name, sh in self.shared.items():
                    sh.set_value(others[name][d].astype(sh.dtype))
                self._refresh_outside()
                x = np.concatenate([np.asarray(mine[s.name][d]).ravel() for s in self.specs])
                z = self._z(x.astype(np.int64))
                for unit in self._units:
                    if unit.kind == "site":
                        continue
                    params = unit.params if unit.chain is None else self.chain_params(unit, x)
                    xb.append(z[unit.block_idx])
                    xc.append(z[unit.cond_idx])
                    pr.append(params)
        finally:
            for name, sh in self.shared.items():
                sh.set_value(saved[name])
            self._refresh_outside()
        return (
            np.array(xb, dtype=np.int64),
            np.array(xc, dtype=np.int64).reshape(len(xb), -1),
            np.array(pr, dtype=np.float64).reshape(len(xb), -1),
        )

    # ------------------------------------------------------------------ diagnostics
    def unit_transitions(self, u: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact transition probabilities of one update of unit ``u`` from ``x``.

        Enumerates every joint state of the unit's free entries with the step's own proposal,
        target and acceptance code (for tests and diagnostics).

        Returns
        -------
        states : ndarray of int, shape (S, n_sites)
            Every state the update can reach (``x`` included).
        probs : ndarray, shape (S,)
            Their probabilities (summing to 1).
        """
        x = np.asarray(x, dtype=np.int64)
        unit = self._units[u]
        cards = self._site_cards()[unit.sites]
        states = unit.states if unit.states is not None else enumerate_block_states(cards)
        Y, lp = self._target_states(unit, x, states)
        if unit.kind != "neural":
            return Y, np.exp(exact_block_log_probs(lp))
        current = int(np.flatnonzero((states == x[unit.sites]).all(axis=1))[0])
        log_q = block_log_probs(*self.unit_proposal(u, x), states)
        # the one MH rule (+inf accepts); proposing the current state keeps it
        acc = mh_accept_probs(mh_log_ratios(lp[current], lp, log_q, log_q[current]))
        acc[current] = 1.0
        probs = np.exp(log_q) * acc
        probs[current] += np.sum(np.exp(log_q) * (1.0 - acc))
        return Y, probs

    @classmethod
    def competence(cls, var, has_grad=None) -> Competence:
        """Never auto-assigned: NeuralBlock works on the variables of one motif you choose."""
        return Competence.INCOMPATIBLE
