"""Runs through ``pm.sample`` match exact answers (enumeration, closed forms)."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.models import ising_log_density, ising_model, potts_model
from tests.helpers.ess import checked_ess
from tests.helpers.frequencies import max_z_score, posterior_draws

SAMPLE_KW = dict(
    draws=2500, tune=300, chains=2, cores=1, progressbar=False, compute_convergence_checks=False
)


def _ising_exact(shape, coupling, field, periodic):
    n = int(np.prod(shape))
    states = np.array(list(itertools.product([0, 1], repeat=n)))
    log_pi = ising_log_density(states, shape, coupling, field, periodic)
    p = np.exp(log_pi - log_pi.max())
    return states, p / p.sum()


@pytest.mark.parametrize(
    "make_step",
    [
        lambda v: LocallyBalanced(v, balancing="sqrt", steps_per_draw=3),
        lambda v: LocallyBalanced(v, balancing="barker", steps_per_draw=3),
    ],
    ids=["lb-sqrt", "lb-barker"],
)
def test_coupled_binary_frequencies(make_step):
    """(GibbsWithGradients is not a case here: on this pairwise binary block it takes the exact
    differences from the couplings and draws exactly what "lb-sqrt" draws, same seed; it is
    checked on the Potts model and the hard constraint below.)"""
    shape, coupling = (5,), 0.8
    field = np.array([0.3, -0.2, 0.0, 0.5, -0.4])
    model = ising_model(shape, coupling, field, periodic=False)
    with model:
        idata = pm.sample(step=[make_step([model["x"]])], random_seed=11, **SAMPLE_KW)
    states, probs = _ising_exact(shape, coupling, field, periodic=False)
    z, crit = max_z_score(posterior_draws(idata, ["x"]), states, probs)
    assert z < crit


@pytest.mark.parametrize(
    "make_step",
    [
        lambda v: LocallyBalanced(v, balancing="min", steps_per_draw=3),
        lambda v: GibbsWithGradients(v, steps_per_draw=3),
    ],
    ids=["lb-min", "gwg"],
)
def test_potts_frequencies(make_step):
    rng = np.random.default_rng(3)
    field = rng.normal(scale=0.5, size=(2, 2, 3))
    model = potts_model((2, 2), n_states=3, coupling=0.9, field=field, periodic=False)
    with model:
        idata = pm.sample(step=[make_step([model["z"]])], random_seed=5, **SAMPLE_KW)
    states = np.array(list(itertools.product(range(3), repeat=4)))
    z_grid = states.reshape(-1, 2, 2)
    log_pi = np.take_along_axis(field[None], z_grid[..., None], axis=-1)[..., 0].sum((1, 2))
    log_pi = log_pi + 0.9 * (
        (z_grid[:, 0, :] == z_grid[:, 1, :]).sum(1) + (z_grid[:, :, 0] == z_grid[:, :, 1]).sum(1)
    )
    probs = np.exp(log_pi - log_pi.max())
    probs /= probs.sum()
    zmax, crit = max_z_score(posterior_draws(idata, ["z"]), states, probs)
    assert zmax < crit


def test_mixed_model_with_nuts_matches_closed_form():
    """z ~ Cat(w), y ~ N(m_z, s), obs ~ N(y, 1): exact P(z | obs) and E[y | obs]."""
    w = np.array([0.2, 0.5, 0.3])
    m = np.array([-2.0, 0.5, 3.0])
    s, obs = 1.5, 1.2
    with pm.Model():
        z = pm.Categorical("z", p=w)
        y = pm.Normal("y", mu=pm.math.constant(m)[z], sigma=s)
        pm.Normal("obs", mu=y, sigma=1.0, observed=obs)
        step = GibbsWithGradients([z], steps_per_draw=2)
        idata = pm.sample(
            draws=600,
            tune=400,
            chains=2,
            cores=1,
            step=[step],
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    post_z = w * stats.norm.pdf(obs, m, np.sqrt(s**2 + 1))
    post_z /= post_z.sum()
    cond_mean = (m / s**2 + obs) / (1 / s**2 + 1)
    mean_y = post_z @ cond_mean

    zs = idata.posterior["z"].values
    for k in range(3):
        ind = (zs == k).astype(float)
        se = np.sqrt(post_z[k] * (1 - post_z[k]) / checked_ess(ind, f"z = {k}", method="bulk"))
        assert abs(ind.mean() - post_z[k]) < 4.0 * se
    ys = idata.posterior["y"]
    mcse = float(pm.stats.mcse(ys)["y"])
    assert abs(float(ys.mean()) - mean_y) < 4.0 * mcse


def test_hard_constraint_potential_with_first_order_differences():
    """A forbidden configuration written ``switch(cond, -inf, 0)``: first-order differences used
    to be -inf for the constrained sites at every state (NaN relaxed logp), so GibbsWithGradients
    never moved them (P(z0 = 1) was 0.000 against 0.384 exact)."""
    import pytensor.tensor as pt

    with pm.Model():
        z = pm.Bernoulli("z", 0.5, shape=3, initval=np.zeros(3, dtype=int))
        pm.Potential("p", pt.switch(pt.eq(z[0], 1) & pt.eq(z[1], 1), -np.inf, 0) + 0.5 * z.sum())
        idata = pm.sample(step=[GibbsWithGradients([z])], random_seed=4, **SAMPLE_KW)
    states = np.array(list(itertools.product([0, 1], repeat=3)))
    log_pi = 0.5 * states.sum(1) + np.where(states[:, 0] & states[:, 1], -np.inf, 0.0)
    probs = np.exp(log_pi - log_pi.max())
    probs /= probs.sum()
    zmax, crit = max_z_score(posterior_draws(idata, ["z"]), states, probs)
    assert zmax < crit
