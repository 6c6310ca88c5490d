"""The motif API: the shape of a motif, its blocks and the block sets of a model.

A *motif* (Wang et al. 2018) is a recurring local structure of a model: a block ``B`` of discrete
variables that are proposed together, a conditioning set ``C`` (the block's Markov blanket or a
superset) whose values the proposal sees, and a vector of local parameters (e.g. the CPTs around
the block). :class:`MotifSpec` fixes the shape of a motif (the cardinalities of ``B`` and ``C``
and the number of parameters), which is what a trained proposal network is specific to.
:class:`BlockSet` holds the concrete blocks of one model, each a :class:`MotifBlock` of variable
indices, in one of two index spaces (a block set without a motif, ``motif=None``, holds blocks of
any sizes and cardinalities, for exact block Gibbs only:
:func:`~pymc_lbp.samplers.block.motifs.uai_blocks.uai_exact_blocks`):

``"uai"``
    Network variable indices of a model built by :func:`pymc_lbp.models.read_uai` (resolved with
    :func:`~pymc_lbp.models.uai_variable_map`; evidence variables are fixed values).
``"flat"``
    Positions in the raveled concatenation of the model variables named in
    ``BlockSet.variables`` (e.g. row-major sites of a lattice variable).

A conditioning entry ``-1`` is a *padded dummy*: a variable that does not exist in the model
(outside a lattice or grid border) and always takes the value in ``MotifBlock.pad``. The motif's
local parameters make the dummy irrelevant (see
:func:`~pymc_lbp.samplers.block.motifs.grid_bn.grid_bn_blocks`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

INDEX_SPACES = ("uai", "flat")
PARAMS_FROM = ("fixed", "chain")


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
            **asdict(self),
            "block_cards": list(self.block_cards),
            "cond_cards": list(self.cond_cards),
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
        shape = attrgetter("block_cards", "cond_cards", "n_params", "n_continuous")
        return shape(self) == shape(other)


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


__all__ = ["BlockSet", "MotifBlock", "MotifSpec"]
