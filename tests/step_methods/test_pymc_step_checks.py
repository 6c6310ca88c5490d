"""PyMC's own discrete step-method checks, run against our samplers with default options (#13.3).

After ``tests/step_methods/test_metropolis.py`` of PyMC: a batched Categorical's mean and
variance, batched Binomial(40) sites of shapes (40,) and (2, 20), ``blocked=False`` (one step per
variable), and the assignment of our steps by ``pm.sample`` once registered. The Poisson check
over mu from 1 to 10^4 is in ``tests/samplers/integer/test_integer_jumps.py``; same seed with
``cores=1`` and ``2``, the ``tune`` stat, tuning reset and pickling are in
``tests/step_methods/test_step_contract.py`` and ``tests/step_methods/test_pymc_coexistence.py``.

Thresholds: each checked moment is the chain mean of a function whose exact expectation is known;
its z-score against ArviZ's MCSE must stay below Z_MAX = 4 (two-sided 6e-5 per check if the
MCSE is right; a chain that does not move has MCSE 0 and fails).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_lbp
from pymc_lbp import GibbsWithGradients, LocallyBalanced, PathAuxiliaryLBP, SelfBalancing
from tests.helpers.ess import mcse_z

Z_MAX = 4.0
SAMPLE = dict(chains=1, cores=1, progressbar=False, compute_convergence_checks=False)
P_CAT = np.array([0.2, 0.5, 0.3])
SAMPLERS = {
    "LocallyBalanced": LocallyBalanced,
    "GibbsWithGradients": GibbsWithGradients,
    "PathAuxiliaryLBP": PathAuxiliaryLBP,
    "SelfBalancing": SelfBalancing,
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_batched_categorical_mean_and_variance(name):
    """Categorical(p) on 3 independent sites: E[v] = 1.1, E[(v - 1.1)^2] = 0.49."""
    k = np.arange(3)
    mean = float(P_CAT @ k)
    var = float(P_CAT @ (k - mean) ** 2)
    with pm.Model() as model:
        pm.Categorical("v", p=P_CAT, shape=3)
        step = SAMPLERS[name]([model["v"]])
        idata = pm.sample(draws=1000, tune=100, step=[step], random_seed=4, **SAMPLE)
    v = idata.posterior["v"].values[0].astype(float)
    for site in range(3):
        assert mcse_z(v[:, site], mean) < Z_MAX, (site, v[:, site].mean())
        assert mcse_z((v[:, site] - mean) ** 2, var) < Z_MAX, (site, v[:, site].var())


@pytest.mark.parametrize("name", ["LocallyBalanced", "PathAuxiliaryLBP"])
def test_not_blocked_gives_one_step_per_variable(name):
    """``blocked=False``: PyMC's CompoundStep of one step per variable, each exact."""
    with pm.Model() as model:
        a = pm.Bernoulli("a", p=0.3)
        pm.Categorical("b", p=P_CAT)
        step = SAMPLERS[name]([a, model["b"]], blocked=False)
        assert isinstance(step, pm.CompoundStep)
        assert [len(s.vars) for s in step.methods] == [1, 1]
        idata = pm.sample(draws=1500, tune=100, step=step, random_seed=6, **SAMPLE)
    a_draws = idata.posterior["a"].values[0].astype(float)
    b_draws = idata.posterior["b"].values[0].astype(float)
    assert mcse_z(a_draws, 0.3) < Z_MAX
    assert mcse_z(b_draws, float(P_CAT @ np.arange(3))) < Z_MAX


@pytest.mark.parametrize("name", ["LocallyBalanced", "GibbsWithGradients", "PathAuxiliaryLBP"])
def test_registered_steps_are_assigned_to_discrete_variables(name):
    """After ``register``, ``pm.sample``'s assignment gives our step the Bernoulli, Categorical
    and Poisson variables and NUTS the continuous one; ``unregister`` restores PyMC's."""
    with pm.Model() as model:
        mu = pm.Normal("mu")
        pm.Bernoulli("a", p=0.3)
        pm.Categorical("b", p=P_CAT)
        pm.Poisson("c", mu=3.0)
        pm.Normal("y", mu, observed=[0.1, -0.2])
    cls = SAMPLERS[name]
    try:
        pymc_lbp.register(cls)
        with model:
            _, selected = pm.sampling.mcmc.assign_step_methods(model, step=None)
    finally:
        pymc_lbp.unregister()
    assert sorted(v.name for v in selected[cls]) == ["a", "b", "c"]
    assert [v.name for v in selected[pm.NUTS]] == ["mu"]
    with model:
        _, selected = pm.sampling.mcmc.assign_step_methods(model, step=None)
    assert cls not in selected


@pytest.mark.parametrize("shape", [(40,), (2, 20)])
@pytest.mark.parametrize("name", ["LocallyBalanced", "GibbsWithGradients", "PathAuxiliaryLBP"])
def test_batched_binomial_mean_and_variance(name, shape):
    """PyMC's batched Binomial check: Binomial(40, 0.3) sites, mean 12 and variance 8.4 (pooled
    over the sites: the chain mean of the site average, and of the average squared deviation)."""
    n, p = 40, 0.3
    with pm.Model() as model:
        pm.Binomial("x", n=n, p=p, shape=shape)
        step = SAMPLERS[name]([model["x"]])
        idata = pm.sample(draws=400, tune=100, step=[step], random_seed=12, **SAMPLE)
    x = idata.posterior["x"].values[0].reshape(400, -1).astype(float)
    assert mcse_z(x.mean(axis=1), n * p) < Z_MAX, x.mean()
    assert mcse_z(((x - n * p) ** 2).mean(axis=1), n * p * (1 - p)) < Z_MAX, x.var()
