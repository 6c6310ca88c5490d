"""Bad input gets a clear error at construction; -inf neighbours and huge logits are handled."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.blocking import DictToArrayBijection

from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.samplers.balancing import resolve_balancing
from tests.helpers.ess import checked_ess


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
    """An impossible start is judged at the first draw, where pm.sample gives it (issue #28,
    item 4): the step builds, the draw refuses with the documented ValueError."""
    with pm.Model() as model:
        z = pm.Categorical("z", p=[0.5, 0.5, 0.0], initval=2)
        step = LocallyBalanced([z])
    q0 = DictToArrayBijection.map({"z": np.array(2)})
    with model, pytest.raises(ValueError, match="starting point has log-probability -inf"):
        step.astep(q0)


def _no_adjacent_ones():
    """Five Bernoulli(0.6) sites, no two adjacent ones: the default start (all ones) is
    impossible."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.6, shape=5)
        pm.Potential("no_adjacent", pt.switch(pt.any(x[:-1] * x[1:]), -np.inf, 0.0))
    states = np.array(list(itertools.product([0, 1], repeat=5)))
    ok = ~np.any(states[:, :-1] * states[:, 1:], axis=1)
    w = np.where(ok, 0.6 ** states.sum(1) * 0.4 ** (5 - states.sum(1)), 0.0)
    return model, (w / w.sum()) @ states


@pytest.mark.parametrize("cls", [LocallyBalanced, GibbsWithGradients])
def test_initvals_mend_an_impossible_default_start(cls):
    """The advice of the start error works: a step built at an impossible default start
    samples from pm.sample(initvals=...) (before: the step refused at construction, so
    initvals could not help), and matches the enumerated marginals."""
    model, exact = _no_adjacent_ones()
    assert not np.isfinite(model.compile_logp()(model.initial_point()))
    with model:
        step = cls([model["x"]])
        idata = pm.sample(
            1200,  # the sites' ESS 201 at 600 draws, the floor 200
            tune=100,
            chains=1,
            step=[step],
            initvals={"x": np.zeros(5, dtype=np.int64)},
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
        xs = idata.posterior["x"].values[0]
        assert not np.any(xs[:, :-1] * xs[:, 1:])
        ess = np.array([checked_ess(xs[None, :, j], f"x[{j}]", method="bulk") for j in range(5)])
        se = np.sqrt(exact * (1 - exact) / ess)
        assert np.all(np.abs(xs.mean(0) - exact) < 5 * se), (xs.mean(0), exact)
        # without initvals the first draw says what is wrong and what to do
        with pytest.raises(ValueError, match="Give a feasible start via pm.sample"):
            pm.sample(5, tune=5, chains=1, step=[cls([model["x"]])], progressbar=False)


def test_categorical_start_out_of_range_names_the_variable():
    """A categorical start outside 0..K-1 is a ValueError naming the variable and the site,
    not an IndexError from the neighbour code (issue #28, item 3), whether given to the step or
    through pm.sample(initvals=...) after register()."""
    import pymc_lbp

    with pm.Model():
        c = pm.Categorical("c", p=[0.2, 0.3, 0.5], shape=2)
        with pytest.raises(ValueError, match=r"c\[0\] = 5, which is not a value of 'c'"):
            LocallyBalanced([c], initial_point={"c": np.array([5, 0])})
        pymc_lbp.register()
        try:
            with pytest.raises(ValueError, match=r"c\[0\] = 5.*categorical: 0 \.\. 2"):
                pm.sample(5, tune=5, chains=1, initvals={"c": np.array([5, 0])})
        finally:
            pymc_lbp.unregister()


def test_integer_start_outside_its_support_names_the_variable():
    """Issue #55.13: a DiscreteUniform start outside its support was refused as 'the starting
    point has log-probability -inf (variables [...])', without the variable."""
    with pm.Model():
        x = pm.DiscreteUniform("x", 0, 5)
        y = pm.DiscreteUniform("y", 0, 5, shape=3)
        step = LocallyBalanced([x, y])
        with pytest.raises(
            ValueError, match=r"y\[1\] = 9, which is not a value of 'y' \(integer: 0 \.\. 5\)"
        ):
            pm.sample(5, tune=0, chains=1, step=step, initvals={"y": np.array([1, 9, 2])})


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


# -- one clear error for every sampler (issue #14.6, #14.8) ------------------------------------
def _all_samplers(**kw):
    from pymc_lbp import NeuralBlock, PathAuxiliaryLBP, SelfBalancing

    return {
        "LocallyBalanced": lambda v=None: LocallyBalanced(v, **kw),
        "GibbsWithGradients": lambda v=None: GibbsWithGradients(v, **kw),
        "PathAuxiliaryLBP": lambda v=None: PathAuxiliaryLBP(v, **kw),
        "SelfBalancing": lambda v=None: SelfBalancing(v, **kw),
        "NeuralBlock": lambda v=None: NeuralBlock(v, blocks=None, **kw),
    }


SAMPLER_NAMES = list(_all_samplers())


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_model_without_free_variables(sampler):
    with pm.Model():
        pm.Potential("p", pt.constant(1.0))
        with pytest.raises(ValueError, match=rf"^{sampler}: nothing to sample: vars=None takes"):
            _all_samplers()[sampler]()
        with pytest.raises(ValueError, match=rf"^{sampler}: nothing to sample: vars is empty"):
            _all_samplers()[sampler]([])


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_an_unknown_option_is_named_with_the_class(sampler):
    """PyMC's step arguments pass through ``**kwargs`` to DiscreteStep, whose name Python would
    give for a misspelt option: the error names the class the user called, and its options."""
    with pm.Model():
        pm.Bernoulli("x", p=0.5, shape=2)
        with pytest.raises(TypeError, match=rf"^{sampler}\(\) got an unexpected keyword argument "
                           r"'step_per_draw'; its options: .*steps_per_draw"):  # fmt: skip
            _all_samplers(step_per_draw=3)[sampler]()


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_same_variable_twice(sampler):
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.5, shape=2)
        pm.Bernoulli("y", p=0.5)
        match = rf"^{sampler}: variable 'x' appears more than once in vars"
        with pytest.raises(ValueError, match=match):
            _all_samplers()[sampler]([x, model["y"], x])
        with pytest.raises(ValueError, match=match):  # an RV and its value variable
            _all_samplers()[sampler]([x, model.rvs_to_values[x]])


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_steps_per_draw_out_of_range_is_refused_before_compiling(sampler):
    with pm.Model():
        x = pm.Bernoulli("x", p=0.5, shape=2)
        with pytest.raises(ValueError, match=r"steps_per_draw=1000000000000 is out of range"):
            _all_samplers(steps_per_draw=10**12)[sampler]([x])
        step = _all_samplers(steps_per_draw=10**6)[sampler]([x])  # the bound itself is fine
        assert step.steps_per_draw == 10**6
        with pytest.raises(ValueError, match="out of range"):
            step.steps_per_draw = 10**6 + 1


def test_register_refuses_neural_block():
    import pymc_lbp

    with pytest.raises(
        ValueError, match="NeuralBlock cannot be registered: .*one motif chosen by you"
    ):
        pymc_lbp.register(pymc_lbp.NeuralBlock)
    with pytest.raises(ValueError, match="NeuralMixedBlock cannot be registered: .*continuous"):
        pymc_lbp.register(pymc_lbp.NeuralMixedBlock)
    assert pymc_lbp.registered() is None


def _not_relaxable_model():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.5, shape=3)
        pm.Potential("bad", pt.sum(pt.floor(pt.sum(x) / 2.0)))
    return model


def test_registered_gibbs_with_gradients_on_a_model_it_cannot_relax():
    """register(GibbsWithGradients) + pm.sample() used to raise; now the auto-assigned step
    takes exact differences (no warning: the choice is exact and cheap here; its reason is in
    the step and the stat ``exact_differences``) and samples correctly."""
    import pymc_lbp

    model = _not_relaxable_model()
    try:
        pymc_lbp.register(GibbsWithGradients)
        with model, warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            idata = pm.sample(
                draws=400,
                tune=50,
                chains=1,
                random_seed=2,
                progressbar=False,
                compute_convergence_checks=False,
            )
    finally:
        pymc_lbp.unregister()
    assert bool(idata.sample_stats["exact_differences"].all())
    # exact answer by enumeration: pi(x) ∝ 2^-3 exp(floor(sum x / 2))
    import itertools

    states = np.array(list(itertools.product([0, 1], repeat=3)))
    w = np.exp(np.floor(states.sum(axis=1) / 2.0))
    exact_mean = (w[:, None] * states).sum(axis=0) / w.sum()
    draws = idata.posterior["x"].values[0]
    # 400 draws of a sweep each (3 steps); se <= 0.5/sqrt(400) = 0.025 if independent;
    # 6 se allows for autocorrelation up to ~9 (far above these sweeps')
    assert np.abs(draws.mean(axis=0) - exact_mean).max() < 6 * 0.025


def test_not_relaxable_error_advises_an_option_that_exists():
    from pymc_lbp import NotRelaxableError

    model = _not_relaxable_model()
    with model:
        with pytest.raises(NotRelaxableError, match="differences='exact'"):
            GibbsWithGradients([model["x"]], differences="gradient")
        step = GibbsWithGradients([model["x"]], differences="exact")  # ... and it is accepted
    assert step.differences_kind == "exact"
