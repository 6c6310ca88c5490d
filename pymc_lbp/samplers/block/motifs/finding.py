"""Finding a block's motif in the model graph: what ``NeuralBlock([z])`` does by default.

:func:`find_chains` reads the model's log-probability terms with the dependency analysis of
:mod:`pymc_lbp.logp.local_differences` (which sites of the block every element of every term
depends on) and reports the variables of the block that are *chains*: one-dimensional, every element
touching at most two of the variable's states, and the pairs touched together forming one path
(:func:`chain_order`; numbered along the chain or not) (an HMM written as
``Categorical`` states with ``log(P[z[:-1], z[1:]])`` and emissions ``mu[z]``, a chain CRF's
potentials). Elements may touch other variables as well (continuous parameters, other blocks):
those are fixed while a block of the chain is updated and enter its potentials.

:func:`default_blocks` turns that into the blocks and proposal of a ``NeuralBlock`` built with
no ``blocks`` argument:

1. a ``read_uai`` grid Bayesian network: the grid-BN blocks and the shipped ``grid-bn`` proposal;
2. chain variables: chain blocks with the shipped ``chain-k{K}-b{L}`` proposal for their number
   of categories (the longest shipped ``L``), or exact block Gibbs on blocks of up to 4 states
   (at most 256 joint states) where no proposal for ``K`` is shipped;
3. anything else: single-site Gibbs on every site.

The choice and its reason are returned (the step logs them and keeps them in
``step.blocks_reason``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_lbp.logp.site_pieces import term_dependencies
from pymc_lbp.samplers.block.motifs.chain import chain_blocks

EXACT_CHAIN_MAX_STATES = 256
"""Exact block Gibbs on chain blocks enumerates at most this many joint states per block."""


@dataclass(frozen=True)
class Chain:
    """A chain variable of the block."""

    name: str
    offset: int  # position of its first state in the block vector
    n_states: int
    n_categories: int
    order: np.ndarray  # its states (positions in the variable) in chain order


def chain_order(deps, lo: int, hi: int) -> tuple[np.ndarray | None, str]:
    """The states ``lo .. hi-1`` in chain order, or None and why not.

    The states form a chain when every element touches at most two of them and the graph of
    the pairs touched together is one path (degrees at most 2, connected, no cycle); the order
    runs from one end of the path (the lower-numbered end), so a chain numbered along itself
    keeps its order.
    """
    n = hi - lo
    edges = set()
    for d in deps:
        sub = d.rows[:, lo:hi].tocsr()
        counts = np.diff(sub.indptr)
        if np.any(counts > 2):
            return None, "a term couples more than two of its states"
        for e in np.flatnonzero(counts == 2):
            a, b = sorted(int(v) for v in sub.indices[sub.indptr[e] : sub.indptr[e] + 2])
            edges.add((a, b))
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        neighbours[a].append(b)
        neighbours[b].append(a)
    if any(len(nb) > 2 for nb in neighbours) or len(edges) != n - 1:
        return None, "its states are not coupled along one path (a lattice, a cycle or skips)"
    ends = [v for v in range(n) if len(neighbours[v]) <= 1]
    order, previous, here = [], -1, min(ends)
    while here != -1:
        order.append(here)
        following = [v for v in neighbours[here] if v != previous]
        previous, here = here, (following[0] if following else -1)
    if len(order) != n:
        return None, "its states are not coupled along one path"
    return np.asarray(order, dtype=np.int64), ""


def block_dependencies(model, target, specs, x0: np.ndarray) -> list | None:
    """:func:`pymc_lbp.logp.local_differences.term_dependencies` of the model on the step's block
    (a term that is a sum, such as a Potential of ``log(P[z[:-1], z[1:]]).sum()``, is read as its
    elements); None when the graph cannot be analysed."""
    n_sites = int(sum(int(np.prod(s.shape)) for s in specs))
    return term_dependencies(model, target._replace, target._x, n_sites, x0)


def find_chains(
    model, target, specs, x0: np.ndarray, deps: list | None = None
) -> tuple[list[Chain], str]:
    """The chain variables of a block, and why others are not.

    Parameters
    ----------
    model : pymc.Model
    target : pymc_lbp.samplers.block.step.ModelLogp
        The step's target (its block vector ``_x`` and model replacements are used).
    specs : list of VarSpec
        The block's variables (:func:`pymc_lbp.logp.layout.describe_block`).
    x0 : ndarray of int
        A state of the block (shapes and constant indices are read from it).
    deps : list, optional
        The terms' dependencies (:func:`block_dependencies`) when the caller has them.

    Returns
    -------
    (chains, reason)
    """
    if deps is None:
        deps = block_dependencies(model, target, specs, x0)
    if deps is None:
        return [], "the model graph could not be analysed"
    chains, why = [], []
    for spec in specs:
        size = int(np.prod(spec.shape))
        lo, hi = spec.offset, spec.offset + size
        if len(spec.shape) != 1 or size < 2:
            why.append(f"{spec.name} is not a one-dimensional sequence")
            continue
        if any(d.glob.any() for d in deps):
            why.append(f"{spec.name}: a term couples too many sites to be analysed")
            continue
        order, reason = chain_order(deps, lo, hi)
        if order is None:
            why.append(f"{spec.name}: {reason}")
            continue
        cards = 2 if spec.kind == "binary" else int(spec.n_categories)
        chains.append(Chain(spec.name, lo, size, cards, order))
    return chains, "; ".join(why)


def shipped_chain_proposal(n_categories: int, max_length: int):
    """The shipped chain proposal for ``K`` categories with the longest block of at most
    ``max_length`` states, or None."""
    from pymc_lbp.samplers.block.neural_proposal import available_proposals, load_proposal

    best = None
    for name in available_proposals():
        parts = name.split("-")
        if len(parts) != 3 or parts[0] != "chain":
            continue
        k, b = int(parts[1][1:]), int(parts[2][1:])
        if k == n_categories and b <= max_length and (best is None or b > best[0]):
            best = (b, name)
    return None if best is None else load_proposal(best[1])


def exact_chain_length(n_categories: int, n_states: int) -> int:
    """Longest block (2 to 4 states, at most the chain) whose ``K^L`` joint states stay within
    :data:`EXACT_CHAIN_MAX_STATES`; 1 when even pairs are too many."""
    for length in (4, 3, 2):
        if length <= n_states and n_categories**length <= EXACT_CHAIN_MAX_STATES:
            return length
    return 1


def default_blocks(model, target, specs, x0: np.ndarray, deps: list | None = None):
    """``(blocks, proposal, reason)`` of ``NeuralBlock`` without ``blocks`` (module docs);
    ``deps`` as in :func:`find_chains`."""
    from pymc_lbp.factor_graph.model_info import UAIModelInfo

    ui_reason = ""
    info = getattr(model, "uai_info", None)
    if isinstance(info, UAIModelInfo):
        from pymc_lbp.samplers.block.motifs.grid_bn import uai_grid_blocks
        from pymc_lbp.samplers.block.neural_proposal import load_proposal

        try:
            blocks = uai_grid_blocks(info.network)
        except ValueError as err:
            ui_reason = f"a UAI network that is not a binary grid BN ({err})"
        else:
            reason = (
                "a UAI grid Bayesian network: grid-BN blocks with the shipped 'grid-bn' proposal"
            )
            return blocks, load_proposal("grid-bn"), reason
    chains, why = find_chains(model, target, specs, x0, deps)
    if len(chains) == 1 and len(specs) == 1:
        c = chains[0]
        proposal = shipped_chain_proposal(c.n_categories, c.n_states)
        if proposal is not None:
            length = proposal.motif.block_size
            blocks = chain_blocks(c.name, c.n_states, c.n_categories, length, order=c.order)
            return (
                blocks,
                proposal,
                f"{c.name} is a chain of {c.n_states} {c.n_categories}-category states: blocks "
                f"of {length} with the shipped {proposal.motif.name!r} proposal",
            )
        length = exact_chain_length(c.n_categories, c.n_states)
        if length >= 2:
            return (
                chain_blocks(c.name, c.n_states, c.n_categories, length, order=c.order),
                "exact",
                f"{c.name} is a chain of {c.n_states} {c.n_categories}-category states and no "
                f"chain proposal for {c.n_categories} categories is shipped: exact block Gibbs "
                f"on blocks of {length}",
            )
        why = f"{c.name} is a chain, but even pairs of its states are too many to enumerate"
    elif chains:
        why = (
            "several variables in the block (chain motifs are found in a block of one chain "
            "variable)" + (f"; {why}" if why else "")
        )
    reason = "; ".join(r for r in (ui_reason, why) if r) or "no motif found"
    return None, None, f"single-site Gibbs on every site ({reason})"


__all__ = [
    "EXACT_CHAIN_MAX_STATES",
    "Chain",
    "block_dependencies",
    "chain_order",
    "default_blocks",
    "exact_chain_length",
    "find_chains",
    "shipped_chain_proposal",
]
