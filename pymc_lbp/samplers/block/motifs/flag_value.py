"""Flag-and-value motifs: a binary flag and the continuous value it switches on (mixed blocks).

The mixed block of Wang et al. (2018)'s open-universe Gaussian mixture: a component's *active*
flag ``b`` and its mean ``v``, proposed jointly, so that a component can be born where the data
ask for one (flag on *and* mean moved there in one step) or die. Single-site moves cannot do
this: an inactive component's mean wanders under its prior, and switching the flag on is accepted
only where the mean already happens to sit near unexplained data.

**The motif** (:func:`flag_value_motif`): block = (flag, value), no conditioning variables; its
local parameters are the block's conditional log density on a grid,

    l[f, j] = log p(b = f, v = loc + scale t_j | rest) + const,   t_j = linspace(-T, T, G),

read from the model logp at the ``2 G`` reference states in one batched call
(:func:`flag_value_reference_values`). ``loc`` and ``scale`` place the grid on the value's
scale (by default from its prior, see :class:`~pymc_lbp.NeuralMixedBlock`); the network works in
the standardised coordinate ``t = (v - loc) / scale``. The parameters never depend on the
block's own current values, so a proposal built from them is an independence proposal for the
block given the rest, and the MH correction against the model's own logp keeps the sampler exact
whatever the grid or the network (:func:`flag_value_log_ratio`).

**Canonical form** (:func:`canonical_flag_value_params`): ``l - max(l)``, non-finite entries
(impossible states) set to ``-CLIP``, clipped to ``[-CLIP, 0]``.

**Training target** (:func:`flag_value_samples`): the distribution the parameters describe,
taken as the log density linear between grid points and zero outside ``[-T, T]``
(:func:`flag_value_log_density`); exact samples by inverse CDF on each segment. The random
profiles mimic the conditionals of such blocks: for the flag off, a broad Gaussian (the value's
prior); for the flag on, one to three bumps of widths from 0.04 to 2 (data that ask for a
component), sometimes on top of the broad prior, and a log-odds offset between the two of
standard deviation 6.
"""

from __future__ import annotations

import numpy as np

from pymc_lbp.samplers.block.motifs.motif_api import MotifSpec
from pymc_lbp.samplers.common import draw_categorical, inverse_cdf, mh_log_ratio

__all__ = [
    "CLIP",
    "HALF_WIDTH",
    "canonical_flag_value_params",
    "draw_flag_value",
    "draw_from_target",
    "flag_value_grid",
    "flag_value_log_density",
    "flag_value_log_q",
    "flag_value_log_ratio",
    "flag_value_motif",
    "flag_value_reference_values",
    "flag_value_samples",
    "grid_size",
]

HALF_WIDTH = 3.0
"""The grid covers ``t`` in ``[-HALF_WIDTH, HALF_WIDTH]`` (``v`` in ``loc +- 3 scale``)."""

CLIP = 30.0
"""Canonical grid log densities are clipped to ``[-CLIP, 0]`` (relative to their maximum)."""


def flag_value_motif(grid_points: int) -> MotifSpec:
    """The motif ``flag-value-g{G}``: a binary flag and one continuous value, no conditioning
    variables, ``2 G`` canonical grid log densities as parameters."""
    G = int(grid_points)
    if G < 4:
        raise ValueError(f"a flag-value grid needs at least 4 points, got {grid_points!r}")
    return MotifSpec(
        f"flag-value-g{G}",
        (2,),
        (),
        2 * G,
        f"a binary flag and the continuous value it switches on; parameters: the block's log "
        f"conditional density at flag 0 then 1 times {G} standardised values "
        f"linspace(-{HALF_WIDTH:g}, {HALF_WIDTH:g}, {G}), minus its maximum, clipped to "
        f"[-{CLIP:g}, 0] (pymc_lbp.samplers.block.motifs.flag_value)",
        n_continuous=1,
    )


def grid_size(motif: MotifSpec) -> int:
    """``G`` of a flag-value motif (raises for other motifs)."""
    if motif.block_cards != (2,) or motif.cond_cards or motif.n_continuous != 1:
        raise ValueError(f"motif {motif.name!r} is not a flag-value motif")
    if motif.n_params % 2 or motif.n_params < 8:
        raise ValueError(f"motif {motif.name!r} is not a flag-value motif")
    return motif.n_params // 2


def flag_value_grid(grid_points: int) -> np.ndarray:
    """The standardised grid ``t_j`` (G,)."""
    return np.linspace(-HALF_WIDTH, HALF_WIDTH, int(grid_points))


def flag_value_reference_values(loc: float, scale: float, grid_points: int) -> np.ndarray:
    """The ``2 G`` block states ``(flag, value)`` whose logp gives the parameters, shape (2G, 2):
    flag 0 at every grid value, then flag 1."""
    v = loc + scale * flag_value_grid(grid_points)
    G = v.size
    return np.column_stack([np.repeat([0.0, 1.0], G), np.tile(v, 2)])


def canonical_flag_value_params(logp_grid: np.ndarray) -> np.ndarray:
    """Canonical parameters from the log density at the reference states (..., 2G)."""
    lp = np.asarray(logp_grid, dtype=np.float64)
    finite = np.isfinite(lp)
    top = np.max(np.where(finite, lp, -np.inf), axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.clip(np.where(finite, lp - top, -CLIP), -CLIP, 0.0)


def draw_flag_value(
    log_w: np.ndarray,
    log_tables: np.ndarray,
    means: np.ndarray,
    sds: np.ndarray,
    rng: np.random.Generator,
) -> tuple[int, float]:
    """Draw ``(flag, t)`` from one block's mixture: a component, its flag, its Gaussian.

    ``log_w`` (K,), ``log_tables`` (K, 1, 2), ``means`` and ``sds`` (K, 1).
    """
    k = draw_categorical(log_w, rng)
    flag = draw_categorical(log_tables[k, 0], rng)
    return flag, float(means[k, 0] + sds[k, 0] * rng.standard_normal())


def flag_value_log_q(
    log_w: np.ndarray, log_tables: np.ndarray, means: np.ndarray, sds: np.ndarray, flag, t
) -> np.ndarray:
    """``log q(flag, t)`` under one block's mixture for arrays of states (broadcast)."""
    flag = np.asarray(flag, dtype=np.int64)
    t = np.asarray(t, dtype=np.float64)
    z = (t[..., None] - means[:, 0]) / sds[:, 0]
    comp = (
        log_w + log_tables[:, 0].T[flag] - 0.5 * z**2 - np.log(sds[:, 0]) - 0.5 * np.log(2 * np.pi)
    )
    top = np.max(comp, axis=-1, keepdims=True)
    return (top + np.log(np.sum(np.exp(comp - top), axis=-1, keepdims=True)))[..., 0]


def flag_value_log_ratio(logp_x: float, logp_y: float, log_q_x: float, log_q_y: float) -> float:
    """MH log ratio of an independence proposal ``y ~ q`` from ``x``:
    ``logp(y) - logp(x) + log q(x) - log q(y)`` (``-inf`` if ``y`` is impossible).

    ``q`` is a density in the standardised coordinate ``t``; in ``v`` both densities carry the
    same factor ``1 / scale``, which cancels.
    """
    return mh_log_ratio(logp_x, logp_y, log_q_y, log_q_x)  # the one MH rule


def _log_segment_mass(d: np.ndarray) -> np.ndarray:
    """``log((exp(d) - 1) / d)``: log of a unit-width segment's mass when the log density rises
    by ``d`` along it (relative to its left end), stable for all ``d``."""
    d = np.asarray(d, dtype=np.float64)
    small = np.abs(d) < 1e-8
    safe = np.where(small, 1.0, d)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        pos = safe + np.log(-np.expm1(-safe) / safe)
        out = np.where(safe > 0, pos, np.log(np.expm1(safe) / safe))
    return np.where(small, d / 2, out)


def _profiles(params: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Parameter rows (n, 2G) as profiles (n, 2, G), the grid step and the rise of the log
    density along each segment (n, 2, G - 1)."""
    params = np.atleast_2d(np.asarray(params, dtype=np.float64))
    prof = params.reshape(params.shape[0], 2, params.shape[1] // 2)
    grid = flag_value_grid(prof.shape[2])
    return prof, float(grid[1] - grid[0]), np.diff(prof, axis=-1)


def flag_value_log_density(params: np.ndarray, flag, t) -> np.ndarray:
    """Log density of the training target at ``(flag, t)``: per flag, the log density linear
    between the grid points of ``params`` (n, 2G), normalised over both flags and ``[-T, T]``;
    ``-inf`` outside the grid. ``flag`` and ``t`` have shape (n,)."""
    prof, h, d = _profiles(params)
    n, _, G = prof.shape
    log_mass = np.log(h) + prof[:, :, :-1] + _log_segment_mass(d)
    top = log_mass.max(axis=(1, 2), keepdims=True)
    log_z = top[:, 0, 0] + np.log(np.exp(log_mass - top).sum(axis=(1, 2)))
    flag = np.asarray(flag, dtype=np.int64)
    t = np.asarray(t, dtype=np.float64)
    inside = (t >= -HALF_WIDTH) & (t <= HALF_WIDTH)
    pos = np.clip((t + HALF_WIDTH) / h, 0, G - 1 - 1e-12)
    j = np.floor(pos).astype(np.int64)
    frac = pos - j
    rows = prof[np.arange(n), flag]
    lp = (1 - frac) * rows[np.arange(n), j] + frac * rows[np.arange(n), j + 1]
    return np.where(inside, lp - log_z, -np.inf)


def _random_profiles(rng: np.random.Generator, n: int, grid: np.ndarray) -> np.ndarray:
    """Log densities (n, 2, G) of random flag-value conditionals (see the module notes)."""

    def log_normal(t, m, s):
        return -0.5 * ((t - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)

    t = grid[None, :]
    m0 = rng.uniform(-1.5, 1.5, size=(n, 1))
    s0 = np.exp(rng.uniform(np.log(0.3), np.log(3.0), size=(n, 1)))
    off = log_normal(t, m0, s0)
    n_bumps = rng.integers(1, 4, size=n)
    comps = []
    for b in range(3):
        c = rng.uniform(-3.2, 3.2, size=(n, 1))
        s = np.exp(rng.uniform(np.log(0.04), np.log(2.0), size=(n, 1)))
        w = np.log(rng.gamma(1.0, size=(n, 1)))
        comps.append(np.where((b < n_bumps)[:, None], w + log_normal(t, c, s), -np.inf))
    # sometimes the broad prior also has weight when the flag is on
    broad = np.where((rng.random(n) < 0.3)[:, None], np.log(rng.random((n, 1))) + off, -np.inf)
    on = np.logaddexp.reduce(np.stack([*comps, broad]), axis=0)
    on = on + rng.normal(0.0, 6.0, size=(n, 1))
    return np.stack([off, on], axis=1)


def flag_value_samples(
    rng: np.random.Generator, n: int, grid_points: int = 32
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training examples ``(x_block, x_cond, params)`` for ``flag-value-g{G}``.

    ``params`` (n, 2G) are canonical parameters of random profiles; ``x_block`` (n, 2) holds an
    exact draw ``(flag, t)`` from the target they describe (:func:`flag_value_log_density`);
    ``x_cond`` is empty (n, 0).
    """
    G = int(grid_points)
    grid = flag_value_grid(G)
    params = canonical_flag_value_params(_random_profiles(rng, n, grid).reshape(n, 2 * G))
    return draw_from_target(rng, params), np.zeros((n, 0), dtype=np.int64), params


def draw_from_target(rng: np.random.Generator, params: np.ndarray) -> np.ndarray:
    """Exact draws ``(flag, t)`` (n, 2) from the targets of parameter rows ``params`` (n, 2G)
    (:func:`flag_value_log_density`): a segment by its mass, then the inverse CDF on it."""
    prof, h, d = _profiles(params)
    n, _, G = prof.shape
    grid = flag_value_grid(G)
    log_mass = (prof[:, :, :-1] + _log_segment_mass(d)).reshape(n, -1)
    log_mass = log_mass - log_mass.max(axis=1, keepdims=True)
    seg = inverse_cdf(np.cumsum(np.exp(log_mass), axis=1), rng.random(n))
    flag, j = np.divmod(seg, G - 1)
    dd = d[np.arange(n), flag, j]
    u = rng.random(n)
    # inverse CDF of exp(dd s) on s in [0, 1]: s = log(1 + u (e^dd - 1)) / dd
    small = np.abs(dd) < 1e-8
    safe = np.where(small, 1.0, dd)
    with np.errstate(over="ignore", invalid="ignore"):
        s_pos = 1.0 + np.log(u + (1.0 - u) * np.exp(-safe)) / safe
        s_neg = np.log1p(u * np.expm1(safe)) / safe
    s = np.where(small, u, np.where(safe > 0, s_pos, s_neg))
    t = grid[j] + h * np.clip(s, 0.0, 1.0)
    return np.column_stack([flag.astype(np.float64), t])
