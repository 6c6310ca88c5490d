"""Elimination orders and bucket trees for exact inference on UAI networks.

:func:`elimination_plan` picks the best of a greedy min-fill, a greedy min-weight and a reverse
Cuthill-McKee order of the evidence-conditioned interaction graph and records the bucket tree it
induces (:class:`EliminationPlan`: clusters, tree edges, table sizes), so the size of the largest
table is known before any table is built (:meth:`EliminationPlan.check_size`,
:func:`check_max_table_size`). Used by :mod:`pymc_lbp.models.uai.exact` (the elimination itself),
:mod:`pymc_lbp.factor_graph.clusters` (blocks along a min-fill order) and BlockGibbs' elimination
blocks; every name is also importable from :mod:`pymc_lbp.models.uai.exact`. Evidence is a
mapping (files are read by :func:`pymc_lbp.models.uai.read_evidence`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from pymc_lbp.factor_graph.network import UAINetwork, check_evidence

__all__ = [
    "EliminationPlan",
    "EvidenceLike",
    "TreewidthTooLargeError",
    "check_max_table_size",
    "elimination_plan",
]

EvidenceLike = Mapping[int, int] | None
_HEURISTICS = ("min-fill", "min-weight", "rcm")


class TreewidthTooLargeError(MemoryError):
    """Exact elimination would need a table larger than the allowed size.

    Attributes
    ----------
    table_size : int
        Number of entries of the largest cluster table of the chosen elimination order.
    induced_width : int
        Induced width of that order (largest cluster scope minus one).
    """

    def __init__(self, message: str, *, table_size: int, induced_width: int) -> None:
        super().__init__(message)
        self.table_size = table_size
        self.induced_width = induced_width


def check_max_table_size(value: object) -> int | None:
    """Validate a ``max_table_size`` argument: a positive integer, or ``None`` for no limit.

    Parameters
    ----------
    value : object
        The argument as given.

    Returns
    -------
    int or None
        The limit in entries, or None (no limit: any table the order needs is built).

    Raises
    ------
    TypeError
        Not an integer (a bool, a float, a string, ...) and not None.
    ValueError
        An integer below 1.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(
            "max_table_size must be a positive integer (entries of the largest elimination "
            f"table) or None (no limit), got {value!r} of type {type(value).__name__}"
        )
    if value < 1:
        raise ValueError(f"max_table_size must be a positive integer or None, got {value}")
    return int(value)


@dataclass(frozen=True)
class EliminationPlan:
    """A bucket tree: elimination order, clusters and the tree edges.

    Attributes
    ----------
    order : tuple of int
        The free (non-evidence) variables in elimination order.
    clusters : tuple of tuple of int
        ``clusters[s]`` lists the variables of step ``s``'s cluster: ``order[s]`` first, then the
        others sorted by their elimination step.
    parent : tuple of int
        Step receiving step ``s``'s message (-1 for the root of a connected component).
    table_sizes : tuple of int
        Number of entries of every cluster table.
    heuristic : str
        The ordering heuristic that produced the order.
    """

    order: tuple[int, ...]
    clusters: tuple[tuple[int, ...], ...]
    parent: tuple[int, ...]
    table_sizes: tuple[int, ...]
    heuristic: str

    @property
    def induced_width(self) -> int:
        """Largest cluster scope minus one (-1 when there is nothing to eliminate)."""
        return max((len(c) for c in self.clusters), default=0) - 1

    @property
    def max_table_size(self) -> int:
        """Largest cluster table (entries)."""
        return max(self.table_sizes, default=0)

    @property
    def total_table_size(self) -> int:
        """Sum of all cluster table sizes (the work of one pass)."""
        return sum(self.table_sizes)

    def check_size(self, max_table_size: int | None, name: str = "network") -> None:
        """Raise :class:`TreewidthTooLargeError` if a cluster exceeds ``max_table_size``.

        ``None`` means no limit; anything else must be a positive integer (see
        :func:`check_max_table_size`).
        """
        max_table_size = check_max_table_size(max_table_size)
        if max_table_size is not None and self.max_table_size > max_table_size:
            size = self.max_table_size
            raise TreewidthTooLargeError(
                f"{name}: exact elimination needs a table of {size} entries (~2^"
                f"{math.log2(size):.1f}, {8 * size / 2**30:.2f} GiB as float64) with induced "
                f"width {self.induced_width} ({self.heuristic} order), above max_table_size="
                f"{max_table_size}; raise max_table_size if you have the memory",
                table_size=size,
                induced_width=self.induced_width,
            )


# --------------------------------------------------------------------------- ordering
def _interaction_graph(network: UAINetwork, evidence: Mapping[int, int]) -> dict[int, set[int]]:
    adj = {v: set() for v in range(network.n_vars) if v not in evidence}
    for scope in network.scopes:
        free = [v for v in scope if v not in evidence]
        for v in free:
            adj[v].update(free)
    for v, nb in adj.items():
        nb.discard(v)
    return adj


def _greedy_order(
    adj: dict[int, set[int]],
    log_card: np.ndarray,
    heuristic: str,
    priority: np.ndarray | None = None,
) -> list[int]:
    """Greedy min-fill or min-weight elimination order (ties: weight, then ``priority``).

    The neighbour sets are mirrored as bit masks (one bit per variable), so that the fill count
    of a candidate, the edges missing among its neighbours, is a popcount of mask intersections
    rather than a set intersection per neighbour.
    """
    adj = {v: set(nb) for v, nb in adj.items()}
    bits = {v: sum(1 << a for a in nb) for v, nb in adj.items()}
    prio = list(range(log_card.size)) if priority is None else priority.tolist()
    lc = log_card.tolist()

    def key(v: int) -> tuple[float, float, float]:
        nb = adj[v]
        weight = lc[v] + sum(lc[a] for a in nb)
        if heuristic == "min-weight":
            return (weight, 0.0, prio[v])
        mask = bits[v]
        missing = sum(len(nb) - 1 - (bits[a] & mask).bit_count() for a in nb) // 2
        return (float(missing), weight, prio[v])

    current = {v: key(v) for v in adj}
    heap = [(k, v) for v, k in current.items()]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        k, v = heapq.heappop(heap)
        if v not in adj or current[v] != k:
            continue
        nb = adj.pop(v)
        mask = bits.pop(v)
        del current[v]
        order.append(v)
        for a in nb:
            adj[a].discard(v)
            adj[a].update(nb)
            adj[a].discard(a)
            bits[a] = (bits[a] | mask) & ~((1 << v) | (1 << a))
        affected = set(nb)
        if heuristic == "min-fill":
            for a in nb:
                affected |= adj[a]
        for a in affected:
            current[a] = key(a)
            heapq.heappush(heap, (current[a], a))
    return order


def _rcm_order(adj: dict[int, set[int]]) -> list[int]:
    """Reverse Cuthill-McKee order of the interaction graph (good for grids)."""
    nodes = sorted(adj)
    if not nodes:
        return []
    index = {v: i for i, v in enumerate(nodes)}
    rows = [index[v] for v, nb in adj.items() for _ in nb]
    cols = [index[a] for nb in adj.values() for a in nb]
    graph = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(nodes), len(nodes)))
    return [nodes[i] for i in reverse_cuthill_mckee(graph, symmetric_mode=True)]


def _plan_for_order(
    adj: dict[int, set[int]], cards: list[int], order: list[int], heuristic: str
) -> EliminationPlan:
    """Simulate the elimination of ``order`` and record the bucket tree."""
    adj = {v: set(nb) for v, nb in adj.items()}
    step = {v: s for s, v in enumerate(order)}
    clusters, parent, sizes = [], [], []
    for v in order:
        nb = adj.pop(v)
        for a in nb:
            adj[a].discard(v)
            adj[a].update(nb)
            adj[a].discard(a)
        rest = sorted(nb, key=step.__getitem__)
        clusters.append((v, *rest))
        parent.append(step[rest[0]] if rest else -1)
        sizes.append(cards[v] * math.prod(cards[a] for a in rest))
    return EliminationPlan(tuple(order), tuple(clusters), tuple(parent), tuple(sizes), heuristic)


def elimination_plan(
    network: UAINetwork,
    evidence: EvidenceLike = None,
    *,
    heuristic: str = "auto",
    restarts: int = 4,
    seed: int = 0,
) -> EliminationPlan:
    """Choose an elimination order and build the bucket tree.

    Parameters
    ----------
    network : UAINetwork
    evidence : path, mapping or None
        Evidence variables are removed from the graph.
    heuristic : {"auto", "min-fill", "min-weight", "rcm"}
        Greedy min-fill (ties by weight), greedy min-weight, or reverse Cuthill-McKee (either
        direction; good for grids). ``auto`` tries all three and, when the best largest table
        still exceeds 2**20 entries, ``restarts`` min-fill runs with random tie-breaking; it
        keeps the order with the smallest largest cluster table (then the smallest total).
    restarts : int
        Randomised min-fill runs for ``auto``.
    seed : int
        Seed of the random tie-breaking.

    Returns
    -------
    EliminationPlan
    """
    evidence = check_evidence(evidence, network)
    adj = _interaction_graph(network, evidence)
    log_card = np.log(network.cards.astype(np.float64))
    cards = network.cards.tolist()

    def score(plan: EliminationPlan) -> tuple[int, int]:
        return (plan.max_table_size, plan.total_table_size)

    if heuristic in ("min-fill", "min-weight"):
        return _plan_for_order(adj, cards, _greedy_order(adj, log_card, heuristic), heuristic)
    if heuristic == "rcm":
        order = _rcm_order(adj)
        plans = [_plan_for_order(adj, cards, o, "rcm") for o in (order, order[::-1])]
        return min(plans, key=score)
    if heuristic != "auto":
        raise ValueError(
            f"unknown heuristic {heuristic!r}; use 'auto', 'min-fill', 'min-weight' or 'rcm'"
        )
    plans = [elimination_plan(network, evidence, heuristic=h) for h in _HEURISTICS]
    best = min(plans, key=score)
    rng = np.random.default_rng(seed)
    for _ in range(restarts if best.max_table_size > 2**20 else 0):
        order = _greedy_order(adj, log_card, "min-fill", rng.random(log_card.size))
        best = min(best, _plan_for_order(adj, cards, order, "min-fill (random ties)"), key=score)
    return best
