"""Finding a full assignment with non-zero probability (a feasible starting state).

Networks with determinism (zero table entries) and evidence make a random state almost surely
impossible. :func:`find_feasible_state` tries, in this order:

1. a ``.MAP`` file (by default the one next to the network file, ``<name>.uai.MAP``), with the
   evidence values substituted;
2. for CPT-structured networks, forward (ancestral) sampling with the evidence clamped
   (likelihood weighting), keeping the first sample whose evidence weight is non-zero;
3. greedy repair from random states: a min-conflicts walk over the zero factors (WalkSAT-like);
4. when the induced width allows, exact elimination: P(evidence) = 0 is then reported as such,
   otherwise an exact posterior sample is returned.

:func:`random_feasible_states` draws one distinct feasible state per chain at random, so that
chains start in different regions of a network whose zero factors split its states into regions
a sampler may never leave.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pymc_lbp.factor_graph.network import UAINetwork
from pymc_lbp.models.uai.errors import ImpossibleEvidenceError, UAIFormatError
from pymc_lbp.models.uai.exact import (
    _zero_factor_detail,
    elimination_plan,
    exact_inference,
    sample_exact,
)
from pymc_lbp.models.uai.io import read_map

__all__ = [
    "check_evidence_locally",
    "find_feasible_state",
    "forward_sample",
    "greedy_repair",
    "random_feasible_states",
]


def _normalised_cpts(network: UAINetwork) -> list[np.ndarray]:
    """CPT of every variable (indexed by child), rows rescaled to sum to 1 (zero rows kept)."""
    children = network.cpt_children()
    cpts: list[np.ndarray] = [np.empty(0)] * network.n_vars
    for f, v in enumerate(children):
        table = network.tables[f]
        sums = table.sum(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            cpts[v] = np.where(sums > 0, table / sums, 0.0)
    return cpts


def forward_sample(
    network: UAINetwork,
    size: int = 1,
    *,
    evidence: Mapping[int, int] | None = None,
    rng: np.random.Generator | int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Ancestral sampling of a CPT-structured network, with the evidence clamped.

    Parameters
    ----------
    network : UAINetwork
        Every factor must be the CPT of its last scope variable (declared ``BAYES`` or not);
        rows are rescaled to sum to 1.
    size : int
        Number of samples.
    evidence : mapping of int to int, optional
        Clamped variables (not sampled).
    rng : numpy.random.Generator, int or None

    Returns
    -------
    states : numpy.ndarray of int, shape (size, n)
    log_weights : numpy.ndarray, shape (size,)
        Sum of the log CPT entries of the evidence variables (likelihood weights); ``-inf``
        marks samples that contradict the evidence.
    """
    rng = np.random.default_rng(rng)
    evidence = dict(evidence or {})
    cpts = _normalised_cpts(network)
    parents = network.parents()
    order = np.argsort(network.topological_layers(), kind="stable")
    states = np.zeros((size, network.n_vars), dtype=np.int64)
    log_w = np.zeros(size)
    for v in order:
        rows = cpts[v][tuple(states[:, u] for u in parents[v])]
        if rows.ndim == 1:
            rows = np.broadcast_to(rows, (size, rows.size))
        if v in evidence:
            states[:, v] = evidence[v]
            with np.errstate(divide="ignore"):
                log_w += np.log(rows[:, evidence[v]])
        else:
            cdf = np.cumsum(rows, axis=1)
            u = rng.random(size) * cdf[:, -1]
            states[:, v] = np.minimum((u[:, None] >= cdf).sum(axis=1), rows.shape[1] - 1)
            log_w[cdf[:, -1] <= 0] = -np.inf
    return states, log_w


def _repair_walk(
    network: UAINetwork,
    evidence: Mapping[int, int],
    state: np.ndarray,
    rng: np.random.Generator,
    max_moves: int,
    noise: float,
) -> np.ndarray | None:
    """Min-conflicts walk from ``state``; the repaired state or None."""
    zero = [t == 0 for t in network.tables]
    scopes = network.scopes
    factors_of = network.factors_of_variable
    cards = network.cards.tolist()
    state = state.copy()

    def is_zero(g: int) -> bool:
        return bool(zero[g][tuple(state[u] for u in scopes[g])])

    violated = {g for g in range(len(scopes)) if is_zero(g)}
    for _ in range(max_moves):
        if not violated:
            return state
        f = sorted(violated)[int(rng.integers(len(violated)))]
        free = [v for v in scopes[f] if v not in evidence and cards[v] > 1]
        if not free:
            return None  # a zero factor with every variable fixed: hopeless from here
        if rng.random() < noise:
            v = free[int(rng.integers(len(free)))]
            x = int(rng.integers(cards[v] - 1))
            x += x >= state[v]
        else:
            best: tuple[tuple[int, float], int, int] | None = None
            for u in free:
                old = int(state[u])
                before = sum(g in violated for g in factors_of[u])
                for y in range(cards[u]):
                    if y != old:
                        state[u] = y
                        key = (sum(is_zero(g) for g in factors_of[u]) - before, rng.random())
                        if best is None or key < best[0]:
                            best = (key, u, y)
                state[u] = old
            _, v, x = best
        state[v] = x
        for g in factors_of[v]:
            if is_zero(g):
                violated.add(g)
            else:
                violated.discard(g)
    return state if not violated else None


def greedy_repair(
    network: UAINetwork,
    evidence: Mapping[int, int] | None = None,
    *,
    rng: np.random.Generator | int | None = None,
    restarts: int = 3,
    max_moves: int | None = None,
    noise: float = 0.2,
) -> np.ndarray | None:
    """Local search for a state without zero factors (min-conflicts with random-walk noise).

    From a random state (evidence clamped), repeatedly pick a zero factor at random and change
    one of its free variables: with probability ``noise`` a random variable to a random other
    value, otherwise the (variable, value) that leaves the fewest zero factors among those
    touching the variable (ties at random), as in WalkSAT.

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int, optional
    rng : numpy.random.Generator, int or None
    restarts : int
        Random initial states tried.
    max_moves : int, optional
        Moves per restart (default ``min(20 n + 1000, 20000)``).
    noise : float
        Probability of a random move.

    Returns
    -------
    numpy.ndarray of int or None
        A full state with finite log measure, or None if none was found.
    """
    rng = np.random.default_rng(rng)
    evidence = dict(evidence or {})
    if max_moves is None:
        max_moves = min(20 * network.n_vars + 1000, 20000)
    for _ in range(restarts):
        state = np.floor(rng.random(network.n_vars) * network.cards).astype(np.int64)
        for v, x in evidence.items():
            state[v] = x
        repaired = _repair_walk(network, evidence, state, rng, max_moves, noise)
        if repaired is not None:
            return repaired
    return None


def check_evidence_locally(network: UAINetwork, evidence: Mapping[int, int]) -> None:
    """Raise :class:`ImpossibleEvidenceError` if a single factor rules the evidence out.

    That is: a factor whose variables are all fixed is zero, or a factor is zero for every
    value of its remaining free variables. The message names the factor, its scope and the
    evidence values it meets.
    """
    found = _zero_factor_detail(network, evidence)
    if found is not None:
        detail, fixed = found
        what = "the evidence is impossible" if fixed else "the network has Z = 0"
        raise ImpossibleEvidenceError(f"{network.name}: {what}: {detail}")


def find_feasible_state(
    network: UAINetwork,
    evidence: Mapping[int, int] | None = None,
    *,
    map_path: str | Path | None = None,
    forward: bool = True,
    rng: np.random.Generator | int | None = None,
    max_exact_table_size: int = 2**22,
) -> tuple[np.ndarray, str]:
    """A full assignment that agrees with the evidence and has non-zero probability.

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int, optional
    map_path : path, optional
        A ``.MAP`` file to try first; by default ``<network file>.MAP`` when it exists.
    forward : bool
        Try forward sampling (only used when the factors form a Bayesian network).
    rng : numpy.random.Generator, int or None
    max_exact_table_size : int
        Largest cluster table for the exact fallback.

    Returns
    -------
    state : numpy.ndarray of int, shape (n,)
    source : str
        How it was found (``"map file <path>"``, ``"forward sampling"``, ``"greedy repair"``,
        ``"exact sample"``).

    Raises
    ------
    ImpossibleEvidenceError
        ``definitive=True`` when a factor or exact elimination proves P(evidence) = 0;
        ``definitive=False`` when no feasible state was found and the network is too wide to
        decide exactly.
    """
    rng = np.random.default_rng(rng)
    evidence = dict(evidence or {})
    check_evidence_locally(network, evidence)
    if map_path is None and network.path is not None:
        candidate = Path(f"{network.path}.MAP")
        map_path = candidate if candidate.exists() else None
    if map_path is not None:
        try:
            state = read_map(map_path, network)
        except (UAIFormatError, OSError):
            state = None
        if state is not None:
            for v, x in evidence.items():
                state[v] = x
            if np.isfinite(network.log_factor_product(state)):
                return state, f"map file {map_path}"
    if forward and _is_cpt_structured(network):
        for _ in range(8):
            states, log_w = forward_sample(network, 256, evidence=evidence, rng=rng)
            for i in np.flatnonzero(np.isfinite(log_w))[:4]:
                if np.isfinite(network.log_factor_product(states[i])):
                    return states[i], "forward sampling"
    state = greedy_repair(network, evidence, rng=rng)
    if state is not None:
        return state, "greedy repair"
    plan = elimination_plan(network, evidence)
    if plan.max_table_size <= max_exact_table_size:
        res = exact_inference(network, evidence, marginals=False)
        if res.log_z == -np.inf:
            what = "the evidence is impossible: P(evidence) = 0" if evidence else "Z = 0"
            raise ImpossibleEvidenceError(
                f"{network.name}: {what} (checked exactly by variable elimination); "
                "no state has non-zero probability"
            )
        return sample_exact(network, evidence, 1, rng=rng)[0], "exact sample"
    raise ImpossibleEvidenceError(
        f"{network.name}: no state with non-zero probability was found (MAP file, forward "
        "sampling, greedy repair); the evidence appears to be impossible. Exact check skipped: "
        f"induced width {plan.induced_width} needs a table of {plan.max_table_size} entries. "
        "Pass a feasible start state to proceed.",
        definitive=False,
    )


def _is_cpt_structured(network: UAINetwork) -> bool:
    try:
        network.cpt_children()
    except ValueError:
        return False
    return True


def random_feasible_states(
    network: UAINetwork,
    evidence: Mapping[int, int] | None = None,
    size: int = 1,
    *,
    rng: np.random.Generator | int | None = None,
    max_exact_table_size: int = 2**22,
) -> tuple[np.ndarray, list[str]]:
    """``size`` feasible full states drawn at random: one start per chain.

    Chains that start from one state cannot show that a sampler never leaves the region of
    states around it (zero factors can wall regions in); chains from independent random starts
    can (their marginals disagree). The states are distinct where the network has enough of
    them: a state another chain already has is drawn again (up to 16 draws per chain). When the
    largest elimination table has at most ``max_exact_table_size`` entries the states are exact
    posterior samples (:func:`~pymc_lbp.models.uai.exact.sample_exact`, the first distinct ones
    of ``16 size`` draws). Otherwise each state comes from its own random stream
    (``rng.spawn``), by the first of these that succeeds:

    1. CPT-structured networks: a forward sample with the evidence clamped, chosen from a batch
       with probability proportional to its likelihood weight (up to 8 batches);
    2. greedy repair (:func:`greedy_repair`) from a uniformly random state;
    3. :func:`find_feasible_state` (a ``.MAP`` file, exact sampling, ...), which may give several
       chains the same state.

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int, optional
    size : int
        Number of states (chains).
    rng : numpy.random.Generator, int or None
    max_exact_table_size : int
        Largest elimination table for exact posterior samples.

    Returns
    -------
    states : numpy.ndarray of int, shape (size, n)
    sources : list of str
        How each state was found (``"exact posterior sample"``, ``"forward sampling"``,
        ``"greedy repair"``, or :func:`find_feasible_state`'s source).

    Raises
    ------
    ImpossibleEvidenceError
        As :func:`find_feasible_state`.
    """
    rng = np.random.default_rng(rng)
    evidence = dict(evidence or {})
    check_evidence_locally(network, evidence)
    plan = elimination_plan(network, evidence)
    if plan.max_table_size <= max_exact_table_size:  # draws of the target itself
        batch = sample_exact(
            network, evidence, _DISTINCT_TRIES * size, rng=rng, max_table_size=None
        )
        return batch[_distinct_first(batch, size)], ["exact posterior sample"] * size
    bayesian = _is_cpt_structured(network)
    states = np.zeros((size, network.n_vars), dtype=np.int64)
    sources = []
    for c, r in enumerate(rng.spawn(size)):
        for _ in range(_DISTINCT_TRIES):  # a state another chain has already: draw again
            state, source = _random_feasible_state(network, evidence, r, bayesian)
            if not (states[:c] == state).all(axis=1).any():
                break
        states[c] = state
        sources.append(source)
    return states, sources


_DISTINCT_TRIES = 16
""":func:`random_feasible_states` draws up to this many states per chain to find distinct ones."""


def _distinct_first(batch: np.ndarray, size: int) -> np.ndarray:
    """Indices of ``size`` rows of ``batch``: the distinct rows in order of first appearance,
    then (when there are fewer distinct rows than ``size``) repeats in order."""
    _, first = np.unique(batch, axis=0, return_index=True)
    distinct = np.sort(first)[:size]
    if distinct.size == size:
        return distinct
    rest = np.setdiff1d(np.arange(batch.shape[0]), distinct)[: size - distinct.size]
    return np.concatenate([distinct, rest])


def _random_feasible_state(
    network: UAINetwork, evidence: dict[int, int], rng: np.random.Generator, bayesian: bool
) -> tuple[np.ndarray, str]:
    """One feasible state by forward sampling (CPT-structured networks), greedy repair from a
    random state, or :func:`find_feasible_state`, and how it was found."""
    if bayesian:  # a batch's sample drawn in proportion to its likelihood weight (SIR)
        for _ in range(8):
            states, log_w = forward_sample(network, 256, evidence=evidence, rng=rng)
            log_w = np.where(np.isfinite(network.log_factor_product(states)), log_w, -np.inf)
            if np.isfinite(log_w).any():
                w = np.exp(log_w - log_w.max())
                return states[int(rng.choice(256, p=w / w.sum()))], "forward sampling"
    state = greedy_repair(network, evidence, rng=rng)
    if state is not None:
        return state, "greedy repair"
    return find_feasible_state(network, evidence, rng=rng)
