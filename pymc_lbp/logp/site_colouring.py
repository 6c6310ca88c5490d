"""A proper colouring of the block's site graph: classes of sites no two of which share an element
of a logp term (step 3 of :mod:`pymc_lbp.logp.local_differences`).

:func:`greedy_colouring` tries two greedy orders, site order and DSatur, and keeps the one with
fewer colours.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def greedy_colouring(adjacency: sp.csr_matrix) -> np.ndarray:
    """A proper colouring of the site graph: adjacent sites get different colours.

    Two greedy orders are tried, site order (a checkerboard on even lattices) and DSatur (the
    most constrained uncoloured site next: 3 colours on odd tori); the one with fewer colours
    is kept. ``adjacency`` is a symmetric (sites x sites) CSR matrix; its diagonal is ignored.
    """
    adjacency = sp.csr_matrix(adjacency)
    natural = _greedy(adjacency, range(adjacency.shape[0]))
    if natural.max(initial=-1) <= 1:
        return natural  # already optimal
    dsatur = _dsatur(adjacency)
    return natural if natural.max(initial=-1) <= dsatur.max(initial=-1) else dsatur


def _smallest_free(colours, nb):
    used = colours[nb]
    used = used[used >= 0]
    if used.size == 0:
        return 0
    taken = np.zeros(used.max() + 2, dtype=bool)
    taken[used] = True
    return int(np.argmin(taken))


def _greedy(adjacency, order) -> np.ndarray:
    n = adjacency.shape[0]
    colours = np.full(n, -1, dtype=np.int64)
    indptr, indices = adjacency.indptr, adjacency.indices
    for i in order:
        colours[i] = _smallest_free(colours, indices[indptr[i] : indptr[i + 1]])
    return colours


def _dsatur(adjacency) -> np.ndarray:
    import heapq

    n = adjacency.shape[0]
    indptr, indices = adjacency.indptr, adjacency.indices
    colours = np.full(n, -1, dtype=np.int64)
    seen: list[set] = [set() for _ in range(n)]
    degree = np.diff(indptr)
    heap = [(0, -int(degree[i]), i) for i in range(n)]
    heapq.heapify(heap)
    while heap:
        neg_sat, _, i = heapq.heappop(heap)
        if colours[i] >= 0 or -neg_sat != len(seen[i]):
            continue
        nb = indices[indptr[i] : indptr[i + 1]]
        c = _smallest_free(colours, nb)
        colours[i] = c
        for j in nb:
            if colours[j] < 0 and c not in seen[j]:
                seen[j].add(c)
                heapq.heappush(heap, (-len(seen[j]), -int(degree[j]), int(j)))
    return colours


__all__ = ["greedy_colouring"]
