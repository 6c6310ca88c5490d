"""The PyMC step-method contract: stats, seeds, pickling, tuning, register()."""

from __future__ import annotations

import inspect
import warnings

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_lbp
from pymc_lbp import GibbsWithGradients, LocallyBalanced, SelfBalancing
from pymc_lbp.models import ising_model

SMALL = dict(draws=60, tune=20, chains=2, progressbar=False, compute_convergence_checks=False)
QUIET = dict(progressbar=False, compute_convergence_checks=False)
FAST_COMPILE = {"compile_kwargs": {"mode": "FAST_COMPILE"}}


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
    assert "model_logp" not in step.stats_dtypes_shapes  # next to NUTS: NUTS's lp only
    for name, (dtype, shape) in step.stats_dtypes_shapes.items():
        assert shape == []
        if name == "tune":  # ArviZ drops it (warmup groups instead)
            continue
        assert name in ss, name
        assert ss[name].dtype == np.dtype(dtype), name
    # NUTS's own stats are still there and ours use none of their names
    assert "step_size" in ss and "diverging" in ss
    nuts_names = set(pm.NUTS.stats_dtypes_shapes)
    assert not nuts_names & set(step.stats_dtypes_shapes)
    assert ss["sites_changed"].values.max() <= 2
    assert ss["logp_evals"].values.min() >= 3  # one call per step + the draw's initial call
    assert (ss["mh_steps"].values == 2).all()


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
    """Steps survive cloudpickle, and ``pm.sample(cores=2, mp_ctx="spawn")`` runs them in fresh
    processes; the SelfBalancing step next to them learns its own function in each chain's
    process (one spawn run for both: each spawned process imports PyMC anew). A discrete model
    only: NUTS next to ours is in test_stats_present_with_declared_dtypes_next_to_nuts, and
    here it would only be compiled again in each spawned process."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.4, shape=4)
        pm.Potential("x_all", pt.switch(pt.gt(x.sum(), 2), 0.5, 0.0))  # not a pairwise block
        z = pm.Bernoulli("z", logit_p=np.linspace(-1, 1, 4), shape=4)
        pm.Potential("chain", ((2 * z[1:] - 1) * (2 * z[:-1] - 1)).sum())
        step = GibbsWithGradients([model["x"]], steps_per_draw=2)
        learner = SelfBalancing([z], family="lsb1", n_particles=3, steps_per_draw=1)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    x = np.array([1, 0, 1, 1])
    np.testing.assert_allclose(clone.differences(x)[1], step.differences(x)[1])
    with model:
        idata = pm.sample(
            step=[step, learner], cores=2, mp_ctx="spawn", random_seed=3, **SMALL
        )  # fmt: skip
    assert idata.posterior["x"].shape == (2, 60, 4)
    w = idata.sample_stats["lsb_weight_sqrt"].values
    assert w.shape == (2, 60) and np.all(w == w[:, :1])  # frozen after tuning
    assert not np.allclose(w[:, 0], 0.25)  # each chain learned in its own process


def test_tuning_frozen_and_sampling_state_roundtrip():
    model = ising_model((2, 2), 0.3, 0.0)
    with model:
        step = LocallyBalanced([model["x"]], steps_per_draw=1)
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
        assert "sites_changed" in idata.sample_stats
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
    assert "sites_changed" not in getattr(idata, "sample_stats", {})


# -- defaults and consistent options (issue #11.1-2) -------------------------------------------
ALL = {
    "LocallyBalanced": pymc_lbp.LocallyBalanced,
    "GibbsWithGradients": pymc_lbp.GibbsWithGradients,
    "PathAuxiliaryLBP": pymc_lbp.PathAuxiliaryLBP,
    "SelfBalancing": pymc_lbp.SelfBalancing,
    "NeuralBlock": pymc_lbp.NeuralBlock,
}


@pytest.mark.parametrize("name", list(ALL))
def test_one_name_one_default(name):
    params = inspect.signature(ALL[name].__init__).parameters
    # the block sampler uses no neighbour differences: its option logp says how it scores blocks
    assert params["logp" if name == "NeuralBlock" else "differences"].default == "auto"
    assert ("differences" in params) == (name != "NeuralBlock")
    assert params["steps_per_draw"].default is None
    assert not {"hidden_units", "parametrization", "compiled_kernel", "compiled"} & set(params)
    doc = ALL[name].__doc__
    for stat in ("tune", "accept", "n_accepted", "mh_steps", "model_logp", "sites_changed"):
        assert stat in doc, (name, stat)
    assert "``accepted``" not in doc
    # PyMC's arguments: **kwargs passed on to DiscreteStep, their docstring entry written once
    assert params["kwargs"].kind is inspect.Parameter.VAR_KEYWORD
    assert "``compile_kwargs``" in doc and "{pymc_arguments}" not in doc


def test_default_draw_is_one_sweep():
    """steps_per_draw=None: one step per site (single-site samplers and NeuralBlock's site
    updates), ceil(n_sites / E[R]) for the path sampler, decided from the current scale."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=7)
        c = pm.Categorical("c", p=[0.2, 0.3, 0.5], shape=2)
        pm.Potential("pair", 0.3 * pt.eq(x[0], x[1]))
    with model:
        for cls in (LocallyBalanced, GibbsWithGradients, pymc_lbp.SelfBalancing):
            assert cls([x, c], **FAST_COMPILE).steps_per_draw == 9
        assert pymc_lbp.NeuralBlock([x, c], blocks=None, **FAST_COMPILE).steps_per_draw == 9
        # E[R] = s + (1 - s) U with the single-site share s = 0.1
        pal = pymc_lbp.PathAuxiliaryLBP([x, c], path_scale=2.5, **FAST_COMPILE)
        assert pal.steps_per_draw == 4  # ceil(9 / 2.35)
        pal = pymc_lbp.PathAuxiliaryLBP([x, c], path_scale=5, **FAST_COMPILE)
        assert pal.steps_per_draw == 2  # ceil(9 / 4.6)
        pal = pymc_lbp.PathAuxiliaryLBP([x, c], **FAST_COMPILE)
        assert pal.steps_per_draw == 9  # untuned: U = 1
        pal.path_log_u = np.log(4.0)
        assert pal.steps_per_draw == 3  # ceil(9 / 3.7)
        pal.steps_per_draw = 5  # an explicit value replaces the rule
        assert pal.steps_per_draw == 5


# -- pm.set_data between two pm.sample calls with one step (issue #14.2) ------------------------
SET_DATA_STEPS = {
    "LocallyBalanced": lambda z: LocallyBalanced([z]),
    "GibbsWithGradients": lambda z: GibbsWithGradients([z]),
    "SelfBalancing": lambda z: pymc_lbp.SelfBalancing([z], n_particles=2),
    "PathAuxiliaryLBP": lambda z: pymc_lbp.PathAuxiliaryLBP([z]),
}
# (NeuralBlock is not here: with blocks=None its site updates evaluate every state afresh, so
# this test passed on the old code too; its neural units used the carried logp, now fresh)


@pytest.mark.parametrize("name", list(SET_DATA_STEPS))
def test_reused_step_sees_set_data(name):
    """The issue's example: after set_data flips the sign of d, P(z_i = 1) = 1/(1 + e^10),
    so a correct chain's mean is < 1e-3 in expectation; the stale cache gave 1.0."""
    with pm.Model():
        d = pm.Data("d", np.full(3, 5.0))
        z = pm.Bernoulli("z", 0.5, shape=3)
        pm.Potential("p", (d * (2 * z - 1)).sum())
        step = SET_DATA_STEPS[name](z)
        kw = dict(draws=100, tune=20, chains=1, step=[step], random_seed=1, progressbar=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "did not move" at the mode
            first = pm.sample(**kw, compute_convergence_checks=False)
            pm.set_data({"d": np.full(3, -5.0)})
            second = pm.sample(**kw, compute_convergence_checks=False)
    assert first.posterior["z"].values[0, -50:].mean() > 0.9
    assert second.posterior["z"].values[0, -50:].mean() < 0.1


# -- warnings after tuning (issue #11.1) --------------------------------------------------------
def test_warns_when_the_chain_never_moved_during_tuning():
    """Two sites constrained equal: no single-site move is ever possible from 00."""
    with pm.Model():
        x = pm.Bernoulli("x", 0.5, shape=2, initval=np.array([0, 0]))
        pm.Potential("equal", pt.switch(pt.eq(x[0], x[1]), 0.0, -np.inf))
        step = LocallyBalanced([x])
        with pytest.warns(UserWarning, match="did not move during tuning"):
            pm.sample(draws=5, tune=30, chains=1, step=[step], random_seed=1, **QUIET)


def test_no_tuning_warning_on_a_healthy_chain():
    with pm.Model():
        x = pm.Bernoulli("x", 0.5, shape=4)
        step = pymc_lbp.PathAuxiliaryLBP([x])
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            pm.sample(draws=5, tune=100, chains=1, step=[step], random_seed=1, **QUIET)


def _tuned(step, accepts):
    step.reset_tuning()
    for a in accepts:
        step._record_tuning(float(a), 1)


def test_warns_when_tuned_acceptance_is_far_from_its_target():
    """The rule (tested on the record, whatever the adaptation does): second-half mean
    acceptance further than ACCEPT_TOLERANCE from target_accept, unless the scale is at the
    bound that explains it (acceptance above target with paths as long as the block)."""
    from pymc_lbp.step_methods.base import ACCEPT_TOLERANCE

    with pm.Model():
        x = pm.Bernoulli("x", 0.5, shape=6)
        # independent sites: single-site steps only when asked for (steps_per_draw)
        pal = pymc_lbp.PathAuxiliaryLBP([x], steps_per_draw=2)
        lb = LocallyBalanced([x], steps_per_draw=6)
    target = pal.target_accept
    low = [0.9] * 20 + [target - ACCEPT_TOLERANCE - 0.05] * 20  # the second half counts
    _tuned(pal, low)
    pal.path_log_u_bar = pal.path_log_u = 0.0
    with pytest.warns(UserWarning, match="far from its target.*Even paths of about one site"):
        pal.stop_tuning()
    _tuned(pal, [min(1.0, target + ACCEPT_TOLERANCE + 0.05)] * 40)
    pal.path_log_u_bar = pal.path_log_u = np.log(3.3)
    with pytest.warns(UserWarning, match="far from its target.*Tune longer"):
        pal.stop_tuning()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _tuned(pal, [0.99] * 40)
        pal.path_log_u_bar = pal.path_log_u = np.log(6.0)  # at the block size: expected
        pal.stop_tuning()
        _tuned(pal, [target - ACCEPT_TOLERANCE + 0.05] * 40)  # within tolerance
        pal.stop_tuning()
        _tuned(pal, [0.05] * 10)  # too few tuning draws to judge
        pal.stop_tuning()
        _tuned(lb, [0.05] * 40)  # no target: LocallyBalanced tunes nothing
        lb.stop_tuning()
