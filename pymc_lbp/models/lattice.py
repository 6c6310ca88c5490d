"""Ising and Potts lattices, and the LSB image-segmentation posterior, as PyMC models.

Spins ``s = 2 x - 1`` with ``x ~ Bernoulli`` (the model's variable, named ``"x"`` by default).
The Ising log-density is

    log pi(x) = sum_i h_i s_i + J sum_{i ~ j} s_i s_j + const,

each nearest-neighbour edge counted once; ``periodic=True`` wraps the lattice into a torus. The
field enters through the Bernoulli prior (log-odds ``2 h``), the coupling through a
``pm.Potential`` named ``"coupling"``. Both are multilinear in ``x``, so first-order neighbour
differences are exact on these models.

The Potts model has ``z ~ Categorical`` over ``q`` states with ``log pi(z) = sum_i h_{i, z_i} +
J sum_{i ~ j} [z_i = z_j]``.
"""

from __future__ import annotations

import operator

import numpy as np
import pymc as pm
import pytensor.tensor as pt

LSB_CASES: dict[int, tuple[float, float, float]] = {
    1: (0.0, 1.0, 3.0),
    2: (0.0, 3.0, 3.0),
    3: (1.0, 1.0, 3.0),
    4: (1.0, 3.0, 3.0),
}
"""(lambda, mu, sigma) of the four image-segmentation cases of Sansone (2022)."""


def lattice_edges(shape: tuple[int, ...], periodic: bool) -> np.ndarray:
    """Nearest-neighbour edges of a lattice as an ``(n_edges, 2)`` array of flat site indices.

    Each edge appears once. With ``periodic=True`` a side of length 2 has one edge per pair, not
    two (the wrap-around edge would duplicate the direct one).
    """
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    edges = []
    for axis, n in enumerate(shape):
        if n < 2:
            continue
        if periodic and n > 2:
            nb = np.roll(idx, -1, axis=axis)
            edges.append(np.stack([idx.ravel(), nb.ravel()], axis=1))
        else:
            lo = np.take(idx, np.arange(n - 1), axis=axis)
            hi = np.take(idx, np.arange(1, n), axis=axis)
            edges.append(np.stack([lo.ravel(), hi.ravel()], axis=1))
    return np.concatenate(edges) if edges else np.zeros((0, 2), dtype=int)


def _neighbour_sum(s, shape: tuple[int, ...], periodic: bool, pair=operator.mul):
    """``sum_{i ~ j} pair(a_i, a_j)`` over lattice edges (default the product ``a_i a_j``),
    written with shifts (cheap, relaxable)."""
    total = 0.0
    for axis, n in enumerate(shape):
        if n < 2:
            continue

        def part(start: int, stop: int, axis: int = axis):
            index = [slice(None)] * len(shape)
            index[axis] = slice(start, stop)
            return s[tuple(index)]

        total = total + pt.sum(pair(part(0, n - 1), part(1, n)))
        if periodic and n > 2:
            total = total + pt.sum(pair(part(0, 1), part(n - 1, n)))
    return total


def ising_model(
    shape: int | tuple[int, ...] = (10, 10),
    coupling: float = 0.5,
    field: float | np.ndarray = 0.0,
    *,
    periodic: bool = True,
    name: str = "x",
) -> pm.Model:
    """An Ising model ``log pi = sum h_i s_i + J sum_{i~j} s_i s_j`` as a PyMC model.

    Parameters
    ----------
    shape : int or tuple of int
        Lattice shape (an int gives a chain).
    coupling : float
        J (positive: ferromagnetic).
    field : float or ndarray
        h, a scalar or an array of the lattice's shape.
    periodic : bool, default True
        Wrap the lattice into a torus.
    name : str, default "x"
        Name of the Bernoulli variable (``x = (s + 1) / 2``).

    Returns
    -------
    pymc.Model
    """
    shape = (shape,) if np.isscalar(shape) else tuple(int(n) for n in shape)
    h = np.broadcast_to(np.asarray(field, dtype=float), shape)
    with pm.Model() as model:
        x = pm.Bernoulli(name, logit_p=2.0 * h, shape=shape)
        s = 2 * x - 1
        pm.Potential("coupling", coupling * _neighbour_sum(s, shape, periodic))
    return model


def ising_log_density(
    x: np.ndarray, shape: tuple[int, ...], coupling: float, field=0.0, periodic: bool = True
) -> np.ndarray:
    """Unnormalised Ising log-density ``sum h_i s_i + J sum_{i~j} s_i s_j`` of 0/1 states.

    ``x`` has shape ``(..., prod(shape))`` or ``(..., *shape)``; the result has shape ``(...)``.
    """
    n = int(np.prod(shape))
    s = 2.0 * np.asarray(x, dtype=float) - 1.0
    s = s.reshape(
        s.shape[: s.ndim - (1 if s.shape[-1] == n and s.ndim >= 1 else len(shape))] + (n,)
    )
    edges = lattice_edges(tuple(shape), periodic)
    h = np.broadcast_to(np.asarray(field, dtype=float), tuple(shape)).ravel()
    return s @ h + coupling * np.sum(s[..., edges[:, 0]] * s[..., edges[:, 1]], axis=-1)


def potts_model(
    shape: int | tuple[int, ...] = (5, 5),
    n_states: int = 3,
    coupling: float = 0.5,
    field: np.ndarray | None = None,
    *,
    periodic: bool = True,
    name: str = "z",
) -> pm.Model:
    """A Potts model ``log pi = sum_i h_{i,z_i} + J sum_{i~j} [z_i = z_j]`` as a PyMC model.

    Parameters
    ----------
    shape : int or tuple of int
        Lattice shape.
    n_states : int
        Number of states q (>= 2).
    coupling : float
        J.
    field : ndarray, optional
        ``h`` of shape ``shape + (q,)`` or ``(q,)``; zero by default.
    periodic : bool, default True
    name : str, default "z"

    Returns
    -------
    pymc.Model
    """
    shape = (shape,) if np.isscalar(shape) else tuple(int(n) for n in shape)
    if n_states < 2:
        raise ValueError(f"n_states must be >= 2, got {n_states}")
    h = np.zeros(n_states) if field is None else np.asarray(field, dtype=float)
    h = np.broadcast_to(h, shape + (n_states,))
    with pm.Model() as model:
        z = pm.Categorical(name, logit_p=h, shape=shape)
        pm.Potential("coupling", coupling * _neighbour_sum(z, shape, periodic, pair=pt.eq))
    return model


def segmentation_field(
    n: int = 30, mu: float = 1.0, sigma: float = 3.0, rng: np.random.Generator | int | None = 0
) -> np.ndarray:
    """The noisy observation ``alpha`` of the LSB image-segmentation task (Sansone 2022).

    ``alpha = mu`` on the centred square ``[n/4, n - n/4)^2`` and ``-mu`` outside, plus
    ``U(-sigma, sigma)`` noise.
    """
    rng = np.random.default_rng(rng)
    truth = -np.ones((n, n))
    q = n // 4
    truth[q : n - q, q : n - q] = 1.0
    return mu * truth + rng.uniform(-sigma, sigma, size=(n, n))


def segmentation_model(
    case: int | None = 3,
    *,
    lam: float | None = None,
    mu: float | None = None,
    sigma: float | None = None,
    n: int = 30,
    seed: int = 0,
    periodic: bool = True,
) -> pm.Model:
    """The LSB image-segmentation posterior ``log pi = sum alpha_i s_i + lam sum s_i s_j``.

    Parameters
    ----------
    case : {1, 2, 3, 4} or None
        One of the paper's cases (see :data:`LSB_CASES`); ``None`` to give ``lam, mu, sigma``.
    lam, mu, sigma : float, optional
        Override the case's values.
    n : int, default 30
        Image side.
    seed : int, default 0
        Seed of the noisy observation.
    periodic : bool, default True
        Torus, as in the paper's code.

    Returns
    -------
    pymc.Model
        With the Bernoulli variable ``"x"`` (pixel = 1 for foreground) and the observation
        ``alpha`` stored as ``model.alpha`` (a numpy array).
    """
    if case is not None and case not in LSB_CASES:
        raise ValueError(f"case must be one of {sorted(LSB_CASES)} or None, got {case!r}")
    base = (None, None, None) if case is None else LSB_CASES[case]
    lam = base[0] if lam is None else lam
    mu = base[1] if mu is None else mu
    sigma = base[2] if sigma is None else sigma
    if lam is None or mu is None or sigma is None:
        raise ValueError("Give a case or all of lam, mu and sigma.")
    alpha = segmentation_field(n, mu, sigma, seed)
    model = ising_model((n, n), coupling=lam, field=alpha, periodic=periodic)
    model.alpha = alpha
    return model


def magnetisation(x: np.ndarray, n_site_axes: int = 2) -> np.ndarray:
    """Mean spin ``mean(2 x - 1)`` over the last ``n_site_axes`` axes."""
    s = 2.0 * np.asarray(x, dtype=float) - 1.0
    return s.mean(axis=tuple(range(s.ndim - n_site_axes, s.ndim)))
