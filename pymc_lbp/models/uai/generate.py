"""Generators of synthetic UAI networks.

:func:`grid_bn` makes the grid Bayesian networks of Sang, Beame and Kautz (the UAI 2008 "grids"
family, e.g. ``50-12-5``, and the targets of Neural Block Sampling, Wang et al. 2018): an
``n x n`` grid of binary variables where node ``(i, j)`` has the parents ``(i-1, j)`` and
``(i, j-1)``, a given fraction of the nodes are deterministic (every row of their CPT is a 0/1
row) and the other rows are uniform random; the evidence is ``sink = 1``.
"""

from __future__ import annotations

import numpy as np

from pymc_lbp.factor_graph.network import UAINetwork
from pymc_lbp.models.uai.start import forward_sample

__all__ = ["grid_bn", "grid_index"]


def grid_index(i: int, j: int, n: int) -> int:
    """Network index of grid node ``(i, j)`` in :func:`grid_bn` (row-major: ``i * n + j``)."""
    return i * n + j


def grid_bn(
    n: int, deterministic_fraction: float, seed: int | None = 0
) -> tuple[UAINetwork, dict[int, int]]:
    """An ``n x n`` grid Bayesian network with deterministic nodes, and its sink evidence.

    Parameters
    ----------
    n : int
        Grid side (``n >= 2``); the network has ``n * n`` binary variables, node ``(i, j)`` is
        variable ``i * n + j`` (see :func:`grid_index`).
    deterministic_fraction : float
        Fraction of the nodes, in ``[0, 1]``, whose CPT is deterministic: exactly
        ``round(deterministic_fraction * n * n)`` nodes, chosen uniformly at random. Every row
        of a deterministic CPT puts probability 1 on a value drawn uniformly from {0, 1}; every
        row of the other CPTs is ``(1 - p, p)`` with ``p ~ Uniform(0, 1)``. (In the UAI 2008
        files the name ``50-12-5`` means 50 % deterministic nodes, 12 x 12, instance 5; the
        shipped instances have 43 % and 75 % deterministic nodes.)
    seed : int or None
        Seed of the generator; the same seed gives the same network.

    Returns
    -------
    network : UAINetwork
        A ``BAYES`` network with ``n * n`` CPTs; the CPT of node ``v`` is factor ``v``, with the
        scope ``(up, left, v)`` (only the parents that exist; the root ``(0, 0)`` has none).
    evidence : dict of int to int
        ``{sink: 1}`` with ``sink = n * n - 1``, the node ``(n-1, n-1)``. The evidence always has
        non-zero probability: a forward sample is drawn and, if the sink's CPT row at that
        sample's parent values is the deterministic row ``(1, 0)``, that row is turned into
        ``(0, 1)`` (it stays deterministic, so the fraction of deterministic nodes is exact).

    Examples
    --------
    >>> network, evidence = grid_bn(12, 0.5, seed=5)
    >>> network.n_vars, evidence
    (144, {143: 1})
    """
    n = int(n)
    if n < 2:
        raise ValueError(f"grid_bn needs n >= 2, got {n}")
    frac = float(deterministic_fraction)
    if not 0.0 <= frac <= 1.0:
        raise ValueError(f"deterministic_fraction must be in [0, 1], got {deterministic_fraction}")
    rng = np.random.default_rng(seed)
    n_vars = n * n
    deterministic = np.zeros(n_vars, dtype=bool)
    deterministic[rng.permutation(n_vars)[: round(frac * n_vars)]] = True
    scopes: list[tuple[int, ...]] = []
    tables: list[np.ndarray] = []
    for i in range(n):
        for j in range(n):
            v = grid_index(i, j, n)
            parents = []
            if i > 0:
                parents.append(grid_index(i - 1, j, n))
            if j > 0:
                parents.append(grid_index(i, j - 1, n))
            n_rows = 2 ** len(parents)
            if deterministic[v]:
                p_one = rng.integers(0, 2, size=n_rows).astype(np.float64)
            else:
                p_one = rng.random(n_rows)
            table = np.stack([1.0 - p_one, p_one], axis=-1).reshape((2,) * len(parents) + (2,))
            scopes.append((*parents, v))
            tables.append(table)
    sink = n_vars - 1
    network = UAINetwork("BAYES", np.full(n_vars, 2), scopes, tables)
    # make sink = 1 possible: at the parents' values of one forward sample, P(sink = 1) > 0
    state = forward_sample(network, 1, rng=rng)[0][0]
    row = tuple(int(state[u]) for u in scopes[sink][:-1])
    if tables[sink][row][1] == 0.0:
        tables[sink][row] = (0.0, 1.0)
        network = UAINetwork("BAYES", np.full(n_vars, 2), scopes, tables)
    return network, {sink: 1}
