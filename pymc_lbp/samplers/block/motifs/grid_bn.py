"""The grid-BN motif of Wang et al. (2018): a 3 x 3 block of a binary grid Bayesian network, the 14
conditioning nodes around it and the 60 CPT entries of its local parameters.

:data:`GRID_BN_MOTIF`, :func:`grid_bn_layout` (node of every grid position), :func:`grid_bn_blocks`
/ :func:`uai_grid_blocks` (the motif's blocks on a network), :func:`grid_bn_motif_samples`
(training data from random local CPTs, for the reusable grid-BN proposal) and the exact block
conditional :func:`grid_bn_motif_log_conditional`.
"""

from __future__ import annotations

import numpy as np

from pymc_lbp.samplers.block.motifs.lattice_blocks import _starts
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock, MotifSpec
from pymc_lbp.samplers.block.motifs.uai_blocks import _as_network

GRID_BN_DESCRIPTION = (
    "Grid Bayesian network motif (Wang et al. 2018): node (i, j) of an N x N binary grid has the "
    "parents up (i-1, j) and left (i, j-1). Block: the 3 x 3 nodes (r0+a, c0+b), a, b = 0..2, "
    "row-major. Conditioning (14): up (r0-1, c0..c0+2), left (r0..r0+2, c0-1), down "
    "(r0+3, c0..c0+2), right (r0..r0+2, c0+3), then (r0+3, c0-1) and (r0-1, c0+3). Parameters "
    "(60): for the 9 block nodes, then the 3 down and the 3 right children, "
    "p[up, left] = P(node = 1 | up, left) flattened (up-major, 4 numbers). Borders: a "
    "conditioning node outside the grid is a dummy with value 0; a node with a parent outside "
    "the grid gets a CPT that ignores it (p[1, :] = p[0, :] for a missing up parent, "
    "p[:, 1] = p[:, 0] for a missing left one); a child outside the grid gets p = 0.5 in every "
    "row (its factor is constant)."
)

GRID_BN_MOTIF = MotifSpec("grid-bn", (2,) * 9, (2,) * 14, 60, GRID_BN_DESCRIPTION)

# local coordinates (row, col) of the 14 conditioning nodes relative to the block's corner
_GRID_COND = (
    [(-1, c) for c in range(3)]
    + [(r, -1) for r in range(3)]
    + [(3, c) for c in range(3)]
    + [(r, 3) for r in range(3)]
    + [(3, -1), (-1, 3)]
)
_GRID_BLOCK = [(r, c) for r in range(3) for c in range(3)]
_GRID_CHILDREN = [(3, c) for c in range(3)] + [(r, 3) for r in range(3)]


def grid_bn_layout(network) -> np.ndarray:
    """Recover the grid of a grid Bayesian network whose variables may be numbered in any order.

    The root (no parents) is ``(0, 0)``; of its two children the one with the smaller index is
    ``(0, 1)``; a node with parents at ``(i-1, j)`` and ``(i, j-1)`` is ``(i, j)``, a node with
    one parent on the first row (column) continues that row (column).

    Parameters
    ----------
    network : UAINetwork or read_uai model
        A BAYES network whose parent graph is an ``N x N`` grid (``N >= 2``).

    Returns
    -------
    ndarray of int, shape (N, N)
        ``layout[i, j]`` is the network index of node ``(i, j)``.

    Raises
    ------
    ValueError
        If the network is not such a grid (naming the first node that does not fit).
    """
    network = _as_network(network)
    n = network.n_vars
    N = round(np.sqrt(n))
    where = f"{network.name}: not a grid Bayesian network"
    if N * N != n or N < 2:
        raise ValueError(f"{where}: {n} variables is not N x N with N >= 2")
    parents = network.parents()
    order = np.argsort(network.topological_layers(), kind="stable")
    roots = [v for v in range(n) if not parents[v]]
    if len(roots) != 1:
        raise ValueError(f"{where}: {len(roots)} root nodes (expected 1)")
    coords: dict[int, tuple[int, int]] = {roots[0]: (0, 0)}
    root_children = sorted(v for v in range(n) if parents[v] == (roots[0],))
    if len(root_children) != 2:
        raise ValueError(f"{where}: the root has {len(root_children)} single-parent children")
    coords[root_children[0]] = (0, 1)
    coords[root_children[1]] = (1, 0)
    for v in order.tolist():
        if v in coords:
            continue
        ps = parents[v]
        pc = [coords.get(u) for u in ps]
        if any(c is None for c in pc):
            raise ValueError(f"{where}: node {v} has a parent that is not placed")
        if len(ps) == 1:
            (a, b) = pc[0]
            if a == 0 and b > 0:
                coords[v] = (0, b + 1)
            elif b == 0 and a > 0:
                coords[v] = (a + 1, 0)
            else:
                raise ValueError(f"{where}: node {v} has one parent, at {pc[0]}")
        elif len(ps) == 2:
            (a, b), (c, d) = pc
            if abs(a - c) != 1 or abs(b - d) != 1 or a + b != c + d:
                raise ValueError(f"{where}: node {v} has parents at {pc}")
            coords[v] = (max(a, c), max(b, d))
        else:
            raise ValueError(f"{where}: node {v} has {len(ps)} parents")
    layout = np.full((N, N), -1, dtype=np.int64)
    for v, (i, j) in coords.items():
        if not (0 <= i < N and 0 <= j < N) or layout[i, j] != -1:
            raise ValueError(f"{where}: node {v} lands on {(i, j)}, outside or taken")
        layout[i, j] = v
    # every node's parents must be exactly its grid up/left neighbours
    for i in range(N):
        for j in range(N):
            want = {layout[i - 1, j]} if i > 0 else set()
            want |= {layout[i, j - 1]} if j > 0 else set()
            if set(parents[layout[i, j]]) != want:
                raise ValueError(f"{where}: node {layout[i, j]} at {(i, j)} has other parents")
    return layout


def _grid_cpt(network, cpt_index: dict[int, int], layout: np.ndarray, i: int, j: int):
    """``p[up, left] = P(node(i, j) = 1 | up, left)`` with the missing-parent convention."""
    f = cpt_index[int(layout[i, j])]
    table = network.tables[f]
    sums = table.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p1 = np.where(sums > 0, table / sums, 0.5)[..., 1]
    axes = {u: a for a, u in enumerate(network.scopes[f][:-1])}
    p = np.empty((2, 2))
    for a, b in np.ndindex(2, 2):
        idx = [0] * len(axes)
        if i > 0:
            idx[axes[int(layout[i - 1, j])]] = a
        if j > 0:
            idx[axes[int(layout[i, j - 1])]] = b
        p[a, b] = p1[tuple(idx)]
    return p


def grid_bn_blocks(network, *, stride: int = 3) -> BlockSet:
    """The grid-BN motif blocks of a grid Bayesian network (see :data:`GRID_BN_MOTIF`).

    3 x 3 blocks start every ``stride`` nodes along each axis (a last block is shifted inward so
    that every node is covered); each block is conditioned on the 14 nodes around it and carries
    the 60 CPT parameters of its nodes and of its children, with the border conventions of the
    motif (dummies at value 0, CPTs that ignore missing parents, constant factors for missing
    children).

    Parameters
    ----------
    network : UAINetwork or read_uai model
        A binary grid BN (any variable numbering; see :func:`grid_bn_layout`), ``N >= 3``.
    stride : int, default 3
        3 tiles the grid; 1 gives every block position.

    Returns
    -------
    BlockSet
        Index space ``"uai"`` (network indices).
    """
    network = _as_network(network)
    layout = grid_bn_layout(network)
    N = layout.shape[0]
    if N < 3:
        raise ValueError(f"{network.name}: a 3 x 3 block needs N >= 3, the grid is {N} x {N}")
    if np.any(network.cards != 2):
        raise ValueError(f"{network.name}: the grid-BN motif needs binary variables")
    cpt_index = {s[-1]: f for f, s in enumerate(network.scopes)}
    cpts = {(i, j): _grid_cpt(network, cpt_index, layout, i, j) for i in range(N) for j in range(N)}
    missing_child = np.full((2, 2), 0.5)  # a child outside the grid: a constant factor

    def node(i, j):
        return int(layout[i, j]) if 0 <= i < N and 0 <= j < N else -1

    blocks = []
    for r0 in _starts(N, 3, stride):
        for c0 in _starts(N, 3, stride):
            block = [node(r0 + r, c0 + c) for r, c in _GRID_BLOCK]
            cond = [node(r0 + r, c0 + c) for r, c in _GRID_COND]
            params = [
                cpts.get((r0 + r, c0 + c), missing_child).ravel()
                for r, c in _GRID_BLOCK + _GRID_CHILDREN
            ]
            blocks.append(
                MotifBlock(
                    np.array(block), np.array(cond), np.concatenate(params), label=f"({r0}, {c0})"
                )
            )
    return BlockSet(GRID_BN_MOTIF, tuple(blocks), index="uai")


def uai_grid_blocks(source, *, stride: int = 3) -> BlockSet:
    """Grid-BN motif blocks of a UAI grid Bayesian network (a network, or a model built by
    ``read_uai``).

    The short path for a UAI grid BN::

        model = read_uai(path, evidence)
        blocks = uai_grid_blocks(model)
        step = pymc_lbp.NeuralBlock(model.free_RVs, blocks=blocks,
                                    proposal=pymc_lbp.load_proposal("grid-bn"))

    See :func:`grid_bn_blocks` for the parameters.
    """
    return grid_bn_blocks(source, stride=stride)


def _cpt_rows(rng: np.random.Generator, size, det_prob: float) -> np.ndarray:
    """``P(x = 1)`` of random CPT rows: 0 and 1 w.p. ``det_prob`` each, else Beta(1/2, 1/2)."""
    u = rng.random(size)
    p = rng.beta(0.5, 0.5, size)
    return np.where(u < det_prob, 0.0, np.where(u < 2 * det_prob, 1.0, p))


def grid_bn_motif_samples(
    n: int,
    rng: np.random.Generator | int | None = None,
    *,
    det_prob: float = 1.0 / 40.0,
    border_prob: float = 0.25,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint samples of the grid-BN motif over random local CPTs (training data).

    Every CPT row (``P(x = 1 | parents)``) is 0 w.p. ``det_prob``, 1 w.p. ``det_prob`` and
    Beta(1/2, 1/2) (the Dirichlet(1/2, 1/2) of Wang et al.) otherwise; the 8 conditioning nodes
    without parents inside the motif (up, left and the two corners) get a random row of the
    same law as their marginal. Each side of the motif lies on a grid border independently with
    probability ``border_prob``, with exactly the padding of :func:`grid_bn_blocks`, so the
    network learns the border cases too. The block and its children are then forward-sampled.

    Parameters
    ----------
    n : int
        Number of samples.
    rng : Generator, int or None
    det_prob : float
        Probability of each of the two deterministic rows.
    border_prob : float
        Probability that a side (top, left, bottom, right) is a grid border.

    Returns
    -------
    x_block : ndarray of int, shape (n, 9)
    x_cond : ndarray of int, shape (n, 14)
    params : ndarray, shape (n, 60)
    """
    rng = np.random.default_rng(rng)
    # local grid: rows/cols -1..3 stored at offset 1
    vals = np.zeros((n, 5, 5), dtype=np.int64)
    top, left, bottom, right = (rng.random(n) < border_prob for _ in range(4))
    present = np.ones((n, 5, 5), dtype=bool)
    present[top, 0, :] = False
    present[left, :, 0] = False
    present[bottom, 4, :] = False
    present[right, :, 4] = False
    roots = [(-1, 0), (-1, 1), (-1, 2), (-1, 3), (0, -1), (1, -1), (2, -1), (3, -1)]
    for r, c in roots:
        p = _cpt_rows(rng, n, det_prob)
        vals[:, r + 1, c + 1] = np.where(present[:, r + 1, c + 1], rng.random(n) < p, 0)
    params = []
    for r, c in _GRID_BLOCK + _GRID_CHILDREN:
        p = _cpt_rows(rng, (n, 2, 2), det_prob)
        up_ok = present[:, r, c + 1]
        left_ok = present[:, r + 1, c]
        p[:, 1, :] = np.where(up_ok[:, None], p[:, 1, :], p[:, 0, :])
        p[:, :, 1] = np.where(left_ok[:, None], p[:, :, 1], p[:, :, 0])
        here = present[:, r + 1, c + 1]
        p = np.where(here[:, None, None], p, 0.5)
        up = vals[:, r, c + 1]
        lf = vals[:, r + 1, c]
        prob = p[np.arange(n), up, lf]
        vals[:, r + 1, c + 1] = np.where(here, rng.random(n) < prob, 0)
        params.append(p.reshape(n, 4))
    x_block = np.stack([vals[:, r + 1, c + 1] for r, c in _GRID_BLOCK], axis=1)
    x_cond = np.stack([vals[:, r + 1, c + 1] for r, c in _GRID_COND], axis=1)
    return x_block, x_cond, np.concatenate(params, axis=1)


_ALL_BLOCK_STATES = np.array(list(np.ndindex((2,) * 9)), dtype=np.int64)


def grid_bn_motif_log_conditional(x_cond: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Exact ``log p(x_B | x_C)`` of the grid-BN motif, for all 512 block states.

    Parameters
    ----------
    x_cond : ndarray of int, shape (n, 14)
    params : ndarray, shape (n, 60)

    Returns
    -------
    ndarray, shape (n, 512)
        Rows follow ``itertools.product(range(2), repeat=9)`` (row-major block, last node
        fastest); ``-inf`` for impossible states. A row is all ``-inf`` if the conditioning
        values are impossible.
    """
    x_cond = np.asarray(x_cond, dtype=np.int64)
    params = np.asarray(params, dtype=np.float64)
    chunk = 256
    if x_cond.shape[0] > chunk:
        return np.concatenate(
            [
                grid_bn_motif_log_conditional(x_cond[i : i + chunk], params[i : i + chunk])
                for i in range(0, x_cond.shape[0], chunk)
            ]
        )
    n = x_cond.shape[0]
    S = _ALL_BLOCK_STATES.shape[0]
    vals = np.zeros((n, S, 5, 5), dtype=np.int64)
    for j, (r, c) in enumerate(_GRID_COND):
        vals[:, :, r + 1, c + 1] = x_cond[:, j, None]
    for j, (r, c) in enumerate(_GRID_BLOCK):
        vals[:, :, r + 1, c + 1] = _ALL_BLOCK_STATES[None, :, j]
    logp = np.zeros((n, S))
    rows = np.arange(n)[:, None]
    with np.errstate(divide="ignore"):
        for t, (r, c) in enumerate(_GRID_BLOCK + _GRID_CHILDREN):
            p = params[:, 4 * t : 4 * t + 4].reshape(n, 2, 2)
            p1 = p[rows, vals[:, :, r, c + 1], vals[:, :, r + 1, c]]
            x = vals[:, :, r + 1, c + 1]
            logp += np.log(np.where(x == 1, p1, 1.0 - p1))
    top = logp.max(axis=1, keepdims=True)
    ok = np.isfinite(top)
    top = np.where(ok, top, 0.0)
    with np.errstate(divide="ignore"):
        norm = top + np.log(np.exp(logp - top).sum(axis=1, keepdims=True))
    return np.where(ok, logp - norm, -np.inf)


__all__ = [
    "GRID_BN_MOTIF",
    "grid_bn_blocks",
    "grid_bn_layout",
    "grid_bn_motif_log_conditional",
    "grid_bn_motif_samples",
    "uai_grid_blocks",
]
