"""The relaxed logp: equal to the true logp on every discrete point; exact first-order
differences on multilinear models; clear errors where no extension exists."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_lbp import NotRelaxableError
from pymc_lbp.logp.differences import ExactDifferences, GradientDifferences
from pymc_lbp.logp.layout import BlockLayout, describe_block

RNG = np.random.default_rng(7)


def _differences(model, names):
    vars = [model.rvs_to_values[model[n]] for n in names]
    ip = model.initial_point()
    specs = describe_block(model, vars, ip)
    layout = BlockLayout(specs)
    shared = pm.make_shared_replacements(ip, vars, model)
    exact = ExactDifferences(model, specs, layout, shared)
    grad = GradientDifferences(model, specs, layout, shared)
    return specs, layout, exact, grad


def _all_states(layout, specs, lo_hi=None):
    ranges = []
    for spec in specs:
        for _ in range(spec.size):
            if spec.kind == "binary":
                ranges.append(range(2))
            elif spec.kind == "categorical":
                ranges.append(range(spec.n_categories))
            else:
                ranges.append(range(lo_hi[0], lo_hi[1] + 1))
    return [np.array(s, dtype=np.int64) for s in itertools.product(*ranges)]


def ising_chain():
    with pm.Model() as m:
        x = pm.Bernoulli("x", logit_p=RNG.normal(size=5), shape=5)
        s = 2 * x - 1
        pm.Potential("pair", 0.6 * pt.sum(s[:-1] * s[1:]))
    return m, ["x"]


def potts_mixture():
    mu = pt.as_tensor(np.array([-2.0, 0.0, 3.0]))
    with pm.Model() as m:
        z = pm.Categorical("z", p=[0.2, 0.3, 0.5], shape=4)
        pm.Potential("potts", 1.1 * pt.sum(pt.eq(z[:-1], z[1:])))
        pm.Normal("y", mu=mu[z], sigma=1.0, observed=RNG.normal(size=4))
    return m, ["z"]


def bayes_net_with_zeros():
    cpt = pt.as_tensor(np.array([[0.1, 0.9], [0.6, 0.4], [1.0, 0.0]]))
    table = pt.as_tensor(np.log(RNG.random((3, 3, 2))))
    with pm.Model() as m:
        a = pm.Categorical("a", p=[0.2, 0.5, 0.3], shape=3)
        b = pm.Categorical("b", p=cpt[a], shape=3)
        pm.Potential("f", table[np.arange(3), a, b].sum())
    return m, ["a", "b"]


def switch_and_eq():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.4, shape=3)
        z = pm.Categorical("z", p=[0.3, 0.3, 0.4], shape=2)
        pm.Potential("sw", pt.sum(pt.switch(x, 1.5, -0.5)))
        pm.Potential("eq", 0.7 * pt.sum(pt.eq(z, 2)) - 0.4 * pt.sum(pt.neq(z[0], z[1])))
        pm.Potential("and", 0.9 * pt.and_(pt.eq(x[0], 1), pt.eq(z[1], 0)))
    return m, ["x", "z"]


def scalar_categorical_index():
    with pm.Model() as m:
        z = pm.Categorical("z", p=[0.2, 0.5, 0.3])
        y = pm.Normal("y", mu=pm.math.constant(np.array([-2.0, 0.5, 3.0]))[z], sigma=1.5)
        pm.Normal("obs", mu=y, sigma=1.0, observed=1.2)
    return m, ["z"]


def joined_cpts_with_zeros():
    """Children whose CPT rows come from different parents, joined (as read_uai builds BAYES)."""
    cpt_a = pt.as_tensor(np.array([[0.7, 0.3], [0.0, 1.0]]))
    cpt_b = pt.as_tensor(np.array([[0.2, 0.8], [1.0, 0.0], [0.5, 0.5]]))
    with pm.Model() as m:
        a = pm.Bernoulli("a", p=0.4, shape=2)
        b = pm.Categorical("b", p=[0.3, 0.3, 0.4], shape=1)
        # P(c = 1 | parent) gathered from constant columns, then joined (read_uai's pattern)
        p1 = pt.concatenate([cpt_a[:, 1][a], cpt_b[:, 1][b]], axis=0)
        pm.Bernoulli("c", p=p1, shape=3)
    return m, ["a", "b", "c"]


MULTILINEAR = [
    joined_cpts_with_zeros,
    ising_chain,
    potts_mixture,
    bayes_net_with_zeros,
    switch_and_eq,
    scalar_categorical_index,
]


@pytest.mark.parametrize("factory", MULTILINEAR, ids=lambda f: f.__name__)
def test_relaxed_equals_logp_and_first_order_equals_exact(factory):
    model, names = factory()
    specs, layout, exact, grad = _differences(model, names)
    for x in _all_states(layout, specs):
        logp, d_exact = exact(x)
        logp_g, d_grad = grad(x)
        assert logp_g == pytest.approx(logp, abs=1e-9)
        if not np.isfinite(logp):
            assert grad.relaxed_logp_at(x) <= -1e29
            continue
        assert grad.relaxed_logp_at(x) == pytest.approx(logp, abs=1e-9)
        np.testing.assert_array_equal(np.isinf(d_exact), np.isinf(d_grad))
        finite = np.isfinite(d_exact)
        np.testing.assert_allclose(d_grad[finite], d_exact[finite], atol=1e-9)


def test_relaxed_equals_logp_on_integer_model():
    with pm.Model() as m:
        k = pm.Poisson("k", mu=2.5, shape=2)
        pm.Potential("c", -0.2 * (k[0] - k[1]) ** 2)
    specs, layout, exact, grad = _differences(m, ["k"])
    for x in _all_states(layout, specs, lo_hi=(0, 6)):
        assert grad.relaxed_logp_at(x) == pytest.approx(exact.logp(x), abs=1e-9)


def test_extreme_logits_give_finite_differences():
    with pm.Model() as m:
        pm.Bernoulli("x", logit_p=np.array([800.0, -800.0, 0.0]), shape=3)
    specs, layout, exact, grad = _differences(m, ["x"])
    x = np.array([1, 0, 1])
    _, d_exact = exact(x)
    _, d_grad = grad(x)
    assert not np.isnan(d_exact).any() and not np.isnan(d_grad).any()
    np.testing.assert_allclose(d_grad, d_exact)
    assert d_grad[0] < -700 and d_grad[1] < -700


def test_non_differentiable_use_is_an_error():
    with pm.Model() as m:
        x = pm.Categorical("x", p=[0.3, 0.3, 0.4], shape=3)
        pm.Potential("bad", pt.sum(pt.floor(x / 2.0)))
    with pytest.raises(NotRelaxableError, match="non-differentiable function"):
        _differences(m, ["x"])


def test_index_into_block_dependent_tensor_is_an_error():
    with pm.Model() as m:
        x = pm.Categorical("x", p=[0.3, 0.3, 0.4], shape=3)
        x2 = pm.Categorical("x2", p=[0.5, 0.5], shape=3)
        pm.Potential("idx", pt.sum(x2[x]))
    with pytest.raises(NotRelaxableError, match="indexes a tensor that depends on the block"):
        _differences(m, ["x", "x2"])


def test_no_relaxation_auto_takes_exact_and_gradient_request_raises():
    from pymc_lbp import GibbsWithGradients, LocallyBalanced

    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=3)
        pm.Potential("bad", pt.sum(pt.floor(pt.sum(x) / 2.0)))
    with m:
        with pytest.raises(NotRelaxableError):
            GibbsWithGradients([x], differences="gradient")
        step = LocallyBalanced([x], differences="auto")
    assert step.differences_kind == "exact"
    assert "no differentiable extension" in step.differences_reason


def test_piecewise_comparison_of_integer_warns():
    from pymc_lbp import LocallyBalanced

    with pm.Model() as m:
        k = pm.Poisson("k", mu=3.0)
        pm.Potential("thr", pt.switch(pt.gt(k, 4), -1.0, 0.0))
    with m, pytest.warns(UserWarning, match="piecewise constant"):
        LocallyBalanced([k], differences="gradient")
