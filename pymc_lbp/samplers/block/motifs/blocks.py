"""Structural motifs: blocks of discrete variables, their conditioning sets and local parameters.

A *motif* (Wang et al. 2018) is a recurring local structure of a model: a block ``B`` of discrete
variables that are proposed together, a conditioning set ``C`` (the block's Markov blanket or a
superset) whose values the proposal sees, and a vector of local parameters (e.g. the CPTs around
the block). :class:`MotifSpec` fixes the shape of a motif (the cardinalities of ``B`` and ``C``
and the number of parameters), which is what a trained proposal network is specific to.
:class:`BlockSet` holds the concrete blocks of one model, each a :class:`MotifBlock` of variable
indices, in one of two index spaces (a block set without a motif, ``motif=None``, holds blocks of
any sizes and cardinalities, for exact block Gibbs only: :func:`uai_exact_blocks`):

``"uai"``
    Network variable indices of a model built by :func:`pymc_lbp.models.read_uai` (resolved with
    :func:`~pymc_lbp.models.uai_variable_map`; evidence variables are fixed values).
``"flat"``
    Positions in the raveled concatenation of the model variables named in
    ``BlockSet.variables`` (e.g. row-major sites of a lattice variable).

A conditioning entry ``-1`` is a *padded dummy*: a variable that does not exist in the model
(outside a lattice or grid border) and always takes the value in ``MotifBlock.pad``. The motif's
local parameters make the dummy irrelevant (see :func:`grid_bn_blocks`).

Helpers build blocks for lattices (:func:`lattice_blocks`, ``k x k`` patches of Ising/Potts
models), compute Markov blankets of UAI networks (:func:`markov_blanket`, :func:`uai_blocks`),
and build the grid-BN motif of Wang et al. (:func:`grid_bn_blocks`, :func:`uai_grid_blocks`): a
3 x 3 block of proposed variables and the 14 conditioning variables around it.

Training data come from :func:`grid_bn_motif_samples` (random local CPTs, for the reusable
grid-BN proposal) or :func:`prior_motif_samples` (forward samples of a generative PyMC model,
for a model-specific proposal), or from any full states via :func:`motif_samples_from_states`.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "GRID_BN_MOTIF",
    "BlockSet",
    "MotifBlock",
    "MotifSpec",
    "grid_bn_blocks",
    "grid_bn_layout",
    "grid_bn_motif_log_conditional",
    "grid_bn_motif_samples",
    "lattice_blocks",
    "markov_blanket",
    "motif_samples_from_states",
    "prior_motif_samples",
    "uai_blocks",
    "uai_exact_blocks",
    "uai_grid_blocks",
]

INDEX_SPACES = ("uai", "flat")
PARAMS_FROM = ("fixed", "chain")


# =============================================================================== data classes
@dataclass(frozen=True)
class MotifSpec:
    """The shape of a structural motif, which a proposal network is specific to.

    Parameters
    ----------
    name : str
        Identifier (e.g. ``"grid-bn"``).
    block_cards : tuple of int
        Cardinality of every proposed variable, in block order.
    cond_cards : tuple of int
        Cardinality of every conditioning variable, in conditioning order.
    n_params : int
        Length of the local parameter vector.
    description : str
        Free text: what the entries mean, padding conventions.
    n_continuous : int
        Continuous entries of the block, after the discrete ones (mixed blocks: a proposal
        for the motif holds a Gaussian per component for each, see
        :mod:`pymc_lbp.samplers.block.mdn`).
    """

    name: str
    block_cards: tuple[int, ...]
    cond_cards: tuple[int, ...]
    n_params: int = 0
    description: str = ""
    n_continuous: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "block_cards", tuple(int(c) for c in self.block_cards))
        object.__setattr__(self, "cond_cards", tuple(int(c) for c in self.cond_cards))
        object.__setattr__(self, "n_params", int(self.n_params))
        object.__setattr__(self, "n_continuous", int(self.n_continuous))
        if self.n_continuous < 0:
            raise ValueError(f"motif {self.name!r}: n_continuous must be >= 0")
        if not self.block_cards or min(self.block_cards) < 2:
            raise ValueError(f"motif {self.name!r}: block cardinalities must be >= 2")
        if self.cond_cards and min(self.cond_cards) < 2:
            raise ValueError(f"motif {self.name!r}: conditioning cardinalities must be >= 2")
        if self.n_params < 0:
            raise ValueError(f"motif {self.name!r}: n_params must be >= 0")

    @property
    def block_size(self) -> int:
        """Number of proposed entries (discrete, then continuous)."""
        return len(self.block_cards) + self.n_continuous

    @property
    def cond_size(self) -> int:
        """Number of conditioning variables."""
        return len(self.cond_cards)

    @property
    def n_features(self) -> int:
        """Length of the network input: encoded conditioning values, then the parameters."""
        return sum(1 if c == 2 else c for c in self.cond_cards) + self.n_params

    def features(self, x_cond: np.ndarray, params: np.ndarray) -> np.ndarray:
        """Network inputs from conditioning values and local parameters.

        A binary conditioning variable is encoded as ``2 x - 1``, a categorical one (K > 2)
        one-hot; the parameters follow unchanged.

        Parameters
        ----------
        x_cond : ndarray of int, shape (n, cond_size)
        params : ndarray, shape (n, n_params)

        Returns
        -------
        ndarray, shape (n, n_features)
        """
        x_cond = np.asarray(x_cond, dtype=np.int64)
        params = np.asarray(params, dtype=np.float64)
        n = x_cond.shape[0] if self.cond_size else params.shape[0]
        x_cond = x_cond.reshape(n, self.cond_size)
        params = params.reshape(n, self.n_params)
        if all(c == 2 for c in self.cond_cards):
            return np.concatenate([2.0 * x_cond - 1.0, params], axis=1)
        parts = []
        for j, c in enumerate(self.cond_cards):
            if c == 2:
                parts.append(2.0 * x_cond[:, j : j + 1] - 1.0)
            else:
                parts.append((x_cond[:, j : j + 1] == np.arange(c)).astype(np.float64))
        parts.append(params)
        return np.concatenate(parts, axis=1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "name": self.name,
            "block_cards": list(self.block_cards),
            "cond_cards": list(self.cond_cards),
            "n_params": self.n_params,
            "description": self.description,
            "n_continuous": self.n_continuous,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MotifSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(
            str(d["name"]),
            tuple(d["block_cards"]),
            tuple(d["cond_cards"]),
            int(d["n_params"]),
            str(d.get("description", "")),
            int(d.get("n_continuous", 0)),
        )

    def same_shape(self, other: MotifSpec) -> bool:
        """Whether a proposal for ``other`` can be used for this motif (same shapes)."""
        return (
            self.block_cards == other.block_cards
            and self.cond_cards == other.cond_cards
            and self.n_params == other.n_params
            and self.n_continuous == other.n_continuous
        )


@dataclass(frozen=True, eq=False)
class MotifBlock:
    """One concrete block: variable indices of ``B`` and ``C`` and the local parameters.

    Parameters
    ----------
    block : array_like of int
        Indices of the proposed variables (in the block set's index space).
    cond : array_like of int
        Indices of the conditioning variables; ``-1`` marks a padded dummy.
    params : array_like of float, optional
        Local parameters (default: none).
    pad : array_like of int, optional
        Value of every conditioning entry that is a dummy (ignored elsewhere; default 0).
    label : str
        Where the block sits (for messages), e.g. ``"grid (3, 6)"``.
    """

    block: np.ndarray
    cond: np.ndarray
    params: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pad: np.ndarray | None = None
    label: str = ""

    def __post_init__(self) -> None:
        block = np.asarray(self.block, dtype=np.int64).ravel()
        cond = np.asarray(self.cond, dtype=np.int64).ravel()
        params = np.asarray(self.params, dtype=np.float64).ravel()
        pad = np.zeros(cond.size, np.int64) if self.pad is None else np.asarray(self.pad)
        pad = pad.astype(np.int64).ravel()
        if pad.size != cond.size:
            raise ValueError(f"block {self.label!r}: pad needs one value per conditioning entry")
        if block.size == 0:
            raise ValueError(f"block {self.label!r} is empty")
        if np.any(block < 0):
            raise ValueError(f"block {self.label!r}: proposed variables cannot be dummies (-1)")
        if np.unique(block).size != block.size:
            raise ValueError(f"block {self.label!r} repeats a variable: {block.tolist()}")
        real = cond[cond >= 0]
        if np.unique(real).size != real.size:
            raise ValueError(f"block {self.label!r}: conditioning set repeats a variable")
        if np.intersect1d(block, real).size:
            raise ValueError(
                f"block {self.label!r}: variables {np.intersect1d(block, real).tolist()} are "
                "both proposed and conditioned on"
            )
        for name, value in (("block", block), ("cond", cond), ("params", params), ("pad", pad)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)


@dataclass(frozen=True, eq=False)
class BlockSet:
    """The blocks of one model for one motif.

    Parameters
    ----------
    motif : MotifSpec or None
        ``None``: the blocks have no common shape (any sizes and cardinalities, no conditioning
        variables, no parameters); no proposal network can take them, so they are for exact
        block Gibbs only (``NeuralBlock(..., proposal="exact")``; see :func:`uai_exact_blocks`).
    blocks : sequence of MotifBlock
        Every block must match the motif's sizes.
    index : {"uai", "flat"}
        Index space of the blocks' entries (see the module docstring).
    variables : tuple of str
        ``"flat"`` only: the model variables whose raveled concatenation is indexed.
    params_from : {"fixed", "chain"}
        Where the blocks' local parameters come from: ``"fixed"`` (default), the blocks'
        ``params``; ``"chain"``, computed by the step from the model at every update (chain
        log-potentials, :mod:`pymc_lbp.samplers.block.motifs.chain`; the blocks then hold no
        parameters).
    """

    motif: MotifSpec | None
    blocks: tuple[MotifBlock, ...]
    index: str = "flat"
    variables: tuple[str, ...] = ()
    params_from: str = "fixed"

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(self.blocks))
        object.__setattr__(self, "variables", tuple(self.variables))
        if self.index not in INDEX_SPACES:
            raise ValueError(f"index must be one of {INDEX_SPACES}, got {self.index!r}")
        if self.index == "flat" and not self.variables:
            raise ValueError("a 'flat' block set needs the names of the indexed variables")
        if self.params_from not in PARAMS_FROM:
            raise ValueError(f"params_from must be one of {PARAMS_FROM}, got {self.params_from!r}")
        m = self.motif
        if m is None:
            if self.params_from != "fixed":
                raise ValueError("a block set without a motif takes its parameters from nowhere")
            for b in self.blocks:
                if b.cond.size or b.params.size:
                    raise ValueError(
                        f"block {b.label!r}: a block set without a motif (exact block Gibbs "
                        "only) has no conditioning variables and no parameters"
                    )
            return
        n_params = m.n_params if self.params_from == "fixed" else 0
        for b in self.blocks:
            if b.block.size != m.block_size or b.cond.size != m.cond_size:
                raise ValueError(
                    f"block {b.label!r} has {b.block.size} proposed and {b.cond.size} "
                    f"conditioning variables; motif {m.name!r} has {m.block_size} and "
                    f"{m.cond_size}"
                )
            if b.params.size != n_params:
                raise ValueError(
                    f"block {b.label!r} has {b.params.size} parameters; motif {m.name!r} "
                    f"expects {n_params} (params_from={self.params_from!r})"
                )

    def __len__(self) -> int:
        return len(self.blocks)

    def __iter__(self) -> Iterator[MotifBlock]:
        return iter(self.blocks)

    def __getitem__(self, i: int) -> MotifBlock:
        return self.blocks[i]

    def covered(self) -> np.ndarray:
        """Sorted indices of all proposed variables."""
        if not self.blocks:
            return np.zeros(0, np.int64)
        return np.unique(np.concatenate([b.block for b in self.blocks]))

    def params_matrix(self) -> np.ndarray:
        """Local parameters of all blocks, shape (n_blocks, n_params)."""
        return np.stack([b.params for b in self.blocks]) if self.blocks else np.zeros((0, 0))


# =============================================================================== generic helpers
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
    network : UAINetwork or path
    blocks : sequence of sequences of int
        Network variable indices of each block (e.g. from
        :func:`pymc_lbp.models.uai.clusters.uai_clusters`).
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
            cells = (
                [(r0 - 1, c0 + j) for j in range(k)]
                + [(r0 + k, c0 + j) for j in range(k)]
                + [(r0 + i, c0 - 1) for i in range(k)]
                + [(r0 + i, c0 + k) for i in range(k)]
            )
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


def _as_network(source):
    """A UAINetwork from a network, a path or a model built by read_uai."""
    from pymc_lbp.models.uai import UAINetwork, read_network

    if isinstance(source, UAINetwork):
        return source
    if isinstance(source, str | os.PathLike):
        return read_network(source)
    info = getattr(source, "uai_info", None)
    if info is not None:
        return info.network
    raise TypeError(f"expected a UAINetwork, a .uai path or a read_uai model, got {source!r}")


# =============================================================================== grid-BN motif
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
    network : UAINetwork, path or read_uai model
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
    N = layout.shape[0]
    v = int(layout[i, j])
    f = cpt_index[v]
    scope = network.scopes[f]
    table = network.tables[f]
    sums = table.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p1 = np.where(sums > 0, table / sums, 0.5)[..., 1]
    up = int(layout[i - 1, j]) if i > 0 else None
    left = int(layout[i, j - 1]) if j > 0 else None
    axes = {u: a for a, u in enumerate(scope[:-1])}
    p = np.empty((2, 2))
    for a, b in itertools.product(range(2), range(2)):
        idx = [0] * len(axes)
        if up is not None:
            idx[axes[up]] = a
        if left is not None:
            idx[axes[left]] = b
        p[a, b] = p1[tuple(idx)]
    del N
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
    network : UAINetwork, path or read_uai model
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
    missing_child = np.full((2, 2), 0.5)

    def node(i, j):
        return int(layout[i, j]) if 0 <= i < N and 0 <= j < N else -1

    blocks = []
    for r0 in _starts(N, 3, stride):
        for c0 in _starts(N, 3, stride):
            block = [node(r0 + r, c0 + c) for r, c in _GRID_BLOCK]
            cond = [node(r0 + r, c0 + c) for r, c in _GRID_COND]
            params = [cpts[(r0 + r, c0 + c)].ravel() for r, c in _GRID_BLOCK]
            for r, c in _GRID_CHILDREN:
                inside = 0 <= r0 + r < N and 0 <= c0 + c < N
                params.append(cpts[(r0 + r, c0 + c)].ravel() if inside else missing_child.ravel())
            blocks.append(
                MotifBlock(
                    np.array(block), np.array(cond), np.concatenate(params), label=f"({r0}, {c0})"
                )
            )
    return BlockSet(GRID_BN_MOTIF, tuple(blocks), index="uai")


def uai_grid_blocks(source, *, stride: int = 3) -> BlockSet:
    """Grid-BN motif blocks of a UAI grid Bayesian network file (or network, or model).

    The short path for a UAI grid BN::

        model = read_uai(path, evidence)
        blocks = uai_grid_blocks(path)
        step = pymc_lbp.NeuralBlock(model.free_RVs, blocks=blocks,
                                    proposal=pymc_lbp.load_proposal("grid-bn"))

    See :func:`grid_bn_blocks` for the parameters.
    """
    return grid_bn_blocks(_as_network(source), stride=stride)


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


_ALL_BLOCK_STATES = np.array(list(itertools.product(range(2), repeat=9)), dtype=np.int64)


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


def grid_bn_block_states() -> np.ndarray:
    """The 512 block states in the order of :func:`grid_bn_motif_log_conditional`."""
    return _ALL_BLOCK_STATES.copy()


# =============================================================================== training data
def _entry_locations(blockset: BlockSet, model) -> dict[int, tuple[str, int, int]]:
    """Global index -> (model variable name or "", flat position, fixed value) for a model."""
    entries = set()
    for b in blockset:
        entries.update(b.block.tolist())
        entries.update(int(c) for c in b.cond if c >= 0)
    out = {}
    if blockset.index == "uai":
        from pymc_lbp.models.uai import uai_variable_map

        info = uai_variable_map(model)
        for i in sorted(entries):
            if not 0 <= i < info.network.n_vars:
                raise ValueError(f"block entry {i} is not a variable of {info.network.name}")
            loc = info.locate(i)
            out[i] = (loc.name, loc.position, loc.fixed_value)
        return out
    point = model.initial_point()
    offset = 0
    starts = []
    for name in blockset.variables:
        if name not in point:
            raise ValueError(f"{name!r} is not a free variable of the model")
        size = int(np.size(point[name]))
        starts.append((name, offset, size))
        offset += size
    for i in sorted(entries):
        for name, start, size in starts:
            if start <= i < start + size:
                out[i] = (name, i - start, -1)
                break
        else:
            raise ValueError(f"block entry {i} is outside the {offset} indexed sites")
    return out


def motif_samples_from_states(
    blockset: BlockSet, states: Mapping[str, np.ndarray], model=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut joint samples of model variables into motif training examples.

    Parameters
    ----------
    blockset : BlockSet
    states : mapping of str to ndarray
        Samples of the model variables the blocks touch, each with a leading sample axis
        (e.g. from ``pm.draw`` or an exact sampler); UAI evidence variables may be absent (their
        fixed value is used).
    model : pymc.Model, optional
        Needed to resolve the index space (default: the model on the context stack).

    Returns
    -------
    x_block : ndarray of int, shape (n_samples * n_blocks, block_size)
    x_cond : ndarray of int, shape (n_samples * n_blocks, cond_size)
    params : ndarray, shape (n_samples * n_blocks, n_params)
    """
    import pymc as pm

    model = pm.modelcontext(model)
    locs = _entry_locations(blockset, model)
    flat = {k: np.asarray(v).reshape(np.shape(v)[0], -1) for k, v in states.items()}
    n = next(iter(flat.values())).shape[0]

    def column(i: int, pad: int) -> np.ndarray:
        if i < 0:
            return np.full(n, pad, dtype=np.int64)
        name, pos, fixed = locs[i]
        if name in flat:
            return flat[name][:, pos].astype(np.int64)
        if fixed >= 0:
            return np.full(n, fixed, dtype=np.int64)
        raise ValueError(f"the samples have no variable {name!r} (needed for entry {i})")

    if blockset.motif is None:
        raise ValueError(
            "a block set without a motif (exact block Gibbs only) has no motif samples"
        )
    xb, xc, pr = [], [], []
    for b in blockset:
        xb.append(np.stack([column(int(i), 0) for i in b.block], axis=1))
        xc.append(np.stack([column(int(i), int(p)) for i, p in zip(b.cond, b.pad, strict=True)], 1))
        pr.append(np.broadcast_to(b.params, (n, b.params.size)))
    return (
        np.concatenate(xb).astype(np.int64),
        np.concatenate(xc).astype(np.int64),
        np.concatenate(pr).astype(np.float64),
    )


def prior_motif_samples(
    model, blockset: BlockSet, n: int, seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Motif training examples from forward samples of a generative PyMC model.

    Draws ``n`` joint prior samples of all the model's random variables (observed ones
    included, so evidence variables are sampled, as a prior sample must) with ``pm.draw``, and
    cuts every block out of every sample (:func:`motif_samples_from_states`).

    Raises
    ------
    ValueError
        If the model has ``pm.Potential`` terms: forward sampling ignores them, so the samples
        would not come from the model. Supply exact samples through
        :func:`motif_samples_from_states` instead.
    """
    import pymc as pm

    if model.potentials:
        raise ValueError(
            "the model has Potential terms, which forward sampling (pm.draw) ignores; its prior "
            "samples would not come from the model. Cut exact samples into training data with "
            "motif_samples_from_states instead."
        )
    rvs = list(model.basic_RVs)
    draws = pm.draw(rvs, draws=int(n), random_seed=seed)
    states = {rv.name: np.asarray(d).reshape(int(n), -1) for rv, d in zip(rvs, draws, strict=True)}
    return motif_samples_from_states(blockset, states, model)


def blockset_summary(blockset: BlockSet) -> str:
    """One-line JSON description of a block set (for logs)."""
    return json.dumps(
        {
            "motif": None if blockset.motif is None else blockset.motif.name,
            "blocks": len(blockset),
            "index": blockset.index,
            "covered": int(blockset.covered().size),
        }
    )
