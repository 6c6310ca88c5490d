"""The PyMC step-method contract: stats, seeds, pickling, tuning, register()."""

from __future__ import annotations

import cloudpickle
import numpy as np
import pymc as pm
import pytest

import pymc_lbp
from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.models import ising_model

SMALL = dict(draws=60, tune=20, chains=2, progressbar=False, compute_convergence_checks=False)


def mixed_model():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.4, shape=4)
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu=mu + x.sum(), sigma=1.0, observed=[1.0, 2.0])
    return model


def test_stats_present_with_declared_dtypes_next_to_nuts():
    model = mixed_model()
    with model:
        step = LocallyBalanced([model["x"]], steps_per_draw=2)
        idata = pm.sample(step=[step], cores=1, random_seed=1, **SMALL)
    ss = idata.sample_stats
    for name, (dtype, shape) in LocallyBalanced.stats_dtypes_shapes.items():
        assert shape == []
        assert name in ss, name
        assert ss[name].dtype == np.dtype(dtype), name
    # NUTS's own stats are still there and ours use none of their names
    assert "step_size" in ss and "diverging" in ss
    nuts_names = set(pm.NUTS.stats_dtypes_shapes)
    assert not nuts_names & set(LocallyBalanced.stats_dtypes_shapes)
    assert ss["jump_distance"].values.max() <= 2
    assert ss["logp_evals"].values.min() >= 3  # one call per step + the draw's initial call


@pytest.mark.parametrize("cores", [1, 2])
def test_same_seed_same_draws(cores):
    model = ising_model((3, 3), 0.4, 0.1)
    runs = []
    for _ in range(2):
        with model:
            step = GibbsWithGradients([model["x"]], steps_per_draw=2)
            idata = pm.sample(step=[step], cores=cores, random_seed=123, **SMALL)
        runs.append(idata.posterior["x"].values)
    np.testing.assert_array_equal(runs[0], runs[1])
    assert runs[0].std() > 0


def test_pickle_roundtrip_and_spawn():
    model = mixed_model()
    with model:
        step = GibbsWithGradients([model["x"]], steps_per_draw=2)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    x = np.array([1, 0, 1, 1])
    np.testing.assert_allclose(clone.differences(x)[1], step.differences(x)[1])
    with model:
        idata = pm.sample(step=[step], cores=2, mp_ctx="spawn", random_seed=3, **SMALL)
    assert idata.posterior["x"].shape == (2, 60, 4)


def test_tuning_frozen_and_sampling_state_roundtrip():
    model = ising_model((2, 2), 0.3, 0.0)
    with model:
        step = LocallyBalanced([model["x"]])
        assert step.tune
        pm.sample(step=[step], cores=1, random_seed=0, **SMALL)
    assert not step.tune
    step.reset_tuning()
    assert step.tune
    state = step.sampling_state
    step.stop_tuning()
    step.rng.random(5)
    step.sampling_state = state
    assert step.tune
    assert step.sampling_state.rng == state.rng


def test_register_round_trip():
    assert pymc_lbp.registered() is None  # importing changed nothing
    model = ising_model((2, 3), 0.3, 0.0)
    try:
        pymc_lbp.register()
        assert pymc_lbp.registered() is LocallyBalanced
        with model:
            idata = pm.sample(
                cores=1, random_seed=0, locally_balanced={"balancing": "barker"}, **SMALL
            )
        assert "jump_distance" in idata.sample_stats
        pymc_lbp.register(GibbsWithGradients)
        assert pymc_lbp.registered() is GibbsWithGradients
        assert (
            sum(
                isinstance(m, type) and issubclass(m, pymc_lbp.DiscreteStep)
                for m in pm.STEP_METHODS
            )
            == 1
        )
    finally:
        pymc_lbp.unregister()
    assert pymc_lbp.registered() is None
    with model:
        idata = pm.sample(cores=1, random_seed=0, **SMALL)
    # PyMC's BinaryGibbsMetropolis again (it records no stats at all)
    assert "jump_distance" not in getattr(idata, "sample_stats", {})
