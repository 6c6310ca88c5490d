"""Issue #28's spike-and-slab trap, written ``dot(X, g * b)``: at the initial point ``b = 0``
first-order differences look exact, but the logp is quadratic in the indicators ``g``. The
posterior inclusion probabilities by enumeration (``b`` integrated out), for the tests of
``differences="auto"`` in ``pm.sample`` and in ``pymc_lbp.sample``."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
from scipy.stats import multivariate_normal

PI, TAU, SIGMA = 0.3, 2.0, 1.0


def spike_and_slab_data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 6))
    y = X @ np.array([2.0, -1.5, 0.0, 0.0, 0.35, 0.0]) + rng.normal(size=40)
    return X, y


def exact_inclusion(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(g_j = 1 | y), ``b`` integrated out, by enumeration of every indicator vector."""
    n, p = X.shape
    states = np.array(list(itertools.product([0, 1], repeat=p)))
    logw = np.empty(len(states))
    for k, g in enumerate(states):
        Xg = X[:, g == 1]
        cov = SIGMA**2 * np.eye(n) + TAU**2 * Xg @ Xg.T
        prior = np.sum(g * np.log(PI) + (1 - g) * np.log1p(-PI))
        logw[k] = multivariate_normal(np.zeros(n), cov).logpdf(y) + prior
    w = np.exp(logw - logw.max())
    return (w / w.sum()) @ states


def spike_and_slab_model(X, y):
    with pm.Model() as model:
        g = pm.Bernoulli("g", PI, shape=X.shape[1])
        b = pm.Normal("b", 0.0, TAU, shape=X.shape[1])
        pm.Normal("y", pm.math.dot(X, g * b), SIGMA, observed=y)
    return model
