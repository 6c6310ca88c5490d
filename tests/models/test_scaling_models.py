"""The optimal-scaling benchmark targets: log-densities against independent numpy code, and
first-order differences equal to exact ones where the model is multilinear."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.models.bernoulli import bernoulli_product_model
from pymc_lbp.models.fhmm import fhmm_data, fhmm_model
from pymc_lbp.models.ising_scaling import scaling_ising_field, scaling_ising_model
from pymc_lbp.models.rbm import random_rbm_params, rbm_model, train_rbm_cd


def fhmm_log_joint(x, d):
    """log p(x, y) of the FHMM written directly from its definition."""
    x = np.asarray(x, dtype=float)
    lp = np.sum(x[0] * np.log(d.alpha) + (1 - x[0]) * np.log(1 - d.alpha))
    same = x[1:] == x[:-1]
    lp += np.sum(np.where(same, np.log(d.beta), np.log(1 - d.beta)))
    resid = d.y - x @ d.W - d.b
    lp += np.sum(-0.5 * (resid / d.sigma) ** 2 - np.log(d.sigma) - 0.5 * np.log(2 * np.pi))
    return lp


def ising_log_density(x, field, lam):
    s = 2.0 * np.asarray(x, dtype=float) - 1.0
    pair = np.sum(s[1:, :] * s[:-1, :]) + np.sum(s[:, 1:] * s[:, :-1])
    return float(np.sum(field * s) + lam * pair)


def _logp_fn(model):
    return model.compile_logp()


def _check_logp(model, name, states, reference):
    f = _logp_fn(model)
    got = np.array([f({name: s}) for s in states])
    want = np.array([reference(s) for s in states])
    # equal up to a constant
    np.testing.assert_allclose(got - got[0], want - want[0], atol=1e-8)


def _check_first_order_exact(model, name, states):
    grad = PathAuxiliaryLBP(model=model, differences="gradient", path_scale=1)
    exact = PathAuxiliaryLBP(model=model, differences="exact", path_scale=1)
    for s in states:
        x = np.asarray(s, dtype=np.int64).ravel()
        lg, dg = grad.differences(x)
        le, de = exact.differences(x)
        assert lg == pytest.approx(le)
        np.testing.assert_allclose(dg, de, atol=1e-8)


def test_fhmm_log_joint_and_exact_first_order():
    d = fhmm_data(length=12, n_chains=3, sigma=0.8, seed=1)
    model = fhmm_model(data=d)
    rng = np.random.default_rng(0)
    states = [rng.integers(0, 2, size=(12, 3)) for _ in range(6)] + [d.x]
    _check_logp(model, "x", states, lambda s: fhmm_log_joint(s, d))
    _check_first_order_exact(model, "x", states[:3])


def test_fhmm_without_correction_is_not_multilinear():
    """The zero potential is what makes first-order differences exact (the claim has teeth)."""
    d = fhmm_data(length=6, n_chains=3, sigma=0.8, seed=2)
    plain = fhmm_model(data=d, multilinear=False)
    fixed = fhmm_model(data=d)
    x = d.x.ravel()
    assert plain.compile_logp()({"x": d.x}) == pytest.approx(fixed.compile_logp()({"x": d.x}))
    _, dg = PathAuxiliaryLBP(model=plain, differences="gradient", path_scale=1).differences(x)
    _, de = PathAuxiliaryLBP(model=plain, differences="exact", path_scale=1).differences(x)
    assert np.max(np.abs(dg - de)) > 0.1


def test_scaling_ising_field_and_log_density():
    field = scaling_ising_field(10, 0.15, 0.0, seed=0)
    assert set(np.unique(field)) == {-0.15, 0.15}
    assert 0.35 < np.mean(field > 0) < 0.65  # the disc holds about half the lattice
    model = scaling_ising_model(n=6, config=2, seed=3)
    rng = np.random.default_rng(1)
    states = [rng.integers(0, 2, size=(6, 6)) for _ in range(6)]
    _check_logp(model, "x", states, lambda s: ising_log_density(s, model.field, 0.15))
    _check_first_order_exact(model, "x", states[:3])


def test_bernoulli_product():
    model = bernoulli_product_model(dim=30, config=2, seed=0)
    assert set(np.unique(model.p)) == {0.15, 0.85}
    rng = np.random.default_rng(2)
    states = [rng.integers(0, 2, size=30) for _ in range(5)]
    p = model.p
    _check_logp(
        model, "x", states, lambda s: float(np.sum(s * np.log(p) + (1 - s) * np.log(1 - p)))
    )
    _check_first_order_exact(model, "x", states[:2])


def test_rbm_log_density_and_training():
    params = random_rbm_params(n_visible=12, n_hidden=4, seed=0)
    model = rbm_model(params)
    rng = np.random.default_rng(3)
    states = [rng.integers(0, 2, size=12) for _ in range(6)]
    _check_logp(model, "v", states, params.log_density)
    # CD training increases the data's log-density relative to random states
    data = (rng.random((200, 12)) < np.linspace(0.1, 0.9, 12)).astype(np.int64)
    data[:, 6:] = data[:, :6]  # correlated halves
    trained = train_rbm_cd(data, n_hidden=6, epochs=20, seed=0)
    noise = rng.integers(0, 2, size=(200, 12))
    assert trained.log_density(data).mean() > trained.log_density(noise).mean() + 1.0
