"""Exact inference for UAI networks of small induced width: bucket-tree elimination.

The factors are conditioned on the evidence, put in log space (zeros are ``-inf``) and eliminated
along the best of a greedy min-fill, a greedy min-weight and a reverse Cuthill-McKee order. Each
elimination step ``s`` forms the cluster ``C_s`` (the eliminated variable and its neighbours at
that time), adds the log factors and incoming messages into one table over ``C_s`` (plain numpy
broadcasting, so there is no limit on the number of variables in a scope, unlike ``einsum``) and
sends the log-sum-exp over the eliminated variable to the step of the next-eliminated cluster
member. The backward pass sends messages from parents to children over the same bucket tree,
which gives the marginal of every variable in one forward/backward sweep. Working in log space
keeps networks whose partition function is around ``10**2000`` (strongly coupled Ising grids)
exact.

Before any table is built, the largest cluster table of the order is computed; if it exceeds
``max_table_size`` entries a :class:`TreewidthTooLargeError` (a ``MemoryError``) states the size
and the induced width (``max_table_size=None``: no limit).
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from pymc_lbp.models.uai.errors import ImpossibleEvidenceError, TreewidthTooLargeError
from pymc_lbp.models.uai.io import read_evidence
from pymc_lbp.models.uai.network import UAINetwork, reduce_factors, zero_factor

__all__ = [
    "DEFAULT_MAX_TABLE_SIZE",
    "EliminationPlan",
    "ExactResult",
    "check_max_table_size",
    "elimination_plan",
    "exact_inference",
    "exact_marginals",
    "log_partition",
    "sample_exact",
]

DEFAULT_MAX_TABLE_SIZE = 2**27
EvidenceLike = str | os.PathLike | Mapping[int, int] | None
_HEURISTICS = ("min-fill", "min-weight", "rcm")


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


@dataclass(frozen=True)
class ExactResult:
    """Result of :func:`exact_inference`.

    Attributes
    ----------
    log_z : float
        Natural log of the partition function of the evidence-conditioned network, i.e. of
        ``sum_x prod_f f(x)`` over the states that agree with the evidence (P(evidence) for a
        normalised Bayesian network).
    marginals : list of numpy.ndarray or None
        Posterior marginal of every variable (evidence variables as deltas); None when only the
        partition function was asked for.
    plan : EliminationPlan
        The bucket tree used.
    """

    log_z: float
    marginals: list[np.ndarray] | None
    plan: EliminationPlan

    @property
    def log10_z(self) -> float:
        """``log_z`` in base 10 (the ``.PR`` convention)."""
        return self.log_z / math.log(10.0)


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
    """Greedy min-fill or min-weight elimination order (ties: weight, then ``priority``)."""
    adj = {v: set(nb) for v, nb in adj.items()}
    prio = list(range(log_card.size)) if priority is None else priority.tolist()
    lc = log_card.tolist()

    def key(v: int) -> tuple[float, float, float]:
        nb = adj[v]
        weight = lc[v] + sum(lc[a] for a in nb)
        if heuristic == "min-weight":
            return (weight, 0.0, prio[v])
        missing = sum(len(nb) - 1 - len(adj[a] & nb) for a in nb) // 2
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
        del current[v]
        order.append(v)
        for a in nb:
            adj[a].discard(v)
            adj[a].update(nb)
            adj[a].discard(a)
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
    evidence = read_evidence(evidence, network)
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


# --------------------------------------------------------------------------- tables
def _lse(a: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """log-sum-exp over ``axis`` with a per-slice shift; all-``-inf`` slices give ``-inf``."""
    m = np.max(a, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    tmp = a - m
    np.exp(tmp, out=tmp)
    total = tmp.sum(axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        np.log(total, out=total)
    total += m
    return np.squeeze(total, axis=axis)


def _expand(table: np.ndarray, axes: tuple[int, ...], ndim: int) -> np.ndarray:
    """Reshape a table whose axes are the (increasing) cluster positions ``axes``."""
    shape = [1] * ndim
    for a, k in zip(axes, table.shape, strict=True):
        shape[a] = k
    return table.reshape(shape)


def _sum_tables(
    shape: tuple[int, ...], funcs: list[tuple[tuple[int, ...], np.ndarray]]
) -> np.ndarray:
    """Sum log tables (each on increasing cluster axes) into one table of ``shape``.

    The sum is grown one axis at a time and each table is added as soon as its last axis is
    present, so tables on leading axes cost only the size of that prefix, not of the cluster.
    """
    by_last: list[list[tuple[tuple[int, ...], np.ndarray]]] = [[] for _ in shape]
    acc = np.zeros(())
    for axes, table in funcs:
        if axes:
            by_last[axes[-1]].append((axes, table))
        else:
            acc = acc + table
    for j in range(len(shape)):
        acc = acc[..., None]
        for axes, table in by_last[j]:
            term = _expand(table, axes, j + 1)
            if acc.shape == shape[: j + 1]:
                acc += term
            else:
                acc = acc + term
    if acc.shape != shape:
        acc = acc + np.zeros(shape)
    return acc


class _BucketTree:
    """Log factors distributed over the steps of an elimination plan."""

    def __init__(self, network: UAINetwork, evidence: dict[int, int], plan: EliminationPlan):
        self.network = network
        self.plan = plan
        self.cards = network.cards
        self.step = {v: s for s, v in enumerate(plan.order)}
        self.position = [{v: i for i, v in enumerate(cl)} for cl in plan.clusters]
        self.children: list[list[int]] = [[] for _ in plan.order]
        for s, p in enumerate(plan.parent):
            if p >= 0:
                self.children[p].append(s)
        factors, self.log_constant = reduce_factors(network, evidence)
        merged: dict[tuple[int, ...], np.ndarray] = {}
        for scope, table in factors:
            perm = sorted(range(len(scope)), key=lambda i: self.step[scope[i]])
            key = tuple(scope[i] for i in perm)
            table = np.transpose(table, perm)
            merged[key] = merged[key] + table if key in merged else table
        self.bucket: list[list[tuple[tuple[int, ...], np.ndarray]]] = [[] for _ in plan.order]
        for scope, table in merged.items():
            self.bucket[self.step[scope[0]]].append((scope, table))
        self.messages: list[np.ndarray | None] = [None] * len(plan.order)

    def axes(self, s: int, scope: tuple[int, ...]) -> tuple[int, ...]:
        pos = self.position[s]
        return tuple(pos[v] for v in scope)

    def cluster_table(self, s: int, incoming: np.ndarray | None = None) -> np.ndarray:
        """Sum of step ``s``'s factors, its children's messages and ``incoming`` (parent)."""
        cl = self.plan.clusters[s]
        funcs = [(self.axes(s, scope), table) for scope, table in self.bucket[s]]
        funcs += [
            (self.axes(s, self.plan.clusters[c][1:]), self.messages[c]) for c in self.children[s]
        ]
        if incoming is not None:
            funcs.append((tuple(range(1, len(cl))), incoming))
        return _sum_tables(tuple(int(self.cards[v]) for v in cl), funcs)

    def forward(self) -> float:
        """Upward pass; stores the messages and returns log Z."""
        log_z = self.log_constant
        for s in range(len(self.plan.order)):
            self.messages[s] = _lse(self.cluster_table(s), axis=0)
            if self.plan.parent[s] < 0:
                log_z += float(self.messages[s])
        return log_z

    def backward(self) -> dict[int, np.ndarray]:
        """Downward pass (after :meth:`forward`); returns the marginal of every free variable.

        The cluster tables of this pass are full (unnormalised) joint marginals, so a single
        shift by the cluster maximum is safe: an entry that underflows has posterior
        probability below 1e-300.
        """
        n_steps = len(self.plan.order)
        down: list[np.ndarray | None] = [None] * n_steps
        marginals = {}
        for s in reversed(range(n_steps)):
            cl = self.plan.clusters[s]
            acc = self.cluster_table(s, down[s])
            shift = float(acc.max())
            shift = shift if np.isfinite(shift) else 0.0
            np.subtract(acc, shift, out=acc)
            np.exp(acc, out=acc)
            m = acc.reshape(acc.shape[0], -1).sum(axis=1)
            marginals[cl[0]] = m / m.sum()
            for c in self.children[s]:
                axes = self.axes(s, self.plan.clusters[c][1:])
                other = tuple(i for i in range(len(cl)) if i not in axes)
                up = self.messages[c]
                with np.errstate(divide="ignore", invalid="ignore"):
                    msg = np.log(acc.sum(axis=other)) + shift - up
                msg[up == -np.inf] = -np.inf
                down[c] = msg
        return marginals

    def sample(self, states: np.ndarray, rng: np.random.Generator) -> None:
        """Fill the free variables of ``states`` (S, n) by sampling backwards (after forward)."""
        size = states.shape[0]
        for s in reversed(range(len(self.plan.order))):
            v = self.plan.order[s]
            logits = np.zeros((int(self.cards[v]), size))
            funcs = list(self.bucket[s])
            funcs += [(self.plan.clusters[c][1:], self.messages[c]) for c in self.children[s]]
            for scope, table in funcs:
                if len(scope) == 1:
                    logits = logits + table[:, None]
                else:
                    logits = logits + table[(slice(None), *(states[:, u] for u in scope[1:]))]
            states[:, v] = np.argmax(logits - np.log(-np.log(rng.random(logits.shape))), axis=0)


# --------------------------------------------------------------------------- public API
def _impossible(
    network: UAINetwork, evidence: Mapping[int, int], source: EvidenceLike = None
) -> ImpossibleEvidenceError:
    """The error for P(evidence) = 0 (or Z = 0), naming the evidence file and, when one factor
    alone rules the evidence out, that factor and the evidence values it meets."""
    where = network.name
    if isinstance(source, str | os.PathLike):
        where = f"{os.fspath(source)} (evidence for {network.name})"
    local = zero_factor(network, evidence)
    if local is None:
        detail = None
    elif local[1]:
        f, fixed = local
        values = ", ".join(f"x{v}={evidence[v]}" for v in fixed)
        detail = (
            f"factor {f} on {network.scopes[f]} is zero at {values} for every value of its "
            "other variables"
        )
    else:
        detail = f"factor {local[0]} on {network.scopes[local[0]]} is zero everywhere"
    if evidence:
        detail = detail or (
            f"every state that agrees with the {len(evidence)} evidence values has a zero factor"
        )
        return ImpossibleEvidenceError(
            f"{where}: the evidence is impossible: P(evidence) = 0 exactly ({detail})"
        )
    detail = detail or "every state has a zero factor"
    return ImpossibleEvidenceError(f"{where}: the partition function is 0: {detail}")


def exact_inference(
    network: UAINetwork,
    evidence: EvidenceLike = None,
    *,
    marginals: bool = True,
    max_table_size: int | None = DEFAULT_MAX_TABLE_SIZE,
    heuristic: str = "auto",
) -> ExactResult:
    """Partition function and (optionally) all posterior marginals by bucket-tree elimination.

    Parameters
    ----------
    network : UAINetwork
    evidence : path, mapping or None
        Evidence file or ``{variable: value}``.
    marginals : bool
        Also run the backward pass and return every marginal.
    max_table_size : int or None
        Refuse (``TreewidthTooLargeError``) when a cluster table would have more entries;
        ``None``: no limit (the tables are built whatever their size).
    heuristic : {"auto", "min-fill", "min-weight", "rcm"}
        Elimination-order heuristic (see :func:`elimination_plan`).

    Returns
    -------
    ExactResult

    Raises
    ------
    TypeError, ValueError
        ``max_table_size`` is neither a positive integer nor None.
    TreewidthTooLargeError
        The chosen order needs a table above ``max_table_size``.
    ImpossibleEvidenceError
        ``marginals=True`` and the evidence has probability zero (or Z = 0).
    """
    max_table_size = check_max_table_size(max_table_size)
    source, evidence = evidence, read_evidence(evidence, network)
    plan = elimination_plan(network, evidence, heuristic=heuristic)
    plan.check_size(max_table_size, network.name)
    tree = _BucketTree(network, evidence, plan)
    log_z = tree.forward() if np.isfinite(tree.log_constant) else -np.inf
    if not marginals:
        return ExactResult(log_z, None, plan)
    if log_z == -np.inf:
        raise _impossible(network, evidence, source)
    free = tree.backward()
    out = []
    for v in range(network.n_vars):
        if v in evidence:
            delta = np.zeros(int(network.cards[v]))
            delta[evidence[v]] = 1.0
            out.append(delta)
        else:
            out.append(free[v])
    return ExactResult(log_z, out, plan)


def exact_marginals(
    network: UAINetwork,
    evidence: EvidenceLike = None,
    *,
    max_table_size: int | None = DEFAULT_MAX_TABLE_SIZE,
) -> list[np.ndarray]:
    """Posterior marginal ``P(x_i | evidence)`` of every variable.

    Parameters
    ----------
    network : UAINetwork
    evidence : path, mapping or None
    max_table_size : int or None
        Largest cluster table allowed (entries), None for no limit; see :func:`exact_inference`.

    Returns
    -------
    list of numpy.ndarray
        One probability vector per variable; evidence variables are 0/1 deltas.
    """
    return exact_inference(network, evidence, max_table_size=max_table_size).marginals


def log_partition(
    network: UAINetwork,
    evidence: EvidenceLike = None,
    *,
    log10: bool = False,
    max_table_size: int | None = DEFAULT_MAX_TABLE_SIZE,
) -> float:
    """Log partition function of the evidence-conditioned network.

    Parameters
    ----------
    network : UAINetwork
    evidence : path, mapping or None
    log10 : bool
        Return log10 (the ``.PR`` convention) instead of the natural log.
    max_table_size : int or None
        Largest cluster table allowed (entries), None for no limit.

    Returns
    -------
    float
        ``log Z`` (``log P(evidence)`` for a normalised Bayesian network); ``-inf`` when the
        evidence is impossible.
    """
    res = exact_inference(network, evidence, marginals=False, max_table_size=max_table_size)
    return res.log10_z if log10 else res.log_z


def sample_exact(
    network: UAINetwork,
    evidence: EvidenceLike = None,
    size: int = 1,
    *,
    rng: np.random.Generator | int | None = None,
    max_table_size: int | None = DEFAULT_MAX_TABLE_SIZE,
) -> np.ndarray:
    """Independent exact samples from the posterior, by backward sampling on the bucket tree.

    Parameters
    ----------
    network : UAINetwork
    evidence : path, mapping or None
    size : int
        Number of samples.
    rng : numpy.random.Generator, int or None
        Random generator or seed.
    max_table_size : int or None
        Largest cluster table allowed (entries), None for no limit.

    Returns
    -------
    numpy.ndarray of int, shape (size, n)
        Full assignments (evidence variables at their values).

    Raises
    ------
    ImpossibleEvidenceError
        P(evidence) = 0.
    """
    max_table_size = check_max_table_size(max_table_size)
    rng = np.random.default_rng(rng)
    source, evidence = evidence, read_evidence(evidence, network)
    plan = elimination_plan(network, evidence)
    plan.check_size(max_table_size, network.name)
    tree = _BucketTree(network, evidence, plan)
    log_z = tree.forward() if np.isfinite(tree.log_constant) else -np.inf
    if log_z == -np.inf:
        raise _impossible(network, evidence, source)
    states = np.zeros((size, network.n_vars), dtype=np.int64)
    for v, x in evidence.items():
        states[:, v] = x
    tree.sample(states, rng)
    return states
