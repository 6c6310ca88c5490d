"""Efficiency diagnostics for discrete chains, computed with ArviZ.

ESS of raw binary or categorical labels is not meaningful (labels have no order). Following the
ALBP and DISCS protocols we summarise a state by its Hamming distance to a fixed random reference
state and take ArviZ's ESS of that scalar series; for Ising models the magnetisation is another
natural statistic.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import xarray as xr


def block_draws(idata, names: list[str]) -> np.ndarray:
    """Posterior draws of the named variables as one ``(chain, draw, n_sites)`` int array."""
    parts = [np.asarray(idata.posterior[name].values) for name in names]
    return np.concatenate([v.reshape(*v.shape[:2], -1) for v in parts], axis=-1).astype(np.int64)


def reference_state(n_sites: int, n_categories: int | np.ndarray = 2, seed: int = 0) -> np.ndarray:
    """A fixed random reference state (uniform over each site's categories)."""
    rng = np.random.default_rng(seed)
    k = np.broadcast_to(np.asarray(n_categories), (n_sites,))
    return np.floor(rng.random(n_sites) * k).astype(np.int64)


def hamming_trace(idata, names: list[str], reference: np.ndarray | None = None, seed: int = 0):
    """Hamming distance of every draw to ``reference`` as a ``(chain, draw)`` DataArray."""
    draws = block_draws(idata, names)
    if reference is None:
        n_cat = np.maximum(draws.max(axis=(0, 1)) + 1, 2)
        reference = reference_state(draws.shape[-1], n_cat, seed)
    dist = (draws != reference).sum(axis=-1).astype(float)
    return xr.DataArray(dist, dims=("chain", "draw"))


def ess(trace) -> float:
    """ArviZ bulk ESS of a ``(chain, draw)`` series (0 for a constant series)."""
    values = np.asarray(trace, dtype=float)
    if np.ptp(values) == 0:
        return 0.0
    return float(az.ess(values))


def sampling_seconds(idata) -> float:
    """Wall time PyMC recorded for the run (tuning and draws, all chains)."""
    return float(idata.posterior.attrs["sampling_time"])
