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

The orders are chosen in :mod:`pymc_lbp.factor_graph.elimination` (its names are importable from
here too), the tables built and passed in :mod:`pymc_lbp.factor_graph.bucket_tree`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pymc_lbp.factor_graph.bucket_tree import _BucketTree
from pymc_lbp.factor_graph.elimination import (
    EliminationPlan,
    EvidenceLike,
    check_max_table_size,
    elimination_plan,
)
from pymc_lbp.factor_graph.network import UAINetwork, zero_factor
from pymc_lbp.models.uai.errors import ImpossibleEvidenceError
from pymc_lbp.models.uai.io import read_evidence

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


def _zero_factor_detail(
    network: UAINetwork, evidence: Mapping[int, int]
) -> tuple[str, bool] | None:
    """Why one factor alone rules the evidence out, and whether evidence values take part in
    it; None when no factor does."""
    found = zero_factor(network, evidence)
    if found is None:
        return None
    f, fixed = found
    values = ", ".join(f"x{v}={evidence[v]}" for v in fixed)
    where = f"at {values} for every value of its other variables" if fixed else "everywhere"
    return f"factor {f} on {network.scopes[f]} is zero {where}", bool(fixed)


def _impossible(
    network: UAINetwork, evidence: Mapping[int, int], source: EvidenceLike = None
) -> ImpossibleEvidenceError:
    """The error for P(evidence) = 0 (or Z = 0), naming the evidence file and, when one factor
    alone rules the evidence out, that factor and the evidence values it meets."""
    where = network.name
    if isinstance(source, str | os.PathLike):
        where = f"{os.fspath(source)} (evidence for {network.name})"
    local = _zero_factor_detail(network, evidence)
    detail = local[0] if local else None
    if evidence:
        detail = detail or (
            f"every state that agrees with the {len(evidence)} evidence values has a zero factor"
        )
        return ImpossibleEvidenceError(
            f"{where}: the evidence is impossible: P(evidence) = 0 exactly ({detail})"
        )
    detail = detail or "every state has a zero factor"
    return ImpossibleEvidenceError(f"{where}: the partition function is 0: {detail}")


def _forward(
    network: UAINetwork, evidence: EvidenceLike, max_table_size: int | None, heuristic: str
) -> tuple[dict[int, int], EliminationPlan, _BucketTree, float]:
    """The evidence read, the plan (checked against ``max_table_size``), the tree after its
    upward pass, and log Z."""
    max_table_size = check_max_table_size(max_table_size)
    evidence = read_evidence(evidence, network)
    plan = elimination_plan(network, evidence, heuristic=heuristic)
    plan.check_size(max_table_size, network.name)
    tree = _BucketTree(network, evidence, plan)
    log_z = tree.forward() if np.isfinite(tree.log_constant) else -np.inf
    return evidence, plan, tree, log_z


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
    source = evidence
    evidence, plan, tree, log_z = _forward(network, evidence, max_table_size, heuristic)
    if not marginals:
        return ExactResult(log_z, None, plan)
    if log_z == -np.inf:
        raise _impossible(network, evidence, source)
    free = tree.backward()
    out = [
        np.eye(int(network.cards[v]))[evidence[v]] if v in evidence else free[v]
        for v in range(network.n_vars)
    ]
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
    source = evidence
    evidence, _, tree, log_z = _forward(network, evidence, max_table_size, "auto")
    rng = np.random.default_rng(rng)
    if log_z == -np.inf:
        raise _impossible(network, evidence, source)
    states = np.zeros((size, network.n_vars), dtype=np.int64)
    for v, x in evidence.items():
        states[:, v] = x
    tree.sample(states, rng)
    return states
