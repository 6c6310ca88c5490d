"""Block sets of lattices: ``k x k`` patches of Ising/Potts models in the ``"flat"`` index space,
conditioned on the sites around them (a padded dummy outside the border).
"""

from __future__ import annotations

import numpy as np

from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock, MotifSpec


def lattice_blocks(
    shape: tuple[int, int],
    k: int,
    *,
    variable: str = "x",
    n_states: int = 2,
    stride: int | None = None,
    periodic: bool = False,
) -> BlockSet:
    """``k x k`` patches of a lattice variable, conditioned on their 4-neighbour boundary.

    Patches start every ``stride`` sites (default ``k``) along each axis; a last patch is
    shifted inward so that every site is covered and every patch lies inside the lattice.
    The conditioning set is the ``4 k`` sites adjacent to the patch (top row, bottom row, left
    column, right column, each in increasing order); outside a non-periodic border they are
    dummies with value 0.

    Parameters
    ----------
    shape : (int, int)
        Lattice shape ``(H, W)``; ``k <= min(H, W)``.
    k : int
        Patch side.
    variable : str
        Name of the lattice variable; flat indices are row-major sites.
    n_states : int
        Cardinality of every site (2 for Ising, q for Potts).
    stride : int, optional
    periodic : bool
        Wrap the boundary around (torus). A wrapped neighbour inside the patch itself (tiny
        lattices) becomes a dummy.

    Returns
    -------
    BlockSet
        Index space ``"flat"`` over ``(variable,)``; motif ``"lattice-{k}x{k}"`` without local
        parameters (a proposal for it is model-specific).
    """
    H, W = (int(s) for s in shape)
    k = int(k)
    if k < 1 or k > min(H, W):
        raise ValueError(f"patch side k={k} must be in 1..{min(H, W)} for a {H}x{W} lattice")
    stride = k if stride is None else int(stride)
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    motif = MotifSpec(
        f"lattice-{k}x{k}",
        (n_states,) * (k * k),
        (n_states,) * (4 * k),
        0,
        "k x k lattice patch (row-major) conditioned on its 4k boundary sites: top row, bottom "
        "row, left column, right column; outside a non-periodic border a dummy at value 0",
    )
    blocks = []
    for r0 in _starts(H, k, stride):
        for c0 in _starts(W, k, stride):
            rows, cols = np.meshgrid(np.arange(r0, r0 + k), np.arange(c0, c0 + k), indexing="ij")
            block = (rows * W + cols).ravel()
            cells = [(r, c0 + j) for r in (r0 - 1, r0 + k) for j in range(k)]
            cells += [(r0 + i, c) for c in (c0 - 1, c0 + k) for i in range(k)]
            cond = []
            for r, c in cells:
                if periodic:
                    r, c = r % H, c % W
                if 0 <= r < H and 0 <= c < W and not (r0 <= r < r0 + k and c0 <= c < c0 + k):
                    idx = r * W + c
                    cond.append(idx if idx not in cond else -1)
                else:
                    cond.append(-1)
            blocks.append(MotifBlock(block, np.array(cond), label=f"patch ({r0}, {c0})"))
    return BlockSet(motif, tuple(blocks), index="flat", variables=(variable,))


def _starts(n: int, k: int, stride: int) -> list[int]:
    starts = list(range(0, n - k + 1, stride))
    if starts[-1] + k < n:
        starts.append(n - k)
    return starts


__all__ = ["lattice_blocks"]
