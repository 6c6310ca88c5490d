"""``differences="auto"`` in the compiled program: a first-order choice measured again at every
chain's start, before anything is compiled (``pm.sample`` measures it again during tuning; the
program cannot switch kernels between draws).

The trap is issue #28's spike-and-slab written ``dot(X, g * b)``: at the model's initial point
``b = 0`` and first-order differences look exact, but at the chains' jittered starts they do not.
Without the check the program kept first-order differences (acceptance 0.08, an inclusion
probability of 0.16 against the exact 0.04).
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytest

pytest.importorskip("jax", reason="pymc_lbp.sample needs the extra pymc_lbp[jax]")
pytest.importorskip("blackjax", reason="pymc_lbp.sample needs the extra pymc_lbp[jax]")

import pymc_lbp  # noqa: E402
from pymc_lbp import LocallyBalanced  # noqa: E402
from pymc_lbp.whole_model.sampling import _recheck_at_starts  # noqa: E402
from tests.helpers.ess import checked_ess  # noqa: E402
from tests.helpers.spike_and_slab import (  # noqa: E402
    exact_inclusion,
    spike_and_slab_data,
    spike_and_slab_model,
)


def test_spike_and_slab_switches_to_exact_at_the_starts_and_matches_enumeration():
    X, y = spike_and_slab_data()
    exact = exact_inclusion(X, y)
    assert 0.3 < exact[4] < 0.7  # an undecided covariate: a stuck chain cannot match it
    model = spike_and_slab_model(X, y)
    with model:
        step = LocallyBalanced([model["g"]])
        assert step.differences_kind == "gradient"  # the trap, at b = 0
        idata = pymc_lbp.sample(
            1000, tune=200, chains=4, step=[step], random_seed=11, progressbar=False
        )
    assert step.differences_kind == "exact"
    assert "at chain 0's start" in step.differences_reason
    assert bool(idata.sample_stats["exact_differences"].values.all())
    g = idata.posterior["g"].values.astype(float)  # (chain, draw, site)
    est = g.mean(axis=(0, 1))
    mcse = az.mcse(idata.posterior["g"].astype(float))["g"].values
    # an MCSE is sound only from a large enough ESS: the undecided g[4] had 18-77 from 2 chains
    # of 400 draws, 346-417 from 4 of 1,000 (three seeds)
    for j in range(X.shape[1]):
        p = exact[j]
        if min(p, 1 - p) < 1e-6:  # decided: every draw must agree
            assert est[j] == pytest.approx(p, abs=1e-9), j
            continue
        checked_ess(g[:, :, j], f"g[{j}]")
        assert abs(est[j] - p) < 4 * mcse[j], (j, est[j], p, mcse[j])


def test_a_right_first_order_choice_is_kept_and_measured_at_each_start():
    """A logp multilinear in the block (three-site interactions) keeps first-order differences:
    one probe per chain start, none of them switches."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=40)
        w = pm.Normal("w", 0.0, 1.0)
        s = 2 * x - 1
        pm.Potential("triples", w * pm.math.sum(s[:-2] * s[1:-1] * s[2:]))
        step = LocallyBalanced([x])
    assert step.differences_kind == "gradient"
    rng = np.random.default_rng(0)
    names = [v.name for v in model.value_vars]
    starts = [
        tuple(rng.integers(0, 2, 40) if n == "x" else np.asarray(rng.uniform(-1, 1)) for n in names)
        for _ in range(3)
    ]
    _recheck_at_starts(model, [step], starts)
    assert step.differences_kind == "gradient"
    assert step._recheck.n_checks == 3
