"""Bad input gets a clear error at construction; -inf neighbours and huge logits are handled."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.balancing import resolve_balancing


def test_continuous_variable_is_rejected():
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5)
        mu = pm.Normal("mu")
        with pytest.raises(ValueError, match="'mu' is continuous"):
            LocallyBalanced([x, mu])


def test_unsupported_discrete_distribution_is_rejected():
    with pm.Model():
        counts = pm.Multinomial("counts", n=5, p=[0.2, 0.8])
        with pytest.raises(ValueError, match="'counts' has distribution .*does not support"):
            LocallyBalanced([counts])


@pytest.mark.parametrize(
    "balancing, match",
    [
        ("square", "Unknown balancing function 'square'"),
        (lambda d: d, "not balanced"),
        (lambda d: float(d[0]), "vectorised"),
        (3, "must be a name or a callable"),
    ],
)
def test_bad_balancing(balancing, match):
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=2)
        with pytest.raises(ValueError, match=match):
            LocallyBalanced([x], balancing=balancing)


def test_custom_balanced_callable_is_accepted():
    name, fn = resolve_balancing(lambda d: d / 2)
    assert fn(np.array([2.0]))[0] == 1.0


@pytest.mark.parametrize("spd", [0, -3, 1.5, True, "2"])
def test_bad_steps_per_draw(spd):
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=2)
        with pytest.raises(ValueError, match="steps_per_draw"):
            GibbsWithGradients([x], steps_per_draw=spd)


def test_bad_differences_option():
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=2)
        with pytest.raises(ValueError, match="differences must be one of"):
            LocallyBalanced([x], differences="second-order")


def test_start_point_with_minus_inf_logp():
    with pm.Model():
        z = pm.Categorical("z", p=[0.5, 0.5, 0.0], initval=2)
        with pytest.raises(ValueError, match="starting point has log-probability -inf"):
            LocallyBalanced([z])


def test_minus_inf_neighbours_are_never_visited():
    """Category 2 has probability zero; with balancing 'max' (g(0) = 1) it must not be proposed."""
    with pm.Model():
        z = pm.Categorical("z", p=[0.3, 0.7, 0.0], shape=3)
        pm.Potential("c", 0.5 * pt.sum(pt.eq(z[:-1], z[1:])))
        step = LocallyBalanced([z], balancing="max", steps_per_draw=2)
        idata = pm.sample(
            draws=300,
            tune=50,
            chains=1,
            step=[step],
            random_seed=4,
            progressbar=False,
            compute_convergence_checks=False,
        )
    zs = idata.posterior["z"].values
    assert (zs != 2).all()
    assert np.isfinite(idata.sample_stats["accept"].values).all()
    assert set(np.unique(zs)) == {0, 1}


def test_huge_logits_no_nan():
    with pm.Model():
        x = pm.Bernoulli("x", logit_p=np.array([800.0, -800.0, 0.3]), shape=3)
        pm.Potential("c", 0.4 * (2 * x[1] - 1) * (2 * x[2] - 1))
        step = GibbsWithGradients([x], steps_per_draw=2)
        idata = pm.sample(
            draws=300,
            tune=50,
            chains=1,
            step=[step],
            random_seed=5,
            progressbar=False,
            initvals={"x": np.array([1, 0, 0])},
            compute_convergence_checks=False,
        )
    xs = idata.posterior["x"].values[0]
    assert (xs[:, 0] == 1).all() and (xs[:, 1] == 0).all()
    assert 0 < xs[:, 2].mean() < 1
    assert not np.isnan(idata.sample_stats["accept"].values).any()
