"""The Bernoulli product target of Sun, Dai, Schuurmans (2022), as a PyMC model.

``pi(x) = prod_i p_i^{x_i} (1 - p_i)^{1 - x_i}`` with ``p_i`` drawn uniformly from
``{alpha, alpha + beta}``. The paper's configurations (C1, C2, C3) are ``(alpha, beta) =
(0.25, 0.5), (0.15, 0.7), (0.05, 0.9)``, i.e. ``p_i`` in ``{0.25, 0.75}``, ``{0.15, 0.85}``,
``{0.05, 0.95}``; its dimensions are 100, 800 and 6400. The log-density is linear in ``x``, so
first-order neighbour differences are exact.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

BERNOULLI_CONFIGS: dict[int, tuple[float, float]] = {1: (0.25, 0.5), 2: (0.15, 0.7), 3: (0.05, 0.9)}
"""(alpha, beta) of the configurations C1-C3: ``p_i`` in ``{alpha, alpha + beta}``."""


def bernoulli_product_probs(dim: int = 800, config: int = 2, seed: int = 0) -> np.ndarray:
    """The success probabilities ``p_i`` (each ``alpha`` or ``alpha + beta`` with probability 1/2).

    Parameters
    ----------
    dim : int, default 800
    config : {1, 2, 3}, default 2
    seed : int, default 0
    """
    if config not in BERNOULLI_CONFIGS:
        raise ValueError(f"config must be one of {sorted(BERNOULLI_CONFIGS)}, got {config!r}")
    alpha, beta = BERNOULLI_CONFIGS[config]
    pick = np.random.default_rng(seed).integers(0, 2, size=dim)
    return alpha + beta * pick


def bernoulli_product_model(
    dim: int = 800, config: int = 2, seed: int = 0, *, name: str = "x"
) -> pm.Model:
    """The product of independent Bernoullis as a PyMC model (variable ``name``, shape ``dim``).

    The probabilities are stored as ``model.p`` (exact marginals).
    """
    p = bernoulli_product_probs(dim, config, seed)
    with pm.Model() as model:
        pm.Bernoulli(name, p=p, shape=dim)
    model.p = p
    return model
