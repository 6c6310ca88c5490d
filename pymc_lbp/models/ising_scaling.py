"""The Ising lattice of the appendix of Sun, Dai, Schuurmans (2022), as a PyMC model.

``log pi(x) = sum_i h_i s_i + lambda sum_{i ~ j} s_i s_j`` with spins ``s = 2 x - 1`` on a
``p x p`` lattice with open boundary (each nearest-neighbour edge once). The field is ``+mu``
inside the centred disc ``(i/p - 1/2)^2 + (j/p - 1/2)^2 < 1 / (2 pi)`` (half of the unit square),
``-mu`` outside, plus independent ``U(-sigma, sigma)`` noise. The paper's configurations are
``(mu, sigma, lambda) = (0.1, 0.3, 0.1), (0.15, 0.45, 0.15), (0.2, 0.6, 0.2)`` (C1-C3) at
``p = 20, 50, 100``. (The paper's code stores the opposite sign of the field; flipping every spin
maps one to the other, so the targets are the same up to relabelling.) Multilinear in ``x``:
first-order differences are exact.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pymc_lbp.models.lattice import ising_model

SCALING_ISING_CONFIGS: dict[int, tuple[float, float, float]] = {
    1: (0.1, 0.3, 0.1),
    2: (0.15, 0.45, 0.15),
    3: (0.2, 0.6, 0.2),
}
"""(mu, sigma, lambda) of the configurations C1-C3."""


def scaling_ising_field(
    n: int = 50, mu: float = 0.15, sigma: float = 0.45, seed: int = 0
) -> np.ndarray:
    """The external field: ``+mu`` in the centred disc of area 1/2, ``-mu`` outside, plus noise."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    inside = (i / n - 0.5) ** 2 + (j / n - 0.5) ** 2 < 0.5 / np.pi
    noise = np.random.default_rng(seed).uniform(-sigma, sigma, size=(n, n))
    return np.where(inside, mu, -mu) + noise


def scaling_ising_model(n: int = 50, config: int = 2, seed: int = 0) -> pm.Model:
    """The ``n x n`` Ising target of configuration ``config`` (variable ``"x"``, shape (n, n)).

    The field is stored as ``model.field`` and the coupling as ``model.coupling``.
    """
    if config not in SCALING_ISING_CONFIGS:
        raise ValueError(f"config must be one of {sorted(SCALING_ISING_CONFIGS)}, got {config!r}")
    mu, sigma, lam = SCALING_ISING_CONFIGS[config]
    field = scaling_ising_field(n, mu, sigma, seed)
    model = ising_model((n, n), coupling=lam, field=field, periodic=False)
    model.field = field
    model.coupling = lam
    return model
