"""Learned balancing functions (LSB1/LSB2) and the LSB objective, as pure functions."""

from __future__ import annotations

import itertools

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_lbp.samplers.self_balancing.learning import AdamState, BalancingLearner, TransitionBatch
from pymc_lbp.samplers.self_balancing.parametrizations import (
    D_CLIP,
    GRID_DENSITY,
    MixtureBalancing,
    NeuralBalancing,
    make_parametrization,
)

NAMES = ["lsb1", "lsb2", "lsb2_min"]
D_GRID = np.concatenate(
    [np.linspace(-80, 80, 641), [-1e6, -745.0, -1e-12, 0.0, 1e-12, 745.0, 1e6], [D_CLIP]]
)


def random_params(name: str, rng: np.random.Generator, scale: float) -> np.ndarray:
    n = make_parametrization(name).n_params
    return rng.normal(scale=scale, size=n)


# -- independent formulas (no pymc_lbp code) ------------------------------------------------------
def mixture_g(t: np.ndarray, theta: np.ndarray) -> np.ndarray:
    w = np.exp(theta) / np.exp(theta).sum()
    return (
        w[0] * np.sqrt(t) + w[1] * t / (1 + t) + w[2] * np.minimum(1, t) + w[3] * np.maximum(1, t)
    )


def neural_log_g(d: np.ndarray, params: np.ndarray, form: str, hidden: int = 10) -> np.ndarray:
    """``log g(e^d)`` of LSB2 from its definition: g from h at the grid nodes, interpolated."""
    w, b, v = params[:hidden], params[hidden : 2 * hidden], params[2 * hidden :]

    def h(t):  # h(t) = sqrt(t) exp(m(log t)), m(u) = sum_k v_k softplus(w_k u + b_k)
        u = np.log(t)
        m = np.sum(v * np.log1p(np.exp(np.multiply.outer(np.atleast_1d(u), w) + b)), axis=1)
        return np.sqrt(t) * np.exp(m)

    nodes = np.arange(int(D_CLIP * GRID_DENSITY) + 1) / GRID_DENSITY
    t = np.exp(nodes)
    if form == "sum":
        g_nodes = (h(t) + t * h(1 / t)) / 2
    else:
        g_nodes = np.minimum(h(t), t * h(1 / t))
    even = np.log(g_nodes) - nodes / 2
    return d / 2 + np.interp(np.abs(d), nodes, even)


# -- balance, positivity, agreement -------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_balanced_and_positive_for_any_parameters(name):
    rng = np.random.default_rng(0)
    par = make_parametrization(name)
    for scale in (0.1, 1.0, 5.0, 20.0):
        for _ in range(10):
            params = random_params(name, rng, scale)
            lg = par.log_g(D_GRID, params)
            lg_mirror = par.log_g(-D_GRID, params)
            assert np.all(np.isfinite(lg)), "g must be positive and finite at every finite ratio"
            np.testing.assert_allclose(lg - lg_mirror, D_GRID, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_numpy_and_pytensor_agree(name):
    rng = np.random.default_rng(1)
    par = make_parametrization(name)
    d = pt.vector("d")
    p = pt.vector("p")
    fn = pytensor.function([d, p], par.log_g_pt(d, p))
    grid = np.concatenate([D_GRID, [-np.inf, np.nan]])
    for scale in (0.5, 5.0):
        params = random_params(name, rng, scale)
        expected = par.log_g(grid, params)
        got = fn(grid, params)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
        assert got[-2] == -np.inf and got[-1] == -np.inf


@pytest.mark.parametrize("name", NAMES)
def test_masked_neighbours_get_zero_weight(name):
    par = make_parametrization(name)
    params = random_params(name, np.random.default_rng(2), 1.0)
    out = par.log_g(np.array([-np.inf, np.nan, 0.0]), params)
    assert out[0] == -np.inf and out[1] == -np.inf and np.isfinite(out[2])


def test_lsb1_is_the_softmax_mixture_of_the_four_functions():
    rng = np.random.default_rng(3)
    par = MixtureBalancing()
    d = np.linspace(-30, 30, 241)
    for _ in range(5):
        theta = rng.normal(scale=2, size=4)
        np.testing.assert_allclose(
            par.log_g(d, theta), np.log(mixture_g(np.exp(d), theta)), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(par.weights(theta), np.exp(theta) / np.exp(theta).sum())
    # untuned: equal weights
    np.testing.assert_allclose(par.weights(par.initial_params()), 0.25)


@pytest.mark.parametrize("form", ["sum", "min"])
def test_lsb2_matches_its_definition_and_starts_at_sqrt(form):
    rng = np.random.default_rng(4)
    par = NeuralBalancing(10, form)
    d = np.concatenate([np.linspace(-35, 35, 281), rng.uniform(-30, 30, 50)])
    p0 = par.initial_params(rng)
    np.testing.assert_allclose(par.log_g(d, p0), d / 2, atol=1e-12)
    for _ in range(3):
        params = rng.normal(scale=0.7, size=par.n_params)
        np.testing.assert_allclose(
            par.log_g(d, params), neural_log_g(d, params, form), rtol=1e-9, atol=1e-9
        )


def test_unknown_parametrization_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown parametrization 'lsb3'"):
        make_parametrization("lsb3")
    with pytest.raises(ValueError, match="hidden must be a positive int"):
        make_parametrization("lsb2", hidden=0)


# -- the objective --------------------------------------------------------------------------------
def _chain_target(n=3):
    states = np.array(list(itertools.product([0, 1], repeat=n)))
    s = 2 * states - 1
    log_pi = 0.9 * np.sum(s[:, 1:] * s[:, :-1], 1) + s @ np.linspace(-1.2, 0.7, n)
    return states, log_pi


def _exact_deltas(states, log_pi, a):
    x = states[a]
    out = []
    for i in range(len(x)):
        y = x.copy()
        y[i] = 1 - y[i]
        b = int(np.flatnonzero((states == y).all(1))[0])
        out.append(log_pi[b] - log_pi[a])
    return np.array(out)


def exact_surrogate(par, params, states, log_pi) -> float:
    """sum_x pi(x) sum_j A_j (log A_j - Delta_j) + R_bar log R_bar, by enumeration (numpy)."""
    pi = np.exp(log_pi - log_pi.max())
    pi /= pi.sum()
    n = states.shape[1]
    deltas = [_exact_deltas(states, log_pi, a) for a in range(len(states))]
    logq = []
    for dl in deltas:
        w = np.exp(par.log_g(dl, params))
        logq.append(np.log(w / w.sum()))
    first, rej = 0.0, 0.0
    for a in range(len(states)):
        total_a = 0.0
        for j in range(n):
            y = states[a].copy()
            y[j] = 1 - y[j]
            b = int(np.flatnonzero((states == y).all(1))[0])
            dl = deltas[a][j]
            la = logq[a][j] + min(0.0, dl + logq[b][j] - logq[a][j])
            first += pi[a] * np.exp(la) * (la - dl)
            total_a += np.exp(la)
        rej += pi[a] * (1 - total_a)
    return first + rej * np.log(rej)


def enumerated_batch(par, params, states, log_pi) -> TransitionBatch:
    """Every (state, proposed slot) pair, weighted by pi(x) Q(j|x): the estimator's expectation."""
    pi = np.exp(log_pi - log_pi.max())
    pi /= pi.sum()
    n = states.shape[1]
    rows = []
    for a in range(len(states)):
        dx = _exact_deltas(states, log_pi, a)
        w = np.exp(par.log_g(dx, params))
        q = w / w.sum()
        for j in range(n):
            y = states[a].copy()
            y[j] = 1 - y[j]
            b = int(np.flatnonzero((states == y).all(1))[0])
            rows.append((dx, _exact_deltas(states, log_pi, b), j, j, dx[j], pi[a] * q[j]))
    dxs, dys, sl, rv, dl, wt = zip(*rows, strict=True)
    return TransitionBatch(
        np.array(dxs), np.array(dys), np.array(sl), np.array(rv), np.array(dl),
        np.ones(len(rows)), np.array(wt),
    )  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_objective_and_gradient_match_enumeration(name):
    """Fed the estimator's expectation, loss = exact surrogate and grad = its finite differences."""
    rng = np.random.default_rng(5)
    par = make_parametrization(name)
    states, log_pi = _chain_target()
    params = random_params(name, rng, 0.8)
    learner = BalancingLearner(par, 1e-2, max_grad_norm=1e9)
    loss, rej, grad = learner.evaluate(
        AdamState.fresh(params), enumerated_batch(par, params, states, log_pi)
    )
    assert loss == pytest.approx(exact_surrogate(par, params, states, log_pi), rel=1e-9)
    assert 0 < rej < 1
    eps = 1e-5
    fd = np.array(
        [
            (
                exact_surrogate(par, params + eps * e, states, log_pi)
                - exact_surrogate(par, params - eps * e, states, log_pi)
            )
            / (2 * eps)
            for e in np.eye(par.n_params)
        ]
    )
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-7)
    assert np.linalg.norm(fd) > 1e-4  # the check has something to compare


def test_learner_skips_non_finite_updates_and_clips():
    par = make_parametrization("lsb1")
    states, log_pi = _chain_target()
    params = np.array([0.3, -0.2, 0.1, 0.0])
    batch = enumerated_batch(par, params, states, log_pi)
    learner = BalancingLearner(par, 1e-2)
    state = AdamState.fresh(params)
    new, loss, skipped = learner.update(state, batch)
    assert not skipped and np.isfinite(loss) and new.t == 1.0
    assert not np.allclose(new.params, params)
    np.testing.assert_array_equal(state.params, params)  # functional: input state untouched
    bad = batch._replace(dlogp=np.full_like(batch.dlogp, np.nan))
    same, loss, skipped = learner.update(state, bad)
    assert skipped and same is state and np.isnan(loss)
    clipped = BalancingLearner(par, 5.0, param_clip=0.5)
    for _ in range(20):
        state, _, _ = clipped.update(state, batch)
    assert np.all(np.abs(state.params) <= 0.5)
