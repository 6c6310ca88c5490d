"""``differences="auto"`` (step_methods/differences_choice.py): the rule, the measurements it rests
on, and the samplers' defaults on models where first-order differences are exact, poor, or
absent."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_lbp import GibbsWithGradients, LocallyBalanced, PathAuxiliaryLBP
from pymc_lbp.step_methods import neighbour_step
from pymc_lbp.step_methods.differences_choice import (
    MIN_ACCEPTANCE,
    SMALL_BLOCK_SLOTS,
    Probe,
    choose,
    probe_first_order,
)
from tests.helpers.ess import checked_mcse

SAMPLE = dict(chains=1, cores=1, progressbar=False, compute_convergence_checks=False)


# -- the rule --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("probe", "n_slots", "kind", "says"),
    [
        (Probe(0.0, True, 0.1, 40), 10_000, "gradient", "equal the exact ones"),
        (Probe(2.0, False, 0.9, 40), SMALL_BLOCK_SLOTS, "exact", "cheap on this block"),
        (Probe(2.0, False, MIN_ACCEPTANCE, 40), SMALL_BLOCK_SLOTS + 1, "gradient", "accepted at"),
        (Probe(math.inf, False, 0.49, 40), SMALL_BLOCK_SLOTS + 1, "exact", "only"),
    ],
)
def test_rule(probe, n_slots, kind, says):
    choice = choose(probe, n_slots)
    assert choice.kind == kind
    assert says in choice.reason
    assert choice.max_error == probe.max_error
    assert choice.acceptance == probe.acceptance
    assert choice.n_compared == probe.n_compared


# -- models --------------------------------------------------------------------------------------
def user_ising(n: int = 5, beta: float = 0.4) -> pm.Model:
    """The Ising lattice as users write it: spins from a Bernoulli image, ``pt.roll`` couplings."""
    with pm.Model() as model:
        b = pm.Bernoulli("b", p=0.5, shape=(n, n))
        s = 2 * b - 1
        pm.Potential("coupling", beta * pt.sum(s * pt.roll(s, 1, 0) + s * pt.roll(s, 1, 1)))
    return model


PSI, P_DETECT, VISITS, SITES = 0.6, 0.35, 4, 80


def occupancy_data(seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.random(SITES) < PSI
    return (z[:, None] & (rng.random((SITES, VISITS)) < P_DETECT)).astype(int)


def occupancy(y: np.ndarray) -> pm.Model:
    """Occupancy with known psi and p, written as users write it (the gallery's likelihood).

    Given psi and p the sites are independent: a site with a detection is occupied, an undetected
    one with probability ``q = psi (1-p)^J / (psi (1-p)^J + 1 - psi)`` (closed form).
    """
    with pm.Model() as model:
        z = pm.Bernoulli("z", PSI, shape=SITES, initval=np.ones(SITES, dtype=int))
        pm.Bernoulli("y", p=z[:, None] * P_DETECT, observed=y)
    return model


def test_multilinear_model_takes_first_order_differences_measured_exact(general_paths):
    """The probe on a multilinear lattice (by default a pairwise binary block takes its
    couplings without probing: ``tests/samplers/pairwise/test_pairwise.py``)."""
    model = user_ising()
    for cls in (LocallyBalanced, GibbsWithGradients, PathAuxiliaryLBP):
        with model, warnings.catch_warnings():
            warnings.simplefilter("error")
            step = cls([model["b"]])
        choice = step.differences_choice
        assert step.differences_kind == choice.kind == "gradient", cls
        assert choice.n_compared > 0
        assert choice.max_error < 1e-8
        assert step.differences_reason == choice.reason


def test_probe_measures_the_gap_of_first_order_differences():
    """On the occupancy model, emptying a site with a detection has exact difference -inf and a
    finite first-order one: the probe reports an infinite error."""
    model = occupancy(occupancy_data())
    with model:
        step = PathAuxiliaryLBP([model["z"]], differences="gradient")
    probe = probe_first_order(step.differences, step._x0, np.negative)  # any log g works
    assert probe is not None and not probe.exact_match
    assert probe.max_error == math.inf
    # deterministic: the probe has its own seeded generator
    assert probe_first_order(step.differences, step._x0, np.negative) == probe


@pytest.mark.parametrize("steps", [None, SITES])
@pytest.mark.parametrize("cls", [LocallyBalanced, GibbsWithGradients, PathAuxiliaryLBP])
def test_occupancy_defaults_choose_exact_and_match_the_closed_form(cls, steps):
    """The gallery's bug: first-order differences left the occupancy states at their start
    (acceptance 0). With defaults the occupancy states, which share no term, are drawn from
    their full conditionals at once; with single-site steps asked for (``steps_per_draw``) every
    sampler measures the first-order differences, takes exact ones, and either way the chain
    recovers the closed-form posterior.

    Threshold: the number of occupied undetected sites S has mean ``n_u q``; ArviZ's MCSE of
    the chain's mean of S (400 draws) gives a z-score; |z| < 4 fails with probability 6e-5 if the
    MCSE is right, and a chain stuck at its start (S = n_u, MCSE 0) fails with z = inf.
    """
    y = occupancy_data()
    model = occupancy(y)
    with model:
        step = cls([model["z"]], steps_per_draw=steps)
    assert step.differences_kind == "exact"
    if steps is None:
        assert step.independent_sites and step.steps_per_draw == 0
        assert "share no term" in step.differences_reason
    else:
        assert not step.independent_sites
        assert SITES > SMALL_BLOCK_SLOTS  # the acceptance branch of the rule, not small block
        assert "accepted at rate" in step.differences_reason
        assert step.differences_choice.acceptance < MIN_ACCEPTANCE
    with model:
        idata = pm.sample(draws=400, tune=50, step=[step], random_seed=11, **SAMPLE)
    assert bool(idata.sample_stats["exact_differences"].all())
    z = idata.posterior["z"].values[0]
    detected = y.any(axis=1)
    assert np.all(z[:, detected] == 1)
    ratio = PSI * (1 - P_DETECT) ** VISITS
    q = ratio / (ratio + 1 - PSI)
    s = z[:, ~detected].sum(axis=1).astype(float)
    mcse = checked_mcse(s, "undetected sites occupied")
    assert mcse > 0
    assert abs(s.mean() - (~detected).sum() * q) / mcse < 4


def test_small_block_with_poor_first_order_differences_takes_exact_ones(general_paths):
    """Spike-and-slab: the indicator sets the prior scale of its coefficient (not multilinear).
    (By default the indicators, a pairwise binary block without couplings, take exact
    differences from their fields.)"""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 6))
    with pm.Model():
        g = pm.Bernoulli("g", 0.3, shape=6)
        beta = pm.Normal("beta", 0.0, 0.05 + 2.0 * g, shape=6)
        pm.Normal("y", X @ beta, 1.0, observed=X[:, 0] * 1.5 + rng.normal(size=30))
        default = LocallyBalanced([g])
        step = LocallyBalanced([g], steps_per_draw=6)  # single-site steps: the rule decides
    assert default.independent_sites and default.differences_kind == "exact"
    assert step.differences_kind == "exact"
    assert "cheap on this block" in step.differences_reason
    assert step.differences_choice.max_error > 0.1


def test_model_without_relaxation_takes_exact_differences_and_says_why():
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=3)
        pm.Potential("bad", pt.sum(pt.floor(pt.sum(x) / 2.0)))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            step = LocallyBalanced([x])
    assert step.differences_kind == "exact"
    assert "no differentiable extension" in step.differences_reason


def test_choice_is_logged(caplog, monkeypatch):
    from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel

    model = user_ising(3)
    with model, caplog.at_level("INFO", logger="pymc_lbp"):
        PathAuxiliaryLBP([model["b"]])
    assert any(
        "exact neighbour differences (pairwise binary block" in r.message for r in caplog.records
    )
    caplog.clear()
    monkeypatch.setattr(pairwise_kernel, "ENABLED", False)
    with model, caplog.at_level("INFO", logger="pymc_lbp"):
        PathAuxiliaryLBP([model["b"]])
    assert any("gradient neighbour differences (first-order" in r.message for r in caplog.records)


def test_explicit_gradient_on_a_piecewise_model_warns_with_the_measured_gap():
    with pm.Model():
        k = pm.Poisson("k", mu=3.0)
        pm.Potential("thr", pt.switch(pt.gt(k, 4), -1.0, 0.0))
        with pytest.warns(UserWarning, match=r"piecewise constant.*differ from the exact"):
            step = LocallyBalanced([k], differences="gradient")
    assert step.differences_kind == "gradient"
    assert step.differences_reason == "differences='gradient'"


def test_explicit_choices_are_kept():
    model = user_ising(3)
    with model:
        assert LocallyBalanced([model["b"]], differences="exact").differences_kind == "exact"
        assert GibbsWithGradients([model["b"]], differences="gradient").differences_kind == (
            "gradient"
        )


def test_expensive_exact_differences_warn_about_their_cost():
    """A term that couples the whole block, on more than EXPENSIVE_EXACT_EVALS sites: each step
    evaluates it at every neighbour; the user is told, with what would make it cheaper."""
    n = neighbour_step.EXPENSIVE_EXACT_EVALS + 1
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=n)
        pm.Potential("total", -((pt.sum(x) - n / 2) ** 2) / n)
        expected = f"logp evaluations per step on this block of {n} moves"
        with pytest.warns(UserWarning, match=expected):
            PathAuxiliaryLBP([x], differences="exact")
