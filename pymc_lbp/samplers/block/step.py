"""NeuralBlock: Metropolis-Hastings with learned block proposals (Wang et al. 2018).

The class is put together from mixins, one module each: the update units and their resolution
from the blocks (:mod:`pymc_lbp.samplers.block.step_units`), the numpy kernel
(:mod:`pymc_lbp.samplers.block.step_kernel`), the compiled sweep and random scan
(:mod:`pymc_lbp.samplers.block.step_compiled`) and the inspection methods
(:mod:`pymc_lbp.samplers.block.step_inspection`); this module holds the constructor, the
draw's block updates (:meth:`NeuralBlock.run_steps`) and the option handling.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np
from pymc.step_methods.compound import Competence

from pymc_lbp.logp.layout import BINARY, CATEGORICAL
from pymc_lbp.samplers.block.motifs.finding import default_blocks
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet
from pymc_lbp.samplers.block.neural_proposal import NeuralProposal
from pymc_lbp.samplers.block.random_scan_graph import CompiledRandomScan
from pymc_lbp.samplers.block.step_compiled import NeuralBlockCompiled
from pymc_lbp.samplers.block.step_inspection import NeuralBlockInspection
from pymc_lbp.samplers.block.step_kernel import NeuralBlockKernel
from pymc_lbp.samplers.block.step_units import (
    ModelLogp,
    NeuralBlockUnits,
    _Unit,  # noqa: F401 (re-exported)
)
from pymc_lbp.samplers.block.sweep_graph import CompiledChainSweep
from pymc_lbp.step_methods.base import DiscreteStep, DrawResult, model_and_start
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


@document_stats
class NeuralBlock(
    NeuralBlockUnits, NeuralBlockKernel, NeuralBlockCompiled, NeuralBlockInspection, DiscreteStep
):
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
        self._chain_sweep: CompiledChainSweep | None = None
        self._random_scan: CompiledRandomScan | None = None
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
            evals0 = self._draw_evals
            n_sweeps = n_steps // len(self._units)
            x, logp, total_accept, n_accepted = self._run_compiled_sweeps(x, logp, n_sweeps)
            extras = {"block": [int(self.colours[-1][-1])]}
            evals = self._draw_evals - evals0
            return DrawResult(x, logp, deltas, total_accept, n_accepted, evals, 0, extras)
        if self.scan_compilable:
            return self._run_compiled_scan(x, logp, deltas, n_steps)
        return super().run_steps(x, logp, deltas, n_steps)

    @classmethod
    def competence(cls, var, has_grad=None) -> Competence:
        """Never auto-assigned: NeuralBlock works on the variables of one motif you choose."""
        return Competence.INCOMPATIBLE
