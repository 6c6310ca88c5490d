"""Training samples of a motif from a model: the values of every block's ``B`` and ``C`` and its
local parameters, from any joint states (:func:`motif_samples_from_states`) or from forward
samples of a generative PyMC model (:func:`prior_motif_samples`, for a model-specific proposal).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pymc_lbp.factor_graph.model_info import model_info
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet


def _entry_locations(blockset: BlockSet, model) -> dict[int, tuple[str, int, int]]:
    """Global index -> (model variable name or "", flat position, fixed value) for a model."""
    entries = set()
    for b in blockset:
        entries.update(b.block.tolist())
        entries.update(int(c) for c in b.cond if c >= 0)
    out = {}
    if blockset.index == "uai":
        info = model_info(model)
        if info is None:
            raise ValueError("blocks use UAI network indices, but the model is not from read_uai")
        for i in sorted(entries):
            if not 0 <= i < info.network.n_vars:
                raise ValueError(f"block entry {i} is not a variable of {info.network.name}")
            loc = info.locate(i)
            out[i] = (loc.name, loc.position, loc.fixed_value)
        return out
    point = model.initial_point()
    names = blockset.variables
    for name in names:
        if name not in point:
            raise ValueError(f"{name!r} is not a free variable of the model")
    sizes = [int(np.size(point[name])) for name in names]
    ends = np.cumsum(sizes)
    for i in sorted(entries):
        k = int(np.searchsorted(ends, i, side="right"))
        if k == len(names):
            raise ValueError(f"block entry {i} is outside the {int(ends[-1])} indexed sites")
        out[i] = (names[k], i - int(ends[k] - sizes[k]), -1)
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


__all__ = ["motif_samples_from_states", "prior_motif_samples"]
