"""BlockGibbs: exact block Gibbs on blocks chosen from the model's structure, for any discrete
PyMC model.

A thin step class on :class:`~pymc_lbp.samplers.block.step.NeuralBlock`'s exact updates
(``proposal="exact"`` on a block set without a motif): this module only chooses the blocks (the
class docstring says which).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from pymc.step_methods.compound import Competence
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV

from pymc_lbp.factor_graph.clusters import deterministic_scopes, uai_clusters
from pymc_lbp.factor_graph.model_info import UAIModelInfo
from pymc_lbp.samplers.block.elimination import (
    BlockSampler,
    EliminationBlock,
    elimination_blocks,
)
from pymc_lbp.samplers.block.model_structure import (
    ModelStructure,
    model_structure,
    structure_clusters,
)
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock
from pymc_lbp.samplers.block.motifs.uai_blocks import uai_exact_blocks
from pymc_lbp.samplers.block.step import EXACT_MAX_STATES, NeuralBlock, check_max_states
from pymc_lbp.step_methods.base import StepResult
from pymc_lbp.step_methods.stats import document_stats

__all__ = ["BlockGibbs"]

BLOCK_CHOICES = ("auto", "elimination", "clusters")
#: Enumerated clusters are grown up to ``max_states // CLUSTER_SHARE`` joint states (1024 by
#: default): each update of an enumerated block evaluates the logp at every one of its joint
#: states, where a table entry of bucket elimination is one multiply-add.
CLUSTER_SHARE = 64
#: The whole network is one elimination block when its elimination needs no table above
#: ``WHOLE_NETWORK_FACTOR * max_states`` entries (2**22, 32 MiB as float64, by default): that
#: block is conditioned on nothing that changes, so its forward pass runs once and each update
#: is a backward draw (:mod:`pymc_lbp.samplers.block.elimination`).
WHOLE_NETWORK_FACTOR = 64


@document_stats
class BlockGibbs(NeuralBlock):
    """Exact block Gibbs on blocks of the model's structure, for any discrete PyMC model.

    Each step picks a block uniformly at random and draws its sites from their exact joint
    conditional given everything else (acceptance 1). The default blocks are chosen from the
    model's structure so that moves cross the walls that zero-probability states build for
    single-site samplers (docs/block_gibbs.md):

    - on an unchanged :func:`~pymc_lbp.models.read_uai` model, *elimination blocks*
      (:func:`~pymc_lbp.samplers.block.elimination.elimination_blocks`, the blocking Gibbs
      sampler of Jensen, Kong and Kjaerulff 1995): each block is every free variable but a small
      cutset, chosen so that bucket elimination of the rest needs no table above
      ``max_states`` entries, and is drawn whole by one forward pass and backward sampling;
      when the whole network fits (within ``64 * max_states`` entries, computed once), one
      block, and every update is an independent exact draw.
      The cutsets are disjoint and every deterministic factor is whole in some block, where the
      budget allows.
    - on any other model, *clusters* whose joint states are enumerated: terms that are ``-inf``
      for some joint values of their sites (a zero in a conditional probability table, a
      ``pm.Potential`` with ``-inf``) keep their sites in one block, and the blocks follow a
      min-fill elimination order of the sites' interaction graph, grown up its bucket tree within
      ``max_states // 64`` joint states (the algorithm of :func:`pymc_lbp.models.uai.uai_clusters`;
      each update enumerates every joint state of its block).

    Parameters
    ----------
    vars : list of variables, optional
        Bernoulli and categorical variables (integer-valued ones such as a Poisson are refused).
        Default: all the model's free variables.
    max_states : int, default 65536
        The largest number of joint states one exact update may enumerate, and the largest
        table one elimination may hold (entries; 0.5 MiB as float64 by default). The other
        limits follow from it: enumerated clusters are grown up to ``max_states // 64`` joint
        states (1024 by default; :data:`CLUSTER_SHARE`), a must-stay-together scope above that
        is a block of its own, and the scopes are found by enumerating the joint states of
        terms up to ``max_states``; an elimination block with a cutset needs no table above
        ``max_states`` entries (bigger blocks with smaller cutsets mix better and cost more
        per update), and the whole network is one block of independent exact draws when its
        elimination needs no table above ``64 * max_states`` entries (32 MiB as float64 by
        default; :data:`WHOLE_NETWORK_FACTOR`: its forward pass runs once; its cost on the
        shipped networks in docs/uai.md). A block of more joint states (a given block, a
        scope), or a variable of more states on elimination blocks, is a ``ValueError``
        naming ``max_states``.
    blocks : "auto", "elimination", "clusters", BlockSet or sequence of sequences of int
        ``"auto"`` (default): from the model's structure. On an unchanged
        :func:`pymc_lbp.models.read_uai` model with every free variable in the step,
        ``"elimination"`` (the blocks of ``python -m pymc_lbp mar``'s default sampler); otherwise
        ``"clusters"``. ``"elimination"``: elimination blocks of the network and its evidence
        (only on such a model). ``"clusters"``: enumerated clusters, on a ``read_uai`` model
        :func:`pymc_lbp.models.uai.uai_clusters` of its network, on any other the interaction
        graph and scopes read from the logp graph
        (:mod:`pymc_lbp.samplers.block.model_structure`, :attr:`structure`). A sequence: the
        blocks as positions in the raveled ``vars`` (sites in no block get single-site Gibbs
        updates); a :class:`~pymc_lbp.samplers.block.motifs.motif_api.BlockSet`: as
        ``NeuralBlock(blocks=..., proposal="exact")`` takes it.
    steps_per_draw : int, optional
        Block updates per recorded draw; ``None`` (default): the number of units (blocks plus
        uncovered sites), one update per block on average.
    logp : {"auto", "factors", "model"}, default "auto"
        How the logp at a block's states is computed: as in :class:`NeuralBlock` (factor-local
        sums on unchanged ``read_uai`` models, the compiled model logp otherwise).
    {pymc_arguments}

    Attributes
    ----------
    clusters : list of tuple of int
        The sites of every block (positions in the raveled ``vars``), in the order of
        :attr:`units`.
    elimination_blocks : list of EliminationBlock
        The elimination blocks in network variables (their cutsets and elimination plans);
        empty for enumerated blocks.
    scopes : list of tuple of int
        The must-stay-together scopes found (sites), each inside some block where
        ``blocks="auto"``; empty for given blocks.
    structure : ModelStructure or None
        What was read from the logp graph (``blocks="auto"`` on a model that is not an unchanged
        ``read_uai`` model).
    blocks_reason : str
        How the blocks were chosen (also logged, logger ``"pymc_lbp"``, INFO).
    units, uncovered_sites, logp_mode
        As in :class:`NeuralBlock`.

    Notes
    -----
    Sampler statistics (one scalar per draw):

    {stats_table}

    Every update leaves the target invariant and, with every must-stay-together scope inside a
    block, the chain can move between states that single-site moves cannot connect (tested by
    exact enumeration in ``tests/samplers/block/test_block_gibbs.py``). The random scan over
    enumerated blocks runs compiled (compiled at the first draw, as :class:`NeuralBlock`'s);
    elimination blocks are drawn by bucket elimination in numpy. What the structure
    reading detects, and what not, is in :mod:`pymc_lbp.samplers.block.model_structure`. Not in
    :func:`pymc_lbp.sample`'s compiled program (a ``NotInProgramError``); pickles for
    ``cores > 1``. ``pm.sample`` assigns it only after :func:`pymc_lbp.register` (``BlockGibbs``),
    then to every Bernoulli and categorical variable at once.
    """

    jax_kind = "random_scan"
    name = "block_gibbs"
    auto_assignable: ClassVar[bool] = True
    auto_assign_needs: ClassVar[str] = ""

    def __init__(
        self,
        vars=None,
        *,
        max_states: int = EXACT_MAX_STATES,
        blocks: str | BlockSet | Sequence[Sequence[int]] = "auto",
        steps_per_draw: int | None = None,
        logp: str = "auto",
        **kwargs,
    ):
        check_max_states("BlockGibbs", max_states)
        if isinstance(blocks, str):
            if blocks not in BLOCK_CHOICES:
                raise ValueError(
                    f"BlockGibbs: blocks must be one of {BLOCK_CHOICES}, a BlockSet or a sequence "
                    f"of site sequences, not {blocks!r}"
                )
        elif not isinstance(blocks, BlockSet):
            try:
                blocks = [[int(i) for i in b] for b in blocks]
            except TypeError:
                raise TypeError(
                    f"BlockGibbs: blocks must be one of {BLOCK_CHOICES}, a BlockSet or a sequence "
                    f"of sequences of site positions, got {blocks!r}"
                ) from None
            if not blocks or any(not b for b in blocks):
                raise ValueError("BlockGibbs: blocks must be non-empty sequences of sites")
        self._requested_blocks = blocks
        self.structure: ModelStructure | None = None
        self.scopes: list[tuple[int, ...]] = []
        self.elimination_blocks: list[EliminationBlock] = []
        super().__init__(
            vars,
            blocks="auto",
            steps_per_draw=steps_per_draw,
            logp=logp,
            max_states=max_states,
            **kwargs,
        )
        self.clusters = [
            tuple(u.sites.tolist()) for u in self._units if u.kind in ("exact", "eliminate")
        ]
        for unit, block in zip(self._units, self.elimination_blocks, strict=False):
            unit.elimination = block
        del self._requested_blocks

    @property
    def cluster_states(self) -> int:
        """The joint states enumerated clusters are grown to: ``max_states //``
        :data:`CLUSTER_SHARE`, at least 1."""
        return max(1, self.max_states // CLUSTER_SHARE)

    def _check_block_options(self, layout, specs) -> None:
        bad = [s.name for s in specs if s.kind == "integer"]
        if bad:
            raise ValueError(
                f"BlockGibbs samples Bernoulli and categorical variables; {bad} are "
                "integer-valued (give them to LocallyBalanced or another pymc_lbp step)"
            )

    def _auto_blocks(self, model) -> tuple[BlockSet, str, str]:
        requested = self._requested_blocks
        if isinstance(requested, BlockSet):
            return requested, "exact", "blocks given"
        if not isinstance(requested, str):
            return self._given_blocks(requested), "exact", "blocks given"
        info = getattr(model, "uai_info", None)
        names = {s.name for s in self.specs}
        plain = (
            isinstance(info, UAIModelInfo)
            and self._is_plain_uai_model(model, info)
            and names == set(info.free_names)
        )
        if requested == "elimination" and not plain:
            raise ValueError(
                "BlockGibbs(blocks='elimination') needs a model built by read_uai and left "
                "unchanged, with every free variable in the step: the blocks are drawn from the "
                "network's factor tables (use blocks='clusters' on other models)"
            )
        if plain and requested != "clusters":
            return self._elimination_blockset(info)
        if plain:
            blockset, reason = self._uai_blocks(info)
            return blockset, "exact", reason
        cards = self._site_cards()
        self.structure = model_structure(
            model,
            self.target._replace,
            self.target._x,
            cards,
            self._x0,
            max_scope_states=self.max_states,
            compile_kwargs=self._compile_kwargs,
        )
        self.scopes = list(self.structure.scopes)
        clusters = structure_clusters(self.structure, self.cluster_states)
        self._check_sizes(clusters, cards)
        blockset = self._flat_blockset(clusters, "cluster")
        reason = (
            f"{len(clusters)} clusters of at most {self.cluster_states} joint states (min-fill on "
            f"the model's interaction graph): {self.structure.reason}"
        )
        return blockset, "exact", reason

    def _elimination_blockset(self, info: UAIModelInfo) -> tuple[BlockSet, str, str]:
        """Elimination blocks of the network (CPT rows normalised as the model does for
        ``kind="BAYES"``), with every variable the model fixes as evidence."""
        network = info.network.normalised_cpts() if info.kind == "BAYES" else info.network
        fixed = {v: int(x) for v, x in enumerate(info.fixed_values.tolist()) if x >= 0}
        largest = int(network.cards[info.fixed_values < 0].max(initial=1))
        if self.max_states < largest:
            raise ValueError(
                f"BlockGibbs: max_states={self.max_states} is below the largest cardinality "
                f"{largest} of a free variable: no elimination table could hold it (raise "
                "max_states)"
            )
        self.elimination_blocks = elimination_blocks(
            network,
            fixed,
            max_table_size=self.max_states,
            max_whole_table_size=WHOLE_NETWORK_FACTOR * self.max_states,
        )
        free = np.flatnonzero(info.fixed_values < 0)
        self._network = network
        self._net_fixed = np.where(info.fixed_values >= 0, info.fixed_values, 0).astype(np.int64)
        self._net_free = free
        self._net_sites = np.array([self._uai_site(info, v) for v in free.tolist()], np.int64)
        blocks = self.elimination_blocks
        self._block_samplers = {
            (b.variables, b.cutset): BlockSampler(network, b, fixed) for b in blocks
        }
        largest = max(b.max_table_size for b in blocks)
        cut = [len(b.cutset) for b in blocks]
        if cut == [0]:
            reason = (
                "a read_uai model: one elimination block of every free variable, independent "
                f"exact draws (largest table {largest} entries <= "
                f"{WHOLE_NETWORK_FACTOR} * max_states = {WHOLE_NETWORK_FACTOR * self.max_states})"
            )
        else:
            reason = (
                f"a read_uai model: {len(blocks)} elimination block(s) (cutsets of {cut} "
                f"variables, largest table {largest} <= max_states={self.max_states} "
                "entries)"
            )
        blockset = uai_exact_blocks(
            info.network, [b.variables for b in blocks], label="elimination block"
        )
        return blockset, "eliminate", reason

    def _eliminate_step(self, unit, x, logp, deltas, extra) -> StepResult:
        """Draw the unit's elimination block from its exact conditional given the rest."""
        state = self._net_fixed.copy()
        state[self._net_free] = x[self._net_sites]
        y = x.copy()
        block = unit.elimination
        y[unit.sites] = self._block_samplers[block.variables, block.cutset].draw(state, self.rng)
        if unit.factors is None:
            logp_y = self.target.logp(y)
            self._draw_evals += 1
        else:
            logp_y = logp + self._local_delta(unit, x, y)
        return StepResult(y, logp_y, deltas, 1.0, True, extra=extra)

    def _uai_site(self, info: UAIModelInfo, v: int) -> int:
        """Position in the raveled ``vars`` of network variable ``v`` (one of the step's)."""
        spec = next(s for s in self.specs if s.name == info.names[v])
        return spec.offset + int(info.positions[v])

    def _uai_blocks(self, info: UAIModelInfo) -> tuple[BlockSet, str]:
        """The CLI's ``block_gibbs`` blocks: uai_clusters of the network and its evidence."""
        network = info.network
        clusters = uai_clusters(network, info.evidence, max_states=self.cluster_states)
        self._check_sizes(clusters, network.cards)
        self.scopes = [
            tuple(sorted(self._uai_site(info, v) for v in scope))
            for scope in deterministic_scopes(network, info.evidence)
        ]
        reason = (
            f"a read_uai model: {len(clusters)} clusters of its network of at most "
            f"{self.cluster_states} joint states (uai_clusters), {len(self.scopes)} deterministic "
            "factors kept whole"
        )
        return uai_exact_blocks(network, clusters), reason

    def _given_blocks(self, blocks: list[list[int]]) -> BlockSet:
        n = self.layout.n_sites
        for b in blocks:
            if min(b) < 0 or max(b) >= n:
                raise ValueError(
                    f"BlockGibbs: block {b} holds sites outside 0..{n - 1} (positions in the "
                    f"raveled {self._var_names()})"
                )
        self._check_sizes(blocks, self._site_cards())
        return self._flat_blockset(blocks, "block")

    def _flat_blockset(self, blocks, label: str) -> BlockSet:
        mb = [MotifBlock(np.asarray(b), np.zeros(0, np.int64), label=f"{label} {k} {list(b)}")
              for k, b in enumerate(blocks)]  # fmt: skip
        return BlockSet(None, tuple(mb), index="flat", variables=self._var_names())

    def _var_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def _check_sizes(self, blocks, cards) -> None:
        for b in blocks:
            size = math.prod(int(cards[v]) for v in b)
            if size > self.max_states:
                raise ValueError(
                    f"BlockGibbs: block {list(b)} has {size} joint states, more than "
                    f"max_states={self.max_states} (a must-stay-together scope that large "
                    "cannot be updated exactly; raise max_states or give blocks=...)"
                )

    @classmethod
    def competence(cls, var, has_grad=None) -> Competence:
        """IDEAL for Bernoulli and categorical variables once :func:`pymc_lbp.register` took
        this class, COMPATIBLE before; INCOMPATIBLE for anything else."""
        op = getattr(getattr(var, "owner", None), "op", None)
        if not isinstance(op, BernoulliRV | CategoricalRV):
            return Competence.INCOMPATIBLE
        return Competence.IDEAL if cls._registered else Competence.COMPATIBLE
