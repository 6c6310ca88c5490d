"""The ESS floor under every check whose threshold is a standard error estimated from the draws.

A Monte Carlo standard error is ``sd / sqrt(ESS)`` with ArviZ's ESS: from a small ESS it is itself
too rough to test with (a z-score from it has heavy tails), and chains stuck apart get a small
but finite ESS from ArviZ (a few units), a standard error far too large and |z| near 0, a pass.
Every such check asserts an ESS of at least :data:`MIN_ESS` through these helpers
(docs/architecture.md, "Tests"); a run that fails it needs more draws, not a looser bound.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import xarray as xr

#: The ESS a standard error is taken from.
MIN_ESS = 200.0


def checked_ess(draws: np.ndarray, what: str, *, method: str = "mean") -> float:
    """ArviZ's ESS of one quantity's ``(chain, draw)`` values, asserted at least :data:`MIN_ESS`.

    Parameters
    ----------
    draws : numpy.ndarray
        The quantity's values, shape ``(chain, draw)``.
    what : str
        What the values are, for the failure message.
    method : str
        ArviZ's ESS method: ``"mean"`` (the one ``az.mcse`` uses) or ``"bulk"``.

    Returns
    -------
    float
        The ESS.
    """
    ess = float(np.ravel(az.ess(np.asarray(draws, dtype=np.float64), method=method))[0])
    assert np.isfinite(ess) and ess >= MIN_ESS, (
        f"{what}: ESS {ess:.1f} < {MIN_ESS:.0f}, too few for its standard error (draw more)"
    )
    return ess


def checked_dataset_ess(dataset: xr.Dataset, *, method: str = "mean") -> dict[str, float]:
    """:func:`checked_ess` of every variable of ``dataset`` (each of dims ``chain``, ``draw``)."""
    return {
        str(k): checked_ess(da.transpose("chain", "draw").values, str(k), method=method)
        for k, da in dataset.data_vars.items()
    }


def checked_mcse(draws: np.ndarray, what: str) -> float:
    """ArviZ's MCSE of the mean of one quantity's ``(chain, draw)`` values (a 1-D array is one
    chain), from an ESS asserted at least :data:`MIN_ESS` (:func:`checked_ess`)."""
    draws = np.atleast_2d(np.asarray(draws, dtype=np.float64))
    checked_ess(draws, what)
    return float(np.ravel(az.mcse(draws, method="mean"))[0])


def mcse_z(draws: np.ndarray, expected: float) -> float:
    """``|mean - expected|`` in MCSE units (:func:`checked_mcse`) of ``(chain, draw)`` values (a
    1-D array is one chain); infinity for a constant series (a chain that never moved)."""
    draws = np.atleast_2d(np.asarray(draws, dtype=np.float64))
    if np.ptp(draws) == 0:
        return np.inf
    return abs(float(draws.mean()) - expected) / checked_mcse(draws, "draws")
