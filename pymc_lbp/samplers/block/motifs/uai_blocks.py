"""Block sets of UAI networks: :func:`uai_exact_blocks` (blocks of any shape, ``motif=None``,
for exact block Gibbs); ``_as_network`` takes a network or a model built by ``read_uai``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pymc_lbp.factor_graph.model_info import model_info
from pymc_lbp.factor_graph.network import UAINetwork
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock


def uai_exact_blocks(
    network, blocks: Sequence[Sequence[int]], *, label: str = "cluster"
) -> BlockSet:
    """Blocks of a UAI network of any sizes and cardinalities, for exact block Gibbs.

    A block set without a motif (``motif=None``): each block is resampled from its exact
    conditional by ``NeuralBlock(vars, blocks=..., proposal="exact")``; no proposal network
    can take such blocks. Blocks may overlap; evidence variables in a block are clamped.

    Parameters
    ----------
    network : UAINetwork or read_uai model
    blocks : sequence of sequences of int
        Network variable indices of each block (e.g. from
        :func:`pymc_lbp.factor_graph.clusters.uai_clusters`).
    label : str
        Prefix of the block labels (``"cluster 0 [3, 4, 7]"``).

    Returns
    -------
    BlockSet
        Index space ``"uai"``, ``motif=None``.
    """
    network = _as_network(network)
    out = []
    for k, b in enumerate(blocks):
        block = np.asarray(list(b), dtype=np.int64)
        if block.size and (block.min() < 0 or block.max() >= network.n_vars):
            raise ValueError(
                f"block {k} holds {block.tolist()}, outside the network's variables "
                f"0..{network.n_vars - 1}"
            )
        out.append(MotifBlock(block, np.zeros(0, np.int64), label=f"{label} {k} {block.tolist()}"))
    return BlockSet(None, tuple(out), index="uai")


def _as_network(source):
    """The UAINetwork of a network or of a model built by read_uai (a file is read first, with
    :func:`pymc_lbp.models.uai.read_network`: the samplers read no files)."""
    if isinstance(source, UAINetwork):
        return source
    info = model_info(source)
    if info is not None:
        return info.network
    raise TypeError(
        f"expected a UAINetwork or a model built by read_uai, got {source!r} (read a .uai file "
        "with pymc_lbp.models.read_network or read_uai first)"
    )


__all__ = ["uai_exact_blocks"]
