"""Clusters of a UAI network for exact block Gibbs: blocks that cross its determinism.

A single-site sampler cannot leave a region of states walled in by zero factors: on a factor
``x0 != x1`` (table ``0 1 1 0``) changing either variable alone gives probability zero, so a chain
keeps the values it started with. Resampling both variables together from their exact conditional
moves between ``(0, 1)`` and ``(1, 0)`` in one step. :func:`uai_clusters` chooses such blocks from
the network's structure:

1. **Deterministic factors** (a zero entry among the free variables, after the evidence is
   substituted) are kept whole: each one's free scope lies inside one block.
2. **Blocks follow a min-fill elimination order** (:func:`~pymc_lbp.models.uai.exact.
   elimination_plan`). Eliminating variable ``v`` forms the cluster of ``v`` and its neighbours at
   that time; every factor's scope lies inside the cluster of its first-eliminated variable. A
   cluster within the budget is a block as it is; a larger one is cut down to ``v``, the
   deterministic scopes that first meet at ``v`` and as many of the cluster's other variables
   (in elimination order) as the budget allows.
3. **Blocks grow up the bucket tree**: every step's block is merged into its parent step's block
   while the union stays within ``max_states`` joint states (a child cluster minus its variable
   lies inside its parent's cluster, so a merge usually adds one variable). Blocks contained in
   another block are dropped.

Every free variable is in some block, evidence variables (and variables of cardinality 1, which
:func:`~pymc_lbp.models.uai.read_uai` fixes) in none. A deterministic scope whose joint states
alone exceed ``max_states`` becomes a block of its own, larger than the budget (its table is in
the file already, so enumerating it costs about as much as reading it). Blocks may overlap.

Steps 1-3 work on any interaction graph: :func:`graph_clusters` takes the graph, the
cardinalities and the must-stay-together scopes, and :func:`uai_clusters` is it on a network.
``pymc_lbp.BlockGibbs`` calls it on the graph it reads from any discrete PyMC model
(:mod:`pymc_lbp.samplers.block.model_structure`) and on a network read by ``read_uai``; the
evidence is a mapping (read an ``.evid`` file with :func:`pymc_lbp.models.uai.read_evidence`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pymc_lbp.factor_graph.elimination import (
    EvidenceLike,
    _greedy_order,
    _interaction_graph,
    _plan_for_order,
)
from pymc_lbp.factor_graph.network import UAINetwork, check_evidence, reduce_factors

__all__ = ["DEFAULT_MAX_STATES", "deterministic_scopes", "graph_clusters", "uai_clusters"]

DEFAULT_MAX_STATES = 1024
"""Joint states a block may have by default (10 binary variables): an exact update evaluates
the target at every one of them. On 50-12-5 a budget four times larger made each draw several
times costlier and left the marginal error at equal wall time where it was (docs/uai.md,
"Clusters for exact block Gibbs")."""


def _fixed_values(network: UAINetwork, evidence: Mapping[int, int]) -> dict[int, int]:
    """The evidence plus the variables of cardinality 1 (at 0): what the model does not sample."""
    fixed = {v: 0 for v in range(network.n_vars) if network.cards[v] == 1}
    fixed.update(evidence)
    return fixed


def deterministic_scopes(
    network: UAINetwork, evidence: EvidenceLike = None
) -> list[tuple[int, ...]]:
    """The free scopes of the factors that have a zero entry once the evidence is substituted.

    Parameters
    ----------
    network : UAINetwork
    evidence : path, mapping or None
        Evidence variables (and variables of cardinality 1) are substituted and left out of
        the scopes.

    Returns
    -------
    list of tuple of int
        Sorted variable indices, one entry per distinct scope of two or more free variables
        (a zero factor on one free variable constrains nothing a block has to respect).
    """
    evidence = check_evidence(evidence, network)
    factors, _ = reduce_factors(network, _fixed_values(network, evidence))
    scopes = {
        tuple(sorted(scope))
        for scope, log_table in factors
        if len(scope) > 1 and np.isneginf(log_table).any()
    }
    return sorted(scopes)


def uai_clusters(
    network: UAINetwork,
    evidence: EvidenceLike = None,
    *,
    max_states: int = DEFAULT_MAX_STATES,
) -> list[tuple[int, ...]]:
    """Blocks of a UAI network for exact block Gibbs (see the module docstring).

    :func:`graph_clusters` on the network's interaction graph (the evidence and the variables
    of cardinality 1 removed), its cardinalities and its :func:`deterministic_scopes`.

    Parameters
    ----------
    network : UAINetwork
    evidence : path, mapping or None
        Evidence variables are in no block.
    max_states : int
        Largest number of joint states of a block (the product of its cardinalities), except a
        deterministic scope that alone is larger (it gets a block of its own).

    Returns
    -------
    list of tuple of int
        The blocks: sorted network variable indices each, ordered by their first variable in
        the elimination order. Every free variable is in at least one block and every
        deterministic factor's free scope (:func:`deterministic_scopes`) inside one; empty when
        no variable is free.

    Raises
    ------
    ValueError
        ``max_states`` below 1.
    """
    _check_max_states(max_states)
    evidence = check_evidence(evidence, network)
    fixed = _fixed_values(network, evidence)
    return graph_clusters(
        _interaction_graph(network, fixed),
        network.cards.tolist(),
        deterministic_scopes(network, evidence),
        max_states=max_states,
    )


def _check_max_states(max_states: object) -> None:
    if isinstance(max_states, bool) or int(max_states) != max_states or max_states < 1:
        raise ValueError(f"max_states must be a positive integer, got {max_states!r}")


def graph_clusters(
    adjacency: Mapping[int, Iterable[int]],
    cards: Sequence[int],
    scopes: Iterable[Sequence[int]] = (),
    *,
    max_states: int = DEFAULT_MAX_STATES,
) -> list[tuple[int, ...]]:
    """Blocks of any interaction graph for exact block Gibbs (steps 1-3 of the module docstring).

    The algorithm of :func:`uai_clusters` on a plain graph: nodes are variables, an edge joins
    two variables that some term of the target reads together, ``scopes`` are the sets of
    variables that must stay together (a term that is zero for some of their joint values).
    Used by :func:`uai_clusters` (a network's factors) and by ``pymc_lbp.BlockGibbs`` (any
    discrete PyMC model, :mod:`pymc_lbp.samplers.block.model_structure`).

    Parameters
    ----------
    adjacency : mapping of int to iterable of int
        Every variable to be blocked (the keys) and the variables it interacts with (made
        symmetric here; a variable that is no key is in no block and may not appear as a
        neighbour).
    cards : sequence of int
        Cardinality of every variable, indexed by variable (at least ``max(keys) + 1`` long).
    scopes : iterable of sequences of int
        Must-stay-together sets (their variables are joined into cliques of the graph); scopes of
        fewer than two variables constrain nothing and are ignored.
    max_states : int
        Largest number of joint states of a block, except a scope that alone is larger (it gets
        a block of its own).

    Returns
    -------
    list of tuple of int
        Sorted variables each, ordered by their first variable in the min-fill elimination order
        (ties broken by the variable's index); every key of ``adjacency`` in at least one block,
        every scope inside one; no block inside another.

    Raises
    ------
    ValueError
        ``max_states`` below 1, or a neighbour or scope variable that is not a key.
    """
    _check_max_states(max_states)
    adj = {int(v): {int(a) for a in nb} for v, nb in adjacency.items()}
    for v, nb in list(adj.items()):
        for a in nb:
            if a not in adj:
                raise ValueError(f"variable {v}'s neighbour {a} is not a variable of the graph")
            adj[a].add(v)
    scopes = sorted({tuple(sorted({int(v) for v in s})) for s in scopes})
    scopes = [s for s in scopes if len(s) > 1]
    for scope in scopes:
        if any(v not in adj for v in scope):
            raise ValueError(f"scope {scope} holds variables that are not in the graph")
        for v in scope:
            adj[v].update(scope)
    for v, nb in adj.items():
        nb.discard(v)
    cards = [int(c) for c in cards]
    if not adj:
        return []
    if max(adj) >= len(cards):
        raise ValueError(f"cards has {len(cards)} entries; the graph has variable {max(adj)}")
    log_card = np.log(np.maximum(np.asarray(cards, dtype=np.float64), 1.0))
    order = _greedy_order(adj, log_card, "min-fill")
    plan = _plan_for_order(adj, cards, order, "min-fill")
    step = {v: s for s, v in enumerate(plan.order)}

    def states(block: set[int] | tuple[int, ...]) -> int:
        return math.prod(cards[v] for v in block)

    # every scope first meets at the step of its first-eliminated variable, whose cluster holds
    # all of it (a scope is a clique of the graph)
    meets: list[list[tuple[int, ...]]] = [[] for _ in plan.order]
    for scope in scopes:
        meets[min(step[v] for v in scope)].append(scope)

    blocks: list[set[int]] = []
    extra: list[set[int]] = []  # scopes that did not fit their step's block
    for s, cluster in enumerate(plan.clusters):
        if states(cluster) <= max_states:
            blocks.append(set(cluster))
            continue
        block = {cluster[0]}
        for scope in sorted(meets[s], key=states):
            if states(block | set(scope)) <= max_states:
                block |= set(scope)
            else:
                extra.append(set(scope))
        for v in cluster[1:]:  # the others in elimination order, while the budget allows
            if v not in block and states(block) * cards[v] <= max_states:
                block.add(v)
        blocks.append(block)

    # grow up the bucket tree: a step's block joins its parent's while within the budget
    root = list(range(len(blocks)))

    def find(s: int) -> int:
        while root[s] != s:
            root[s] = root[root[s]]
            s = root[s]
        return s

    for s, parent in enumerate(plan.parent):
        if parent < 0:
            continue
        a, b = find(s), find(parent)
        if a != b and states(blocks[a] | blocks[b]) <= max_states:
            blocks[b] |= blocks[a]
            root[a] = b
    merged = [blocks[s] for s in range(len(blocks)) if find(s) == s] + extra

    # drop duplicates and blocks inside another block (largest first, so a subset finds them)
    merged.sort(key=lambda b: (-len(b), sorted(step[v] for v in b)))
    kept: list[set[int]] = []
    for block in merged:
        if not any(block <= other for other in kept):
            kept.append(block)
    kept.sort(key=lambda b: min(step[v] for v in b))
    out = [tuple(sorted(b)) for b in kept]
    covered = set().union(*kept)
    if covered != set(plan.order):  # by construction; a broken invariant must not pass silently
        raise AssertionError(f"clusters miss variables {sorted(set(plan.order) - covered)}")
    return out
