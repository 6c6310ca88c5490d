"""Block sets of UAI networks: Markov blankets and blocks conditioned on them.

:func:`markov_blanket` (the union of the scopes of every factor that involves the variables),
:func:`uai_blocks` (blocks conditioned on their Markov blankets, for a motif) and
:func:`uai_exact_blocks` (blocks of any shape, ``motif=None``, for exact block Gibbs);
``_as_network`` takes a network or a model built by ``read_uai``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from pymc_lbp.factor_graph.model_info import model_info
from pymc_lbp.factor_graph.network import UAINetwork
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock, MotifSpec


def markov_blanket(network, variables: Iterable[int]) -> tuple[int, ...]:
    """Markov blanket of a set of variables of a UAI network.

    The union of the scopes of every factor that involves one of ``variables``, minus the
    variables themselves; for a Bayesian network that is the parents, children and co-parents.

    Parameters
    ----------
    network : UAINetwork
    variables : iterable of int

    Returns
    -------
    tuple of int
        Sorted network indices.
    """
    var_set = {int(v) for v in variables}
    for v in var_set:
        if not 0 <= v < network.n_vars:
            raise ValueError(f"variable {v} is outside 0..{network.n_vars - 1}")
    blanket: set[int] = set()
    for v in var_set:
        for f in network.factors_of_variable[v]:
            blanket.update(network.scopes[f])
    return tuple(sorted(blanket - var_set))


def uai_blocks(
    network, blocks: Sequence[Sequence[int]], *, name: str = "uai-markov-blanket"
) -> BlockSet:
    """Blocks of a UAI network conditioned on their Markov blankets.

    Blankets of different sizes are padded with dummies (``-1``) to the largest one; the blocks
    must have equal size and cardinalities. No local parameters: a proposal for these blocks is
    model-specific (train it with :func:`prior_motif_samples`).

    Parameters
    ----------
    network : UAINetwork
    blocks : sequence of sequences of int
        Network variable indices of each block.
    name : str
        Motif name.

    Returns
    -------
    BlockSet
        Index space ``"uai"``.
    """
    network = _as_network(network)
    blocks = [np.asarray(b, dtype=np.int64) for b in blocks]
    if not blocks:
        raise ValueError("no blocks given")
    block_cards = {tuple(network.cards[b].tolist()) for b in blocks}
    if len(block_cards) != 1:
        raise ValueError(f"blocks must share one shape of cardinalities, got {block_cards}")
    blankets = [np.array(markov_blanket(network, b), dtype=np.int64) for b in blocks]
    width = max(bl.size for bl in blankets)
    cond_cards = np.zeros(width, dtype=np.int64)  # 0: no real variable seen in this slot yet
    for bl in blankets:
        cards = network.cards[bl]
        seen = cond_cards[: bl.size]
        if np.any((seen > 0) & (seen != cards)):
            raise ValueError(
                "the Markov blankets put variables of different cardinalities in the same "
                "conditioning slot; give blocks whose blankets line up"
            )
        cond_cards[: bl.size] = cards
    cond_cards[cond_cards == 0] = 2
    motif = MotifSpec(
        name,
        next(iter(block_cards)),
        tuple(cond_cards.tolist()),
        0,
        "blocks conditioned on their Markov blankets (sorted network indices, padded with "
        "dummies at value 0)",
    )
    out = []
    for b, bl in zip(blocks, blankets, strict=True):
        cond = np.concatenate([bl, np.full(width - bl.size, -1, dtype=np.int64)])
        out.append(MotifBlock(b, cond, label=f"uai {b.tolist()}"))
    return BlockSet(motif, tuple(out), index="uai")


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


__all__ = ["markov_blanket", "uai_blocks", "uai_exact_blocks"]
