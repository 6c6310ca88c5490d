"""Pure functions of the path proposal and of the path-length adaptation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from pymc_lbp.logp.layout import BlockLayout, VariableSpec
from pymc_lbp.samplers.balancing import log_max, log_sqrt
from pymc_lbp.samplers.path.adaptation import PathLengthAdaptation, check_target_accept
from pymc_lbp.samplers.path.reference import (
    PathWeights,
    check_single_site_share,
    draw_path_length,
    draw_slots,
    log_prob_order,
    path_length,
    path_weights,
    race,
)

ALPHA = 1e-4


def chi2_p(counts, probs):
    expected = counts.sum() * probs
    assert np.all(expected >= 5)
    return float(stats.chisquare(counts, expected).pvalue)


def layout_of(*kinds):
    specs, off = [], 0
    for kind, size, k in kinds:
        specs.append(VariableSpec(f"v{off}", None, (size,), off, kind, k))
        off += size
    return BlockLayout(specs)


def log_prob_sites(site_log_w: np.ndarray, sites: np.ndarray) -> float:
    """Log-probability of drawing ``sites`` in this order without replacement from ``exp(W)``,
    as the path step computes it."""
    return log_prob_order(PathWeights.from_site_log_weights(site_log_w), np.asarray(sites))


def test_ordered_sample_law_and_normalisation():
    rng = np.random.default_rng(1)
    log_w = np.log(np.array([0.1, 0.4, 0.2, 0.25, 0.05])) + 3.0  # unnormalised on purpose
    perms = list(itertools.permutations(range(5), 3))
    probs = np.array([math.exp(log_prob_sites(log_w, np.array(p))) for p in perms])
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    index = {p: k for k, p in enumerate(perms)}
    counts = np.zeros(len(perms))
    for _ in range(30000):
        counts[index[tuple(race(np.exp(log_w), rng.standard_exponential(5), 3))]] += 1
    small = probs * counts.sum() < 5
    assert probs[small].sum() * counts.sum() >= 5 or not small.any()
    if small.any():
        probs, counts = (
            np.append(probs[~small], probs[small].sum()),
            np.append(counts[~small], counts[small].sum()),
        )
    assert chi2_p(counts, probs) > ALPHA


def test_ordered_probability_is_stable_for_long_paths():
    """One site holds almost all the mass; the rest of the path must not cancel to 0 / NaN."""
    n = 30
    log_w = np.full(n, -40.0)
    log_w[0] = 0.0
    order = np.arange(n)  # the big site first, then every other one
    # exact: 1/(1 + 29 e^-40) for the first pick, then uniform over the rest: 1/29!
    expected = -math.log1p(29 * math.exp(-40.0)) - math.lgamma(30)
    assert log_prob_sites(log_w, order) == pytest.approx(expected, rel=1e-12)
    assert log_prob_sites(log_w, order[:1]) == pytest.approx(-math.log1p(29 * math.exp(-40)))
    log_w[3] = -np.inf
    assert log_prob_sites(log_w, np.array([0, 3])) == -np.inf


def test_categorical_site_weights_and_value_draws():
    layout = layout_of(("binary", 2, None), ("categorical", 2, 3), ("integer", 1, None))
    layout.set_bounds(np.full(5, -np.inf), np.full(5, np.inf))
    x = np.array([0, 1, 2, 0, 5])
    # sites: 0, 1 binary (slots 0, 1); 2, 3 categorical K=3 (slots 2-4, 5-7); 4 integer (8, 9)
    deltas = np.array([0.3, -1.0, 0.5, 1.2, -np.inf, -np.inf, 0.4, 0.2, -0.6, 0.8])
    w = path_weights(deltas, log_sqrt, layout)
    expect = [0.15, -0.5, np.logaddexp(0.25, 0.6), np.logaddexp(0.2, 0.1), np.logaddexp(-0.3, 0.4)]
    np.testing.assert_allclose(w.site, expect)
    assert w.n_movable == 5
    assert w.within[4] == -np.inf and w.within[5] == -np.inf
    np.testing.assert_allclose(np.exp(w.within[2:5]).sum(), 1.0)
    # within-site draw frequencies of the categorical site 2 (slots 2, 3)
    rng = np.random.default_rng(2)
    picked = np.array([2, 4, 0])
    slots = np.array(
        [
            draw_slots(picked, w.within, layout, rng.standard_exponential(layout.n_slots))
            for _ in range(8000)
        ]
    )
    assert np.all(np.isin(slots[:, 0], [2, 3])) and np.all(np.isin(slots[:, 1], [8, 9]))
    assert np.all(slots[:, 2] == 0)
    p2 = math.exp(0.25) / (math.exp(0.25) + math.exp(0.6))
    assert chi2_p(np.bincount(slots[:, 0] - 2, minlength=2), np.array([p2, 1 - p2])) > ALPHA
    # new values and the moves back
    picked = np.array([1, 3, 6, 9])  # binary flip, site 2 -> 1, site 3 -> 1, integer +1
    new, back = layout.moves_of(picked, x[layout.slot_site[picked]])
    np.testing.assert_array_equal(new, [0, 1, 1, 6])
    np.testing.assert_array_equal(back, [1, 2 + 2, 5 + 0, 8])


def test_dead_moves_get_no_weight_under_any_balancing():
    layout = layout_of(("binary", 3, None))
    w = path_weights(np.array([-np.inf, 0.0, -2.0]), log_max, layout)  # max(1, t): g(0) = 1
    assert w.site[0] == -np.inf and w.n_movable == 2


def test_adaptation_update_and_freeze():
    ad = PathLengthAdaptation(0.574, max_length=100)
    log_u, bar, n = 0.0, 0.0, 0
    for _ in range(50):
        log_u, bar, n, _ = ad.update(log_u, bar, n, accept=1.0)
    assert n == 50 and log_u > 1.0 and 0 < bar <= log_u
    for _ in range(5000):
        log_u, bar, n, _ = ad.update(log_u, bar, n, accept=1.0)
    assert log_u == pytest.approx(math.log(100))  # clipped at the block size
    for _ in range(200):
        log_u, bar, n, _ = ad.update(log_u, bar, n, accept=0.0)
    assert log_u >= 0.0
    # the frozen scale: exp(log Ubar) within [1, D]; integers and D are allowed (the
    # single-site steps keep the chain irreducible whatever U is)
    assert ad.frozen_scale(math.log(100)) == pytest.approx(100)
    assert ad.frozen_scale(math.log(250)) == pytest.approx(100)
    assert ad.frozen_scale(-3.0) == 1.0
    assert ad.frozen_scale(0.0) == 1.0
    assert ad.frozen_scale(math.log(37.02)) == pytest.approx(37.02)
    assert ad.frozen_scale(math.log(2.0)) == pytest.approx(2.0)
    assert ad.gain(0) > ad.gain(1000) > 0


def test_adaptation_doubling_phase():
    """U doubles while steps accept at least the target; the first step below ends the phase
    and the Robbins-Monro recursion starts with fresh gains."""
    ad = PathLengthAdaptation(0.574, max_length=1000)
    state = (0.0, 0.0, 0, True)
    for k in range(1, 6):
        state = ad.update(*state[:3], accept=0.9, doubling=state[3])
        assert state[0] == pytest.approx(k * math.log(2)) and state[2] == 0 and state[3]
    log_u, bar, n, doubling = ad.update(*state[:3], accept=0.1, doubling=True)
    assert not doubling and n == 1
    assert log_u == pytest.approx(5 * math.log(2) + ad.gain(0) * (0.1 - 0.574))
    # capped at the block size, where doubling stops
    ad_small = PathLengthAdaptation(0.574, max_length=4)
    state = (0.0, 0.0, 0, True)
    for _ in range(5):
        state = ad_small.update(*state[:3], accept=1.0, doubling=state[3])
    assert state[0] == pytest.approx(math.log(4)) and not state[3]


@pytest.mark.parametrize("scale, share", [(2.3, 0.1), (1.0, 0.1), (4.0, 0.25), (1.6, 0.05)])
def test_draw_path_length_law(scale, share):
    """R = 1 with probability share (a single-site step, flagged), else the stochastic rounding
    of the scale; chi-square on the joint law of (R, path step) written out independently."""
    rng = np.random.default_rng(int(10 * scale + 100 * share))
    lo, frac = math.floor(scale), scale - math.floor(scale)
    law = {(1, False): share, (lo, True): (1 - share) * (1 - frac)}
    if frac > 0:
        law[(lo + 1, True)] = (1 - share) * frac
    cells = list(law)
    counts = np.zeros(len(cells))
    for _ in range(20000):
        counts[cells.index(draw_path_length(scale, share, 50, rng))] += 1
    assert chi2_p(counts, np.array([law[c] for c in cells])) > ALPHA
    # clipped to the block
    assert draw_path_length(7.5, 1e-9, 5, rng) == (5, True)


@pytest.mark.parametrize("bad", [0, 0.0, 1, 1.0, -0.1, 1.01, float("nan"), "x", None, True])
def test_check_single_site_share(bad):
    with pytest.raises(ValueError, match="single_site_share"):
        check_single_site_share(bad)
    assert check_single_site_share(0.1) == 0.1


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.01, float("nan"), "x", None])
def test_check_target_accept(bad):
    with pytest.raises(ValueError, match="target_accept"):
        check_target_accept(bad)


def test_race_is_the_sorted_order_of_the_keys():
    """The exponential race (a partial sort) picks the ``size`` smallest ``noise / lin`` in
    increasing order, as a full stable sort does, and never a site of weight 0; ``path_length``
    is ``draw_path_length`` from given uniforms."""
    rng = np.random.default_rng(5)
    for n, size in ((1, 1), (7, 3), (50, 50), (900, 33), (2500, 400)):
        lin = rng.exponential(1.0, n)
        lin[rng.random(n) < 0.1] = 0.0
        if not lin.any():
            lin[0] = 1.0
        size = min(size, int(np.count_nonzero(lin)))
        noise = rng.standard_exponential(n)
        with np.errstate(divide="ignore"):
            expected = np.argsort(noise / lin, kind="stable")[:size]
        np.testing.assert_array_equal(race(lin, noise, size), expected)
    assert path_length(0.05, 0.9, 2.5, 0.1, 10) == (1, False)
    assert path_length(0.5, 0.4, 2.5, 0.1, 10) == (3, True)
    assert path_length(0.5, 0.6, 2.5, 0.1, 10) == (2, True)
    assert path_length(0.5, 0.6, 12.5, 0.1, 10) == (10, True)
