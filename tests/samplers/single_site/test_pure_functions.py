"""Balancing functions, proposal math and lattice helpers."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_lbp.models import lattice_edges
from pymc_lbp.samplers.balancing import BALANCING_FUNCTIONS, balanced_log_weights
from pymc_lbp.samplers.common import (
    draw_categorical,
    draw_from_cdf,
    log_normalize,
    mh_accept,
    mh_log_ratio,
    prepare_weights,
)


@pytest.mark.parametrize("name", list(BALANCING_FUNCTIONS))
def test_balancing_functions_are_balanced_and_safe(name):
    f = BALANCING_FUNCTIONS[name]
    d = np.linspace(-50, 50, 201)
    np.testing.assert_allclose(f(d) - f(-d), d, atol=1e-12)
    out = f(np.array([-np.inf, np.inf, 0.0]))
    assert not np.isnan(out).any()
    w = balanced_log_weights(np.array([-np.inf, 0.0]), f)
    assert w[0] == -np.inf


def test_log_normalize_and_all_zero_weights():
    p = np.exp(log_normalize(np.array([0.0, np.log(3.0), -np.inf])))
    np.testing.assert_allclose(p, [0.25, 0.75, 0.0])
    assert np.all(log_normalize(np.full(3, -np.inf)) == -np.inf)
    assert prepare_weights(np.full(3, -np.inf)) is None


def test_draws_follow_weights_and_skip_zero_weights():
    rng = np.random.default_rng(0)
    log_w = np.log(np.array([0.1, 0.0, 0.6, 0.3]))
    n = 20000
    counts = np.bincount([draw_categorical(log_w, rng) for _ in range(n)], minlength=4)
    cdf = prepare_weights(log_w)[1]
    counts2 = np.bincount([draw_from_cdf(cdf, rng) for _ in range(n)], minlength=4)
    for c in (counts, counts2):
        assert c[1] == 0
        se = np.sqrt(np.array([0.1, 0.6, 0.3]) * 0.9 / n)
        assert np.all(np.abs(c[[0, 2, 3]] / n - [0.1, 0.6, 0.3]) < 5 * se)


def test_mh_acceptance_edge_cases():
    assert mh_log_ratio(0.0, -np.inf, 0.0, 0.0) == -np.inf
    assert mh_log_ratio(0.0, 1.0, 0.0, -np.inf) == -np.inf
    assert mh_accept(-np.inf, 0.0) == (0.0, False)
    assert mh_accept(np.nan, 0.0) == (0.0, False)
    assert mh_accept(np.inf, 0.999) == (1.0, True)
    assert mh_accept(3.0, 0.999) == (1.0, True)
    assert mh_accept(np.log(0.25), 0.2499) == (pytest.approx(0.25), True)
    assert mh_accept(np.log(0.25), 0.2501) == (pytest.approx(0.25), False)


def test_numpy_and_graph_mh_accept_take_the_uniform_alike():
    """The numpy MH accept and the graph's make the same decision from the same uniform, on
    ratios around 0 and the non-finite ones, uniforms across [0, 1)."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_lbp.samplers.mh_graph import mh_accept as graph_accept

    r, u = pt.scalar("r", dtype="float64"), pt.scalar("u", dtype="float64")
    fn = pytensor.function([r, u], graph_accept(r, u))
    ratios = [-np.inf, -5.0, np.log(0.3), -1e-12, 0.0, 2.0, np.inf, np.nan]
    for ratio in ratios:
        for uniform in (0.0, 0.05, 0.3 - 1e-12, 0.3 + 1e-12, 0.5, 0.999999):
            prob, accepted = fn(ratio, uniform)
            assert mh_accept(ratio, uniform) == (pytest.approx(float(prob)), bool(accepted))


@pytest.mark.parametrize(
    "shape, periodic, n_edges",
    [((4,), False, 3), ((4,), True, 4), ((3, 3), True, 18), ((3, 3), False, 12), ((2, 3), True, 9)],
)
def test_lattice_edges(shape, periodic, n_edges):
    e = lattice_edges(shape, periodic)
    assert len(e) == n_edges
    assert len({tuple(sorted(x)) for x in e}) == n_edges


def _random_mixtures(rng, B=3, K=2, D=2, C=3):
    """``B`` normalised mixtures of products, with impossible categories (-inf) in them."""
    log_w = np.log(rng.dirichlet(np.ones(K), size=B))
    log_tables = np.log(rng.dirichlet(np.ones(C), size=(B, K, D)))
    log_tables[0, :, 1, 2] = -np.inf  # block 0's second variable never takes category 2
    log_tables[2, 1, 0, 0] = -np.inf
    top = log_tables.max(axis=-1, keepdims=True)
    log_tables -= top + np.log(np.exp(log_tables - top).sum(axis=-1, keepdims=True))
    return log_w, log_tables


def test_blocks_log_probs_is_block_log_probs_row_by_row():
    from pymc_lbp.samplers.block.reference import (
        block_log_probs,
        blocks_log_probs,
        enumerate_block_states,
    )

    rng = np.random.default_rng(4)
    log_w, log_tables = _random_mixtures(rng)
    states = enumerate_block_states(np.array([3, 3]))
    values = np.stack([states, states[::-1], states])  # (B, S, D)
    got = blocks_log_probs(log_w, log_tables, values)
    for b in range(3):
        np.testing.assert_allclose(
            got[b], block_log_probs(log_w[b], log_tables[b], values[b]), rtol=1e-13
        )
        np.testing.assert_allclose(np.exp(got[b]).sum(), 1.0, rtol=1e-12)  # all states
    assert np.isneginf(got[0][states[:, 1] == 2]).all()


def test_draw_blocks_draws_each_block_from_its_own_mixture():
    """Frequencies of 60,000 joint draws per block against the exact mixture probabilities
    (chi-square, level 1e-3 per block); impossible states never drawn."""
    from scipy import stats

    from pymc_lbp.samplers.block.reference import (
        blocks_log_probs,
        draw_blocks,
        enumerate_block_states,
    )

    rng = np.random.default_rng(5)
    log_w, log_tables = _random_mixtures(rng)
    states = enumerate_block_states(np.array([3, 3]))
    probs = np.exp(blocks_log_probs(log_w, log_tables, np.stack([states] * 3)))
    n = 60_000
    counts = np.zeros((3, len(states)))
    for _ in range(n // 1000):
        draws = np.stack(
            [draw_blocks(log_w, log_tables, rng.random((3, 3))) for _ in range(1000)]
        )  # (n, B, D)
        codes = draws[..., 0] * 3 + draws[..., 1]
        for b in range(3):
            counts[b] += np.bincount(codes[:, b], minlength=len(states))
    for b in range(3):
        possible = probs[b] > 0
        assert counts[b][~possible].sum() == 0
        expected = n * probs[b][possible]
        assert stats.chisquare(counts[b][possible], expected).pvalue > 1e-3, b


def test_draw_blocks_never_returns_a_zero_weight_entry_when_the_uniform_rounds_up():
    from pymc_lbp.samplers.block.reference import pick_index

    w = np.array([[0.3, 0.7, 0.0], [0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(pick_index(w, np.array([1.0, 1.0])), [1, 1])
    np.testing.assert_array_equal(pick_index(w, np.array([0.0, 0.0])), [0, 1])
    np.testing.assert_array_equal(pick_index(w, np.array([0.3, 0.5])), [1, 1])


def test_numpy_and_graph_slot_draws_agree_and_skip_zero_weights():
    """The reference's inverse-CDF draw is the graph's: the same slot from the same uniform,
    and a uniform that rounds up to the total goes to the last slot of positive weight."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_lbp.samplers.single_site.graph import draw_slot as graph_slot
    from pymc_lbp.samplers.single_site.reference import draw_slot

    c, u = pt.vector("c", dtype="float64"), pt.scalar("u", dtype="float64")
    fn = pytensor.function([c, u], graph_slot(c, u))
    cdf = np.cumsum([0.0, 0.5, 0.0, 0.25, 0.25, 0.0, 0.0])
    for uniform in (0.0, 0.2, 0.5, 0.74, 0.75, 0.9, 1.0 - 1e-16, 1.0):
        assert draw_slot(cdf, uniform) == int(fn(cdf, uniform)), uniform
    assert draw_slot(cdf, 1.0) == 4  # not the zero-weight slots 5 and 6
    assert draw_slot(cdf, 0.0) == 1  # not the zero-weight slot 0
