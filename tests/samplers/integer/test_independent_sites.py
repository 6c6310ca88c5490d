"""Blocks of conditionally independent sites: every site drawn from its full conditional at once.

When no term of the logp touches two sites of a block (inclusion indicators of a spike-and-slab
prior, occupancy states, a mixture's assignments given its parameters), a default draw of
LocallyBalanced, GibbsWithGradients and PathAuxiliaryLBP gives every site one draw from its full
conditional over its support in one compiled call. Checked here:

* the draw from a fixed state follows the product of the enumerated full conditionals (a block of
  a binary, a 3-category and a small integer site; chi-square over the 2 x 3 x 5 joint states);
* which blocks qualify: coupled sites, a given ``steps_per_draw``, an unbounded integer site and
  SelfBalancing keep single-site steps; the choice and its reason are reported;
* ``pm.sample`` with defaults matches the posterior enumerated over the block.
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_lbp import GibbsWithGradients, LocallyBalanced, PathAuxiliaryLBP, SelfBalancing

SAMPLE = dict(chains=1, cores=1, progressbar=False, compute_convergence_checks=False)
THETA = np.array([0.3, -1.2, 0.8])


def three_kinds():
    """b (binary), c (3 categories), k (DiscreteUniform 0..4): each has its own terms, coupled
    to the others only through a fixed data value, so the sites share no term."""
    with pm.Model() as model:
        b = pm.Bernoulli("b", 0.3)
        c = pm.Categorical("c", p=[0.2, 0.5, 0.3])
        k = pm.DiscreteUniform("k", 0, 4)
        pm.Normal("yb", 1.5 * b, 1.0, observed=THETA[0])
        pm.Normal("yc", pt.as_tensor(np.array([-1.0, 0.0, 1.0]))[c], 0.7, observed=THETA[1])
        pm.Poisson("yk", 0.5 + k, observed=2)
    return model


def exact_conditionals():
    """The three full conditionals (the sites are independent: they are the marginals)."""
    pb = np.array([0.7, 0.3]) * stats.norm.pdf(THETA[0], [0.0, 1.5], 1.0)
    pc = np.array([0.2, 0.5, 0.3]) * stats.norm.pdf(THETA[1], [-1.0, 0.0, 1.0], 0.7)
    pk = stats.poisson.pmf(2, 0.5 + np.arange(5))
    return [p / p.sum() for p in (pb, pc, pk)]


@pytest.mark.parametrize("cls", [LocallyBalanced, GibbsWithGradients, PathAuxiliaryLBP])
def test_a_draw_follows_the_product_of_full_conditionals(cls):
    model = three_kinds()
    with model:
        step = cls(rng=np.random.default_rng(5))
    assert step.independent_sites and step.steps_per_draw == 0
    assert step.differences_kind == "exact" and "share no term" in step.differences_reason
    point = model.initial_point()
    n = 6000
    counts = np.zeros((2, 3, 5))
    for _ in range(n):  # always from the same state: the draw's distribution is one row
        new, _ = step.step(dict(point))
        counts[int(new["b"]), int(new["c"]), int(new["k"])] += 1
    pb, pc, pk = exact_conditionals()
    expected = n * np.einsum("i,j,k->ijk", pb, pc, pk)
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    # 29 degrees of freedom; fails with probability 1e-4 when the draw is right
    assert chi2 < stats.chi2.ppf(1 - 1e-4, df=29), chi2


def test_which_blocks_are_drawn_at_once():
    with pm.Model():
        x = pm.Bernoulli("x", 0.5, shape=4)
        pm.Potential("chain", 0.8 * pt.sum(pt.eq(x[1:], x[:-1])))
        coupled = LocallyBalanced([x])
    assert not coupled.independent_sites and coupled.steps_per_draw == 4
    model = three_kinds()
    with model:
        asked = LocallyBalanced(steps_per_draw=3)
        learner = SelfBalancing()
        one = LocallyBalanced([model["b"]])
    assert not asked.independent_sites and asked.steps_per_draw == 3
    assert not learner.independent_sites
    assert not one.independent_sites  # a single site: its own single-site steps
    with pm.Model():
        g = pm.Bernoulli("g", 0.5, shape=3)
        n = pm.Poisson("n", 3.0)  # unbounded support: no draw over its support
        pm.Normal("y", g.sum() * 0.1, 1.0, observed=0.2)
        unbounded = LocallyBalanced([g, n])
    assert not unbounded.independent_sites


def test_spike_and_slab_indicators_match_enumeration():
    """Indicators that set their coefficient's prior scale, coefficients fixed by another step's
    absence (the block is the whole model): the posterior of the indicators is the product of
    their conditionals; pm.sample with defaults matches it."""
    beta = np.array([0.02, 1.1, -0.04, 0.6])
    with pm.Model():
        g = pm.Bernoulli("g", 0.5, shape=4)
        pm.Potential(
            "beta_prior",
            pm.logp(pm.Normal.dist(0.0, pm.math.switch(g, 1.0, 0.05)), beta).sum(),
        )
        idata = pm.sample(2000, tune=100, step=[LocallyBalanced([g])], random_seed=3, **SAMPLE)
    logp = np.stack([stats.norm.logpdf(beta, 0, 0.05), stats.norm.logpdf(beta, 0, 1.0)], axis=1)
    p1 = 1 / (1 + np.exp(logp[:, 0] - logp[:, 1]))
    freq = idata.posterior["g"].values[0].mean(axis=0)
    se = np.sqrt(p1 * (1 - p1) / 2000)  # independent draws: every draw is a fresh Gibbs draw
    assert np.all(np.abs(freq - p1) < 4.5 * se + 1e-9), (freq, p1)
    assert "integer_accept" in idata.sample_stats


def test_enumerated_product_matches_joint_enumeration():
    """The reference itself: for the toy, the joint posterior over the block enumerated from
    the model's logp factorises into the three conditionals used above."""
    model = three_kinds()
    logp = model.compile_logp()
    states = list(itertools.product(range(2), range(3), range(5)))
    lp = np.array([logp({"b": b, "c": c, "k": k}) for b, c, k in states]).reshape(2, 3, 5)
    joint = np.exp(lp - lp.max())
    joint /= joint.sum()
    pb, pc, pk = exact_conditionals()
    np.testing.assert_allclose(joint, np.einsum("i,j,k->ijk", pb, pc, pk), rtol=1e-9)
