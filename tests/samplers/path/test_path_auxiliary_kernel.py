"""Exact transition matrices of the path auxiliary kernel (R = 1, 2, 3) by independent enumeration.

The reference kernel is written here from the definition (DESIGN section 4), with plain Python
loops over ordered site sequences (``itertools.permutations``) and over the new values of the
picked sites; it never calls :mod:`pymc_lbp.samplers.path.reference`. The sampler's kernel is the
mixture ``s T_1 + (1 - s) [(1 - f) T_floor(U) + f T_ceil(U)]`` (``s`` the single-site share, ``U``
the scale, ``f = frac U``), whose weights are computed here independently. Four things are checked:

1. the reference kernel is a stochastic matrix with ``pi T = pi`` (and detailed balance);
2. the sampler's path log-probabilities equal the reference ones for every path from every state;
3. the sampler's numpy reference transition (:func:`pymc_lbp.samplers.path.reference.path_step`,
   with a real ``PathAuxiliaryLBP``'s differences, layout and balancing; the compiled kernel makes
   its moves from the same noise, ``test_compiled_path_kernel.py``) reproduces rows of the
   reference mixture kernel (chi-square on independent repeated steps from a fixed state; no
   autocorrelation, so the test is exact);
4. the single-site component makes the mixture irreducible where a path-only kernel is reducible
   (fixed even ``R``) or practically trapped (issue #14: ``R`` in ``{2, 3}`` one site away from
   the mode of a near-deterministic posterior).

Each check can fail: the reference kernel with the chosen value's probability dropped on the
reverse side (a known pitfall of public code) breaks ``pi T = pi`` and is rejected by the
chi-square test on the sampler's draws.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.samplers.balancing import log_sqrt
from pymc_lbp.samplers.path.reference import log_prob_path, noise_width, path_step, path_weights

ALPHA = 1e-4  # false-alarm rate of each chi-square test (fixed seeds: a failure is a real bug)


# --------------------------------------------------------------------------- reference kernel
def reference_kernel(states, logp, moves, deltas, R, log_g=lambda d: 0.5 * d, drop_rev_value=False):
    """Transition matrix of the path auxiliary MH kernel, by brute-force enumeration.

    Parameters
    ----------
    states : list of tuple
        All states.
    logp : callable
        ``logp(x)`` of a state (unnormalised).
    moves : callable
        ``moves(x)`` -> list of ``(site, new_value)`` one-site moves.
    deltas : callable
        ``deltas(x)`` -> dict ``(site, new_value) -> Delta`` used by the proposal (exact or an
        approximation; the MH correction makes the kernel exact either way).
    R : int
        Path length.
    log_g : callable
        Balancing function in log space (scalar).
    drop_rev_value : bool
        Reproduce the pitfall of omitting the new value's probability on the reverse side.
    """
    index = {s: k for k, s in enumerate(states)}
    T = np.zeros((len(states), len(states)))

    def weights(x):
        d = deltas(x)
        w = {m: (log_g(d[m]) if d[m] > -math.inf else -math.inf) for m in moves(x)}
        site_w = {}
        for (site, _), lw in w.items():
            site_w[site] = site_w.get(site, 0.0) + math.exp(lw)
        return w, site_w

    def path_prob(w, site_w, order, values, with_values=True):
        p = 1.0
        remaining = sum(site_w.values())
        for site, val in zip(order, values, strict=True):
            p *= site_w[site] / remaining
            remaining -= site_w[site]
            if with_values:
                p *= math.exp(w[(site, val)]) / site_w[site]
        return p

    for x in states:
        w, site_w = weights(x)
        movable = [s for s, v in site_w.items() if v > 0]
        for order in itertools.permutations(movable, R):
            options = [[v for (s, v) in w if s == site] for site in order]
            for values in itertools.product(*options):
                q_fwd = path_prob(w, site_w, order, values)
                if q_fwd == 0.0:
                    continue
                y = list(x)
                for site, val in zip(order, values, strict=True):
                    y[site] = val
                y = tuple(y)
                wy, site_wy = weights(y)
                back = [x[site] for site in order][::-1]
                q_rev = path_prob(wy, site_wy, order[::-1], back, with_values=not drop_rev_value)
                ratio = math.exp(logp(y) - logp(x)) * q_rev / q_fwd
                T[index[x], index[y]] += q_fwd * min(1.0, ratio)
        T[index[x], index[x]] += 1.0 - T[index[x]].sum()
    return T


def mixture_kernel(states, logp, moves, deltas, scale, share):
    """``share T_1 + (1 - share) [(1 - f) T_floor + f T_ceil]``, ``f = scale - floor(scale)``:
    the sampler's kernel for a fixed scale, with its weights written out independently."""
    lo = math.floor(scale)
    frac = scale - lo
    weights = {1: share}
    weights[lo] = weights.get(lo, 0.0) + (1 - share) * (1 - frac)
    if frac > 0:
        weights[lo + 1] = weights.get(lo + 1, 0.0) + (1 - share) * frac
    return sum(w * reference_kernel(states, logp, moves, deltas, R) for R, w in weights.items())


def exact_pi(states, logp):
    lp = np.array([logp(s) for s in states])
    p = np.exp(lp - lp.max())
    return p / p.sum()


def assert_invariant(T, pi):
    assert np.all(T >= -1e-15)
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    flow = pi[:, None] * T
    np.testing.assert_allclose(flow, flow.T, atol=1e-12)


def chi_square_pvalue(counts, probs):
    """Chi-square goodness-of-fit p-value, pooling cells with expected count < 5."""
    n = counts.sum()
    expected = n * probs
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    if np.any((exp == 0) & (obs > 0)):
        return 0.0
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    return float(stats.chi2.sf(chi2, df=len(obs) - 1))


def sampler_rows(step, states, starts, n, rng):
    """Empirical transition counts of the sampler's reference transition from each start
    (independent repeats; the step's differences, layout, balancing, share and scale; noise rows
    from ``rng``, uniforms then exponentials as the compiled kernel's)."""
    index = {s: k for k, s in enumerate(states)}
    width = noise_width(step.layout)
    rows = []
    for x0 in starts:
        x = np.array(x0, dtype=np.int64)
        logp, deltas = step.differences(x)
        counts = np.zeros(len(states))
        for _ in range(n):
            noise = np.concatenate([rng.random(3), rng.standard_exponential(width - 3)])
            res = path_step(
                x,
                logp,
                deltas,
                noise,
                step.path_scale,
                share=step.single_site_share,
                log_g=step.log_g,
                layout=step.layout,
                target=step.differences,
            )
            counts[index[tuple(int(v) for v in res.x)]] += 1
        rows.append(counts)
    return rows


# --------------------------------------------------------------------------- tiny models
N_BIN = 5
_rng = np.random.default_rng(20240611)
H_BIN = _rng.normal(0, 1.0, N_BIN)
J_BIN = np.triu(_rng.normal(0, 1.0, (N_BIN, N_BIN)), 1)

K_CAT, N_CAT = 3, 3
H_CAT = _rng.normal(0, 1.0, (N_CAT, K_CAT))
J_CAT = {(0, 1): 1.3, (1, 2): -0.8, (0, 2): 0.6}

P_INT, N_TRIALS = 0.4, 2
C_INT = {(0, 1): 0.5, (1, 2): -0.3, (0, 2): 0.2}


def logp_bin(x):
    x = np.asarray(x, float)
    return float(H_BIN @ x + x @ J_BIN @ x)


def logp_cat(x):
    return float(
        sum(H_CAT[i, x[i]] for i in range(N_CAT))
        + sum(c * (x[a] == x[b]) for (a, b), c in J_CAT.items())
    )


def logp_int(x):
    lp, lq = math.log(P_INT), math.log(1 - P_INT)
    prior = sum(math.log(math.comb(N_TRIALS, k)) + k * lp + (N_TRIALS - k) * lq for k in x)
    return prior + sum(c * x[a] * x[b] for (a, b), c in C_INT.items())


def moves_bin(x):
    return [(i, 1 - x[i]) for i in range(len(x))]


def moves_cat(x):
    return [(i, c) for i in range(len(x)) for c in range(K_CAT) if c != x[i]]


def moves_int(x):
    return [(i, x[i] + s) for i in range(len(x)) for s in (-1, 1) if 0 <= x[i] + s <= N_TRIALS]


def exact_deltas(logp, moves):
    def fn(x):
        out = {}
        for site, val in moves(x):
            y = list(x)
            y[site] = val
            out[(site, val)] = logp(tuple(y)) - logp(x)
        return out

    return fn


def step_deltas(step, moves):
    """The proposal's differences as the step computes them (e.g. first-order estimates)."""

    def fn(x):
        _, d = step.differences(np.array(x, dtype=np.int64))
        return {(s, v): float(d[step.layout.slot_of(s, v, x[s])]) for s, v in moves(x)}

    return fn


def binary_model():
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=N_BIN)
        xf = pt.cast(x, "float64")
        pm.Potential("pot", pt.dot(H_BIN, xf) + pt.dot(xf, pt.dot(J_BIN, xf)))
    return model


def binary_nonlinear_model():
    """Binary model whose logp is not multilinear: first-order differences are approximate."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=N_BIN)
        s = pt.sum(x)
        pm.Potential("pot", pt.dot(H_BIN, pt.cast(x, "float64")) - 0.6 * s**2 + 0.1 * s**3)
    return model


def logp_bin_nonlinear(x):
    s = sum(x)
    return float(H_BIN @ np.asarray(x, float) - 0.6 * s**2 + 0.1 * s**3)


def categorical_model():
    with pm.Model() as model:
        x = pm.Categorical("x", p=np.ones(K_CAT) / K_CAT, shape=N_CAT)
        h = pt.as_tensor(H_CAT)
        pot = pt.sum(h[np.arange(N_CAT), x])
        for (a, b), c in J_CAT.items():
            pot = pot + c * pt.eq(x[a], x[b])
        pm.Potential("pot", pot)
    return model


def integer_model():
    with pm.Model() as model:
        k = pm.Binomial("k", n=N_TRIALS, p=P_INT, shape=3)
        pm.Potential("pot", sum(c * k[a] * k[b] for (a, b), c in C_INT.items()))
    return model


STATES_BIN = list(itertools.product(range(2), repeat=N_BIN))
STATES_CAT = list(itertools.product(range(K_CAT), repeat=N_CAT))
STATES_INT = list(itertools.product(range(N_TRIALS + 1), repeat=3))


# --------------------------------------------------------------------------- 1. reference kernel
@pytest.mark.parametrize("R", [2, 3])
@pytest.mark.parametrize(
    "states, logp, moves",
    [
        (STATES_BIN, logp_bin, moves_bin),
        (STATES_CAT, logp_cat, moves_cat),
        (STATES_INT, logp_int, moves_int),
    ],
    ids=["binary", "categorical", "integer"],
)
def test_reference_kernel_is_pi_invariant(states, logp, moves, R):
    T = reference_kernel(states, logp, moves, exact_deltas(logp, moves), R)
    assert_invariant(T, exact_pi(states, logp))
    # it moves: a lazy kernel would pass trivially
    assert np.mean(np.diag(T)) < 0.9


def test_reference_kernel_detects_dropped_reverse_value():
    """The invariance check has power: the known categorical pitfall breaks it."""
    deltas = exact_deltas(logp_cat, moves_cat)
    T = reference_kernel(STATES_CAT, logp_cat, moves_cat, deltas, 2, drop_rev_value=True)
    pi = exact_pi(STATES_CAT, logp_cat)
    assert np.max(np.abs(pi @ T - pi)) > 1e-3


# --------------------------------------------------------------------------- 2. path probabilities
def _check_path_probabilities(step, states, logp, moves, R):
    """The sampler's log q of every path from every state equals the reference value."""
    ref_deltas = step_deltas(step, moves)
    layout = step.layout
    n_checked = 0
    for x in states[:: max(1, len(states) // 8)]:
        xa = np.array(x, dtype=np.int64)
        _, d = step.differences(xa)
        weights = path_weights(d, log_sqrt, layout)
        ref = ref_deltas(x)
        site_w = {}
        for (site, _), dv in ref.items():
            site_w[site] = site_w.get(site, 0.0) + math.exp(0.5 * dv)
        for order in itertools.permutations(sorted(site_w), R):
            for values in itertools.product(*[[v for (s, v) in ref if s == i] for i in order]):
                p, remaining = 1.0, sum(site_w.values())
                for site, val in zip(order, values, strict=True):
                    p *= math.exp(0.5 * ref[(site, val)]) / remaining
                    remaining -= site_w[site]
                slots = np.array(
                    [layout.slot_of(s, v, x[s]) for s, v in zip(order, values, strict=True)]
                )
                got = log_prob_path(weights, np.array(order), slots)
                assert got == pytest.approx(math.log(p), abs=1e-10)
                n_checked += 1
    assert n_checked > 0


@pytest.mark.parametrize("R", [2, 3])
def test_path_probabilities_binary(R):
    step = PathAuxiliaryLBP(model=binary_model(), path_scale=R, differences="exact")
    _check_path_probabilities(step, STATES_BIN, logp_bin, moves_bin, R)


@pytest.mark.parametrize("R", [2, 3])
def test_path_probabilities_categorical(R):
    step = PathAuxiliaryLBP(model=categorical_model(), path_scale=R, differences="exact")
    _check_path_probabilities(step, STATES_CAT, logp_cat, moves_cat, R)


def test_path_probabilities_integer():
    step = PathAuxiliaryLBP(model=integer_model(), path_scale=2, differences="exact")
    _check_path_probabilities(step, STATES_INT, logp_int, moves_int, 2)


# --------------------------------------------------------------------------- 3. the transition
N_ROW = 3000  # draws per row: detects row errors of ~0.03 in a cell of probability 0.2


def _check_rows(step, states, logp, moves, R, starts, seed, approximate=False):
    """Rows of the step's transition against the mixture kernel with scale ``R`` and the step's
    share."""
    deltas = step_deltas(step, moves) if approximate else exact_deltas(logp, moves)
    T = mixture_kernel(states, logp, moves, deltas, R, step.single_site_share)
    assert_invariant(T, exact_pi(states, logp))
    assert step.path_scale == R
    index = {s: k for k, s in enumerate(states)}
    rows = sampler_rows(step, states, starts, N_ROW, np.random.default_rng(seed))
    for x0, counts in zip(starts, rows, strict=True):
        p = chi_square_pvalue(counts, T[index[x0]])
        assert p > ALPHA / len(starts), (x0, p)
    return T


@pytest.mark.parametrize("R", [2, 3])
def test_step_rows_binary(R):
    step = PathAuxiliaryLBP(model=binary_model(), path_scale=R)
    assert step.differences_kind == "gradient"  # multilinear: first-order differences are exact
    starts = [(0, 0, 0, 0, 0), (1, 0, 1, 1, 0)]
    _check_rows(step, STATES_BIN, logp_bin, moves_bin, R, starts, seed=R)


@pytest.mark.parametrize("R", [2, 3])
def test_step_rows_categorical(R):
    step = PathAuxiliaryLBP(model=categorical_model(), path_scale=R)
    starts = [(0, 0, 0), (2, 1, 0)]
    T = _check_rows(step, STATES_CAT, logp_cat, moves_cat, R, starts, seed=10 + R)
    if R == 2:
        # power: the same draws reject the kernel with the reverse value probability dropped
        deltas = exact_deltas(logp_cat, moves_cat)
        bad = 0.1 * reference_kernel(STATES_CAT, logp_cat, moves_cat, deltas, 1)
        bad += 0.9 * reference_kernel(
            STATES_CAT, logp_cat, moves_cat, deltas, R, drop_rev_value=True
        )
        (counts,) = sampler_rows(step, STATES_CAT, [(2, 1, 0)], N_ROW, np.random.default_rng(99))
        i = STATES_CAT.index((2, 1, 0))
        assert not np.allclose(bad[i], T[i])
        assert chi_square_pvalue(counts, bad[i]) < ALPHA


def test_step_rows_integer_first_order():
    """Binomial sites (+-1 moves), first-order differences (approximate here): still exact."""
    step = PathAuxiliaryLBP(model=integer_model(), path_scale=2, differences="gradient")
    starts = [(0, 1, 2), (2, 2, 0)]
    _check_rows(step, STATES_INT, logp_int, moves_int, 2, starts, seed=5, approximate=True)


def test_step_rows_binary_nonlinear_first_order():
    step = PathAuxiliaryLBP(model=binary_nonlinear_model(), path_scale=3, differences="gradient")
    starts = [(1, 1, 0, 0, 1)]
    _check_rows(
        step, STATES_BIN, logp_bin_nonlinear, moves_bin, 3, starts, seed=7, approximate=True
    )


# --------------------------------------------------------------------------- 4. irreducibility
def _irreducible(T):
    reach = np.linalg.matrix_power(np.eye(len(T)) + T, len(T))
    return bool(np.all(reach > 0))


def test_single_site_share_makes_even_lengths_irreducible():
    """On a binary block a path of fixed even length keeps the parity of the number of ones,
    so T_2 splits the states in two classes; the mixture with single-site steps is irreducible
    and pi-invariant (and so is the old two-length mixture, kept as a check of the helper)."""
    deltas = exact_deltas(logp_bin, moves_bin)
    T2 = reference_kernel(STATES_BIN, logp_bin, moves_bin, deltas, 2)
    parity = np.array([sum(s) % 2 for s in STATES_BIN])
    assert np.all(T2[parity[:, None] != parity[None, :]] == 0)
    assert not _irreducible(T2)
    pi = exact_pi(STATES_BIN, logp_bin)
    for scale in (2, 2.5, 5):  # 5 = the whole block: T_5 only maps a state to its complement
        mix = mixture_kernel(STATES_BIN, logp_bin, moves_bin, deltas, scale, 0.1)
        assert _irreducible(mix), scale
        assert_invariant(mix, pi)
    assert not _irreducible(reference_kernel(STATES_BIN, logp_bin, moves_bin, deltas, 5))


@pytest.mark.parametrize("path_scale", [2.5, 2, 2.0])
def test_step_rows_mixture(path_scale):
    """The step's rows follow the mixture for a fractional scale, and for an integer scale
    given as an int or as a float (one meaning: 2 and 2.0 are the same kernel,
    0.1 T_1 + 0.9 T_2; before the fix 2.0 gave T_2 alone, which never changes parity)."""
    step = PathAuxiliaryLBP(model=binary_model(), path_scale=path_scale)
    assert step.single_site_share == 0.1
    starts = [(0, 1, 0, 0, 1), (1, 1, 1, 1, 1)]
    _check_rows(step, STATES_BIN, logp_bin, moves_bin, path_scale, starts, seed=21)


# --------------------------------------------------------------------------- 5. the trap of #14
# 5 sites, y_i = +-3 + N(0, 0.3) observed with N(+-3, 1): each wrong site costs ~ e^-18, so the
# posterior is the mode (1, 1, 0, 0, 1) up to ~1e-7. The data set is the 4th of the issue's.
_rng_trap = np.random.default_rng(1)
for _ in range(4):
    Y_TRAP = np.where(np.array([1, 1, 0, 0, 1]) == 1, 3.0, -3.0) + _rng_trap.normal(0, 0.3, 5)
MODE_TRAP = (1, 1, 0, 0, 1)
STATES_TRAP = list(itertools.product(range(2), repeat=5))


def logp_trap(x):
    mean = np.where(np.asarray(x) == 1, 3.0, -3.0)
    return float(-0.5 * np.sum((Y_TRAP - mean) ** 2))


def trap_model():
    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.5, shape=5)
        pm.Normal("y", pt.switch(z, 3.0, -3.0), 1.0, observed=Y_TRAP)
    return model


def hitting_times(T, target):
    """Expected number of steps to reach state ``target`` from every state (linear solve)."""
    keep = np.arange(len(T)) != target
    Q = T[np.ix_(keep, keep)]
    h = np.linalg.solve(np.eye(len(Q)) - Q, np.ones(len(Q)))
    return np.insert(h, target, 0.0)


def test_trap_kernel_hitting_times():
    """The path-only kernel that the tuning froze at U = 2.2 (R = 2 w.p. 0.8, 3 w.p. 0.2) needs
    of the order of e^18 steps to reach the mode from the states one site away (a path must change
    exactly as many sites as are wrong); with the single-site share it takes a few steps from
    every state. Proposals use the step's own (first-order, approximate) differences, as
    pm.sample does; the MH correction makes both kernels pi-invariant. (The trap's sites share no
    term, so single-site steps are asked for: by default such sites are drawn at once.)"""
    step = PathAuxiliaryLBP(model=trap_model(), steps_per_draw=1)
    deltas = step_deltas(step, moves_bin)
    pi = exact_pi(STATES_TRAP, logp_trap)
    mode = STATES_TRAP.index(MODE_TRAP)
    assert pi[mode] > 1 - 1e-6
    T2 = reference_kernel(STATES_TRAP, logp_trap, moves_bin, deltas, 2)
    T3 = reference_kernel(STATES_TRAP, logp_trap, moves_bin, deltas, 3)
    T1 = reference_kernel(STATES_TRAP, logp_trap, moves_bin, deltas, 1)
    path_only = 0.8 * T2 + 0.2 * T3
    mixture = 0.1 * T1 + 0.9 * path_only
    for T in (path_only, mixture):
        np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    one_away = [k for k, s in enumerate(STATES_TRAP) if sum(np.abs(np.subtract(s, MODE_TRAP))) == 1]
    assert np.min(hitting_times(path_only, mode)[one_away]) > 1e6
    assert np.max(hitting_times(mixture, mode)) < 100


def test_trap_step_rows():
    """The step's transition, scale frozen at 2.2, one site away from the mode: it moves to the
    mode about 10% of the time (the single-site steps), as the reference mixture says; the
    path-only step never did."""
    step = PathAuxiliaryLBP(model=trap_model(), path_scale=2.2, steps_per_draw=1)
    starts = [(1, 1, 0, 1, 1), (0, 1, 0, 0, 1)]
    # first-order differences are approximate on this model; the default takes exact ones (the
    # sites are a pairwise binary block, without couplings)
    approximate = step.differences_kind != "exact"
    T = _check_rows(
        step, STATES_TRAP, logp_trap, moves_bin, 2.2, starts, seed=31, approximate=approximate
    )
    mode = STATES_TRAP.index(MODE_TRAP)
    for x0 in starts:
        assert T[STATES_TRAP.index(x0), mode] > 0.09
