"""``differences="auto"`` measured again where the chain is (issue #28, item 0).

A spike-and-slab regression written ``dot(X, g * b)`` is the trap: at the start ``b = 0``, no
difference depends on the indicators ``g`` and first-order differences equal the exact ones at
every probed move, but the logp is quadratic in ``g``; once NUTS moves ``b`` first-order
proposals are rejected almost always and the indicators freeze. The posterior inclusion
probabilities are known in closed form (``b`` integrated out: ``y | g ~ N(0, s^2 I + tau^2 X_g
X_g^T)``), enumerated here over all ``2^p`` indicator vectors by independent numpy/scipy code.
"""

from __future__ import annotations

import logging

import numpy as np
import pymc as pm
import pytest

from pymc_lbp import LocallyBalanced
from pymc_lbp.step_methods.differences_choice import recheck_due
from tests.helpers.ess import checked_ess
from tests.helpers.spike_and_slab import (
    exact_inclusion,
    spike_and_slab_data,
    spike_and_slab_model,
)


def test_recheck_schedule():
    assert [t for t in range(40) if recheck_due(t)] == [1, 2, 4, 8, 16, 32]


def test_spike_and_slab_switches_to_exact_and_matches_enumeration(caplog):
    X, y = spike_and_slab_data()
    exact = exact_inclusion(X, y)
    assert 0.3 < exact[4] < 0.7  # an undecided covariate: a frozen chain cannot match it
    model = spike_and_slab_model(X, y)
    with model:
        step = LocallyBalanced([model["g"]])
        # the trap: at the start (b = 0) first-order differences look exact
        assert step.differences_kind == "gradient"
        assert "multilinear" not in step.differences_reason
        with caplog.at_level(logging.INFO, logger="pymc_lbp"):
            idata = pm.sample(
                1000,
                tune=200,
                chains=4,
                cores=1,
                step=[step],
                random_seed=11,
                progressbar=False,
                compute_convergence_checks=False,
            )
    assert step.differences_kind == "exact"
    assert "tuning draw 1" in step.differences_reason
    assert "switched to exact neighbour differences" in caplog.text
    assert bool(idata.sample_stats["exact_differences"].values.all())
    g = idata.posterior["g"].values  # (chain, draw, site)
    est = g.mean(axis=(0, 1))
    for j in range(X.shape[1]):
        p = exact[j]
        if min(p, 1 - p) < 1e-6:  # decided: every draw must agree
            assert est[j] == pytest.approx(p, abs=1e-9), j
            continue
        # the standard error below is sound only from a large enough ESS: the undecided g[4]
        # had 44-77 from 2 chains of 400 draws, 327-357 from 4 of 1,000 (three seeds)
        ess = checked_ess(g[:, :, j], f"g[{j}]")
        # five Monte Carlo standard errors of a proportion at the chain's ESS
        assert abs(est[j] - p) < 5 * np.sqrt(p * (1 - p) / ess), (j, est[j], p, ess)


def test_first_order_choice_kept_where_it_stays_exact():
    """A logp multilinear in the block (three-site interactions: not pairwise) keeps
    first-order differences through tuning: the re-checks run and do not switch a right
    choice."""
    with pm.Model():
        x = pm.Bernoulli("x", 0.5, shape=40)
        s = 2 * x - 1
        pm.Potential("triples", 0.3 * pm.math.sum(s[:-2] * s[1:-1] * s[2:]))
        step = LocallyBalanced([x])
        assert step.differences_kind == "gradient"
        pm.sample(
            5,
            tune=9,
            chains=1,
            step=[step],
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert step.differences_kind == "gradient"
    assert step._recheck.n_checks == 4  # before tuning draws 1, 2, 4 and 8
