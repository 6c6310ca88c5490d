"""Elimination blocks: block Gibbs whose blocks are drawn exactly by variable elimination.

The blocking Gibbs sampler of Jensen, Kong and Kjaerulff (1995, "Blocking Gibbs sampling in very
large probabilistic expert systems", written for pedigrees, whose deterministic inheritance
factors trap single-site Gibbs). A block is every free variable of a UAI network but a
*cutset* ``C``; given the current values of ``C`` the block's joint conditional is a network of
smaller induced width, and one forward pass of bucket elimination plus backward sampling
(:class:`~pymc_lbp.factor_graph.bucket_tree._BucketTree`, the code of
:func:`~pymc_lbp.models.uai.exact.sample_exact`) draws the whole block from it exactly. A block
is thus limited by the size of its elimination tables (``max_table_size``), not by its number of
joint states: a block of hundreds of variables is one update.

:func:`elimination_blocks` chooses the cutsets. While the min-fill elimination of the
network-with-cutset needs a table above the budget, the variable that sits in the most over-budget
table entries joins the cutset. Up to :data:`N_BLOCKS` blocks are made with disjoint cutsets
(where the budget allows: a cutset variable is taken from the earlier cutsets only when every
over-budget table holds nothing else), so every free variable is drawn by all but one of them;
the last block keeps whole, where the budget allows, every deterministic factor (a zero in its
table) that no earlier block holds whole, so that each such factor is resampled as a whole by
some block. A free variable that no block draws (only possible with overlapping cutsets) gets a
block of its own. When the whole network fits the budget there is one block (no cutset), and
every update is an independent exact draw.

The whole network gets a budget of its own, ``max_whole_table_size`` (``BlockGibbs`` gives it
64 times its ``max_states``, the cutset blocks' budget: 2**22 by default). A block with no cutset
is conditioned on nothing that changes, so its forward pass runs once and every later update is a
backward draw only: on the shipped networks that fit 2**22 entries such an independent exact
draw costs less than a cutset block update within 2**16 entries, which on DBN_11 never leaves the
mode it starts in. At 2**16 entries, 50-12-5, BN_0, Grids_12 and DBN_11.small fit in one block.
The time to choose the blocks and the cost of an update on the shipped networks are in
docs/uai.md, "Elimination blocks".

:func:`sample_block` is the numpy update, written plainly (the reference); :class:`BlockSampler` is
the same update prepared once per block (``BlockGibbs`` runs it for its elimination units): the
factors are conditioned on the evidence once, those that do not touch the cutset are merged into
their buckets once, only the factors touching the cutset are sliced at each update, and the
messages of the elimination steps below which no sliced factor lies (about half the steps on
the shipped networks; all of them for a block without cutset) are computed once and kept.
Both need a feasible state (positive probability), which the chain keeps; given the same
generator they make the same draws (tests/samplers/block/test_elimination_blocks.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pymc_lbp.factor_graph.bucket_tree import _BucketTree
from pymc_lbp.factor_graph.clusters import deterministic_scopes
from pymc_lbp.factor_graph.elimination import EliminationPlan, elimination_plan
from pymc_lbp.factor_graph.network import UAINetwork, reduce_factors

__all__ = [
    "DEFAULT_MAX_TABLE_SIZE",
    "N_BLOCKS",
    "BlockSampler",
    "EliminationBlock",
    "elimination_blocks",
    "sample_block",
]

#: Largest elimination table of a block (entries): bigger blocks with smaller cutsets mix better
#: and cost more per update (docs/uai.md, "Elimination blocks").
DEFAULT_MAX_TABLE_SIZE = 2**16
#: Blocks made with disjoint cutsets when the network does not fit in one.
N_BLOCKS = 3


@dataclass(frozen=True)
class EliminationBlock:
    """One block: the variables drawn jointly and the plan that draws them.

    Attributes
    ----------
    variables : tuple of int
        Network variables drawn by the block (free, not in the cutset), increasing.
    cutset : tuple of int
        Free network variables held at their current values during the block's update.
    plan : EliminationPlan
        Elimination order and bucket tree of the network with the evidence and the cutset fixed.
    """

    variables: tuple[int, ...]
    cutset: tuple[int, ...]
    plan: EliminationPlan

    @property
    def max_table_size(self) -> int:
        """Largest elimination table of one update (entries)."""
        return self.plan.max_table_size


def _cutset(
    network: UAINetwork,
    evidence: Mapping[int, int],
    max_table_size: int,
    avoid: set[int],
) -> tuple[set[int], EliminationPlan]:
    """Grow a cutset until the min-fill (or reverse Cuthill-McKee) plan of the rest fits
    ``max_table_size``.

    The next cutset variable is the one in the most over-budget table entries (ties: the lower
    index), preferring variables not in ``avoid``.
    """
    cut: set[int] = set()
    while True:
        fixed = {**evidence, **dict.fromkeys(cut, 0)}
        plan = elimination_plan(network, fixed, heuristic="min-fill")
        if plan.max_table_size <= max_table_size:
            return cut, elimination_plan(network, fixed)
        if elimination_plan(network, fixed, heuristic="rcm").max_table_size <= max_table_size:
            return cut, elimination_plan(network, fixed)  # grids: a band order may fit
        weight: dict[int, float] = {}
        for cluster, size in zip(plan.clusters, plan.table_sizes, strict=True):
            if size > max_table_size:
                for v in cluster:
                    weight[v] = weight.get(v, 0.0) + size
        preferred = [v for v in weight if v not in avoid] or list(weight)
        cut.add(min(preferred, key=lambda v: (-weight[v], v)))


def elimination_blocks(
    network: UAINetwork,
    evidence: Mapping[int, int],
    *,
    max_table_size: int = DEFAULT_MAX_TABLE_SIZE,
    n_blocks: int = N_BLOCKS,
    max_whole_table_size: int | None = None,
) -> list[EliminationBlock]:
    """Blocks of every free variable but a cutset, each drawn by elimination within a budget.

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int
        Fixed variables (evidence, and any variable the blocks must not draw).
    max_table_size : int
        Largest elimination table of a block (entries).
    n_blocks : int
        Blocks to make when the whole network does not fit (their cutsets are disjoint where
        possible).
    max_whole_table_size : int, optional
        One block of every free variable when the network's elimination needs no table above
        this many entries; ``None`` (default): ``max_table_size``. A larger value than
        ``max_table_size`` pays off because a block without cutset computes its messages once.

    Returns
    -------
    list of EliminationBlock
        One block when the free variables fit together; otherwise ``n_blocks`` blocks (fewer if
        a cutset came out empty), plus one block per free variable no block draws, if any.

    Raises
    ------
    ValueError
        ``max_table_size`` below the largest cardinality, or ``n_blocks < 2``.
    """
    free = [v for v in range(network.n_vars) if v not in evidence]
    if not free:
        return []
    largest = int(network.cards[free].max())
    if max_table_size < largest:
        raise ValueError(
            f"max_table_size={max_table_size} is below the largest cardinality {largest}: no "
            "block could hold that variable"
        )
    if n_blocks < 2:
        raise ValueError(f"n_blocks must be at least 2, got {n_blocks}")
    evidence = dict(evidence)
    if max_whole_table_size is not None and max_whole_table_size > max_table_size:
        whole = elimination_plan(network, evidence)
        if whole.max_table_size <= max_whole_table_size:
            return [EliminationBlock(tuple(free), (), whole)]
    scopes = [set(s) for s in deterministic_scopes(network, evidence)]
    cutsets: list[set[int]] = []
    plans: list[EliminationPlan] = []
    for k in range(n_blocks):
        avoid = set().union(*cutsets)
        if k == n_blocks - 1:  # keep whole each deterministic scope no block holds whole yet
            for scope in scopes:
                if all(scope & c for c in cutsets):
                    avoid |= scope
        cut, plan = _cutset(network, evidence, max_table_size, avoid)
        cutsets.append(cut)
        plans.append(plan)
        if not cut:  # the whole network fits (only possible at k = 0): one block draws all
            break
    blocks = [
        EliminationBlock(tuple(v for v in free if v not in cut), tuple(sorted(cut)), plan)
        for cut, plan in zip(cutsets, plans, strict=True)
    ]
    drawn = set().union(*(b.variables for b in blocks))
    for v in free:
        if v not in drawn:  # every other free variable fixed: the variable alone
            rest = {u: 0 for u in free if u != v}
            plan = elimination_plan(network, {**evidence, **rest}, heuristic="min-fill")
            blocks.append(EliminationBlock((v,), tuple(sorted(rest)), plan))
    return blocks


def sample_block(
    network: UAINetwork,
    block: EliminationBlock,
    state: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draw the block's variables from their exact conditional given the rest of ``state``.

    Parameters
    ----------
    network : UAINetwork
        The network whose factor product is the target (:meth:`UAINetwork.normalised_cpts` for
        BAYES models).
    block : EliminationBlock
    state : ndarray of int, shape (n_vars,)
        A full assignment of positive probability.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int, shape (len(block.variables),)
        The block variables' new values, in the order of ``block.variables``.

    Raises
    ------
    ValueError
        ``state`` has probability zero given the block's evidence (no value of the block is
        possible).
    """
    variables = np.asarray(block.variables, dtype=np.int64)
    fixed = np.ones(network.n_vars, dtype=bool)
    fixed[variables] = False
    evidence = dict(zip(np.flatnonzero(fixed).tolist(), state[fixed].tolist(), strict=True))
    tree = _BucketTree(network, evidence, block.plan)
    return _forward_and_sample(tree, state, variables, rng)


def _forward_and_sample(tree: _BucketTree, state, variables: np.ndarray, rng) -> np.ndarray:
    """The block variables' values drawn by the loaded ``tree`` given the rest of ``state``."""
    log_z = tree.forward() if math.isfinite(tree.log_constant) else -math.inf
    if not math.isfinite(log_z):
        raise ValueError(
            "elimination block update from a state of probability zero: no value of the block's "
            f"{variables.size} variables is possible given the others"
        )
    out = np.array(state, dtype=np.int64)[None, :]
    tree.sample(out, rng)
    return out[0, variables]


class BlockSampler:
    """:func:`sample_block` for one block of one network, prepared once for many updates.

    Parameters
    ----------
    network : UAINetwork
        As for :func:`sample_block`.
    block : EliminationBlock
    evidence : mapping of int to int
        Values of the variables that are neither in the block nor in its cutset (the network's
        evidence); every state passed to :meth:`draw` must agree with them.
    """

    def __init__(self, network: UAINetwork, block: EliminationBlock, evidence: Mapping[int, int]):
        self.variables = np.asarray(block.variables, dtype=np.int64)
        self.cutset = np.asarray(block.cutset, dtype=np.int64)
        self.evidence = {int(k): int(v) for k, v in evidence.items()}
        self._evidence_vars = np.asarray(sorted(self.evidence), dtype=np.int64)
        self._evidence_values = np.asarray(
            [self.evidence[v] for v in self._evidence_vars.tolist()], dtype=np.int64
        )
        overlap = set(self.evidence) & (set(block.variables) | set(block.cutset))
        if overlap:
            raise ValueError(f"evidence on block or cutset variables {sorted(overlap)}")
        probe = {**self.evidence, **dict.fromkeys(block.cutset, 0)}
        self.tree = _BucketTree(network, probe, block.plan)  # structure; tables reloaded per draw
        factors, self._log_constant = reduce_factors(network, self.evidence)
        where = {v: i for i, v in enumerate(block.cutset)}
        self._static: dict[tuple[int, ...], np.ndarray] = {}
        self._sliced: list[tuple[tuple[int, ...] | None, list[int], list, np.ndarray]] = []
        for scope, table in factors:
            cut_pos = [i for i, v in enumerate(scope) if v in where]
            if not cut_pos:
                perm = self.tree.step_order(scope)
                key = tuple(scope[i] for i in perm)
                table = np.transpose(table, perm)
                self._static[key] = self._static[key] + table if key in self._static else table
                continue
            free = tuple(v for v in scope if v not in where)
            perm = self.tree.step_order(free) if free else []
            key = tuple(free[i] for i in perm) if free else None
            index = [where.get(v, slice(None)) for v in scope]
            self._sliced.append((key, perm, index, table))
        self._keys = list(dict.fromkeys([*self._static, *(k for k, *_ in self._sliced if k)]))
        # steps whose message depends on no cutset value (nothing below them is sliced): their
        # messages are computed once and kept
        changing = [False] * len(block.plan.order)
        for key, *_ in self._sliced:
            if key:
                changing[self.tree.step[key[0]]] = True
        for s, parent in enumerate(block.plan.parent):  # children come before their parents
            if changing[s] and parent >= 0:
                changing[parent] = True
        self._constant_steps = [not c for c in changing]
        self._primed = False

    def draw(self, state: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The block variables' new values given ``state``, as :func:`sample_block` draws them."""
        state = np.asarray(state, dtype=np.int64)
        if not np.array_equal(state[self._evidence_vars], self._evidence_values):
            raise ValueError("BlockSampler.draw: the state disagrees with the block's evidence")
        values = state[self.cutset].tolist()
        log_constant = self._log_constant
        added: dict[tuple[int, ...], np.ndarray] = {}
        for key, perm, index, table in self._sliced:
            reduced = table[tuple(values[i] if isinstance(i, int) else i for i in index)]
            if key is None:
                log_constant += float(reduced)
                continue
            reduced = np.transpose(reduced, perm)
            added[key] = added[key] + reduced if key in added else reduced
        merged = {}
        for key in self._keys:
            static, extra = self._static.get(key), added.get(key)
            merged[key] = static if extra is None else extra if static is None else static + extra
        self.tree.load(merged, log_constant, self._constant_steps if self._primed else None)
        self._primed = math.isfinite(log_constant)
        return _forward_and_sample(self.tree, state, self.variables, rng)
