"""Our steps next to every PyMC step method in one pm.sample (issue #14.3), and the stats contract.

PyMC merges the statistics of all steps of a compound step by name and refuses a name that
appears with two dtypes ("Sampler statistic accepted appears with different types"). PyMC's own
steps disagree on ``accepted`` (float64 in Metropolis, bool in DEMetropolis(Z)/HamiltonianMC),
(and NUTS and HamiltonianMC on ``divergences``: ``int`` against ``np.int64``), so they run here
in two groups, each group in one pm.sample next to all five of ours.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_lbp
from pymc_lbp import (
    GibbsWithGradients,
    LocallyBalanced,
    NeuralBlock,
    PathAuxiliaryLBP,
    SelfBalancing,
)

FAST = dict(progressbar=False, compute_convergence_checks=False, cores=1, random_seed=7)
CK = {"compile_kwargs": {"mode": "FAST_COMPILE"}}
OURS = {
    "lb": lambda v: LocallyBalanced(v, **CK),
    "gwg": lambda v: GibbsWithGradients(v, **CK),
    "pal": lambda v: PathAuxiliaryLBP(v, **CK),
    "sb": lambda v: SelfBalancing(v, n_particles=2, **CK),
    "nb": lambda v: NeuralBlock(v, blocks=None, **CK),
}
CONTINUOUS = ("mu0", "mu1", "mu2", "mu3")


def tiny_model():
    """z_<ours>: one variable for each of ours; b0, b1, c, mu*: PyMC's."""
    with pm.Model() as model:
        zs = [pm.Bernoulli(f"z_{name}", 0.5, shape=2) for name in OURS]
        b0 = pm.Bernoulli("b0", 0.5, shape=2)
        b1 = pm.Bernoulli("b1", 0.5, shape=2)
        c = pm.Categorical("c", p=[0.2, 0.3, 0.5])
        mus = [pm.Normal(name, 0.0, 1.0) for name in CONTINUOUS]
        total = sum(z.sum() for z in zs) + b0.sum() + b1.sum() + c + sum(mus)
        pm.Normal("y", total, 1.0, observed=[1.0, 2.0])
    return model


def ours_on(model) -> list:
    return [make([model[f"z_{name}"]]) for name, make in OURS.items()]


# PyMC's steps; "accepted" is float64 in group A and bool in group B
GROUP_A = {
    "Metropolis": lambda m: pm.Metropolis([m["mu0"]]),
    "BinaryMetropolis": lambda m: pm.BinaryMetropolis([m["b0"]]),
    "CategoricalGibbsMetropolis": lambda m: pm.CategoricalGibbsMetropolis([m["c"]]),
    "Slice": lambda m: pm.Slice([m["mu1"]]),
    "NUTS": lambda m: pm.NUTS([m["mu2"]]),
    "CompoundStep": lambda m: pm.CompoundStep(
        [pm.Metropolis([m["mu3"]]), pm.BinaryGibbsMetropolis([m["b1"]])]
    ),
}
GROUP_B = {
    # S sized for its own variable: PyMC's default sizes it for the whole model
    "DEMetropolisZ": lambda m: pm.DEMetropolisZ([m["mu0"]], S=np.ones(1)),
    "HamiltonianMC": lambda m: pm.HamiltonianMC([m["mu1"]]),
    "BinaryGibbsMetropolis": lambda m: pm.BinaryGibbsMetropolis([m["b0"], m["b1"]]),
    # not NUTS: its "divergences" is `int`, HamiltonianMC's `np.int64`, which PyMC refuses
    "Slice": lambda m: pm.Slice([m["mu2"], m["mu3"]]),
}


@pytest.fixture(scope="module")
def tiny_model_and_ours():
    """The model and our five steps on it, built (compiled) once for both groups: PyMC's
    steps are new in each group, ours are reused as a step is across pm.sample calls."""
    model = tiny_model()
    with model:
        return model, ours_on(model)


@pytest.mark.parametrize("group", [GROUP_A, GROUP_B], ids=["metropolis-group", "hmc-group"])
def test_every_pymc_step_coexists_with_all_of_ours(group, tiny_model_and_ours):
    model, ours = tiny_model_and_ours
    with model:
        theirs = [make(model) for make in group.values()]
        idata = pm.sample(draws=10, tune=10, chains=2, step=[*ours, *theirs], **FAST)
    ss = idata.sample_stats
    accepted = ss["accepted"]
    assert accepted.dtype == (np.float64 if group is GROUP_A else bool)  # PyMC's own
    for key in ("n_accepted", "sites_changed", "logp_evals", "grad_evals", "mh_steps"):
        assert ss[key].dtype == np.int64, key
    # one column per step that has the stat: ours are in the order given
    mh_steps = ss["mh_steps"].values
    assert mh_steps.shape == (2, 10, 5)
    np.testing.assert_array_equal(mh_steps[0, 0], [s.steps_per_draw for s in ours])
    for step in ours:
        assert "model_logp" not in step.stats_dtypes_shapes  # NUTS's lp stays one column
    assert ss["lp"].shape == (2, 10)  # NUTS's or HMC's (PyMC records only the last step's)


PYMC_CLASSES = [
    pm.Metropolis,
    pm.BinaryMetropolis,
    pm.BinaryGibbsMetropolis,
    pm.CategoricalGibbsMetropolis,
    pm.Slice,
    pm.DEMetropolis,
    pm.DEMetropolisZ,
    pm.NUTS,
    pm.HamiltonianMC,
]


def test_shared_stat_names_have_pymc_dtypes():
    """Every stat name we share with any PyMC step has that step's dtype, and PyMC's trace
    accepts ours next to each of them (DEMetropolis is checked here only: PyMC itself cannot run
    it in a compound step next to other steps)."""
    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.5, shape=2)
        ours = [make([z]) for make in OURS.values()]
    for step in ours:
        assert "model_logp" in step.stats_dtypes_shapes  # the sole step: all stats
        for cls in PYMC_CLASSES:
            theirs = cls.stats_dtypes_shapes
            for key in set(step.stats_dtypes_shapes) & set(theirs):
                mine = np.dtype(step.stats_dtypes_shapes[key][0])
                assert mine == np.dtype(theirs[key][0]), (type(step).__name__, cls.__name__, key)
            trace = pm.backends.NDArray(model=model)
            trace.setup(5, 0, [*step.stats_dtypes, {k: v[0] for k, v in theirs.items()}])


def test_register_next_to_an_unsupported_discrete_variable():
    """register(): PyMC gives the variable we do not support to Metropolis, ours to us."""
    with pm.Model() as model:
        pm.Bernoulli("z", 0.3, shape=3)
        pm.ZeroInflatedPoisson("k", psi=0.5, mu=2.0)  # not ours: a mixture, not an integer RV
    try:
        pymc_lbp.register()
        with model:
            idata = pm.sample(draws=20, tune=10, chains=1, **FAST)
    finally:
        pymc_lbp.unregister()
    ss = idata.sample_stats
    assert "n_accepted" in ss and "scaling" in ss  # ours and Metropolis's
    assert ss["accepted"].dtype == np.float64


def test_model_logp_and_tune_stats_when_ours_is_the_only_step():
    """Sole step of the model: model_logp is the model logp at each draw (ArviZ's lp); the
    tune stat marks the tuning draws (ArviZ drops it and puts them in warmup groups)."""
    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.3, shape=4)
        c = pm.Categorical("c", p=[0.2, 0.3, 0.5], shape=2)
        pm.Potential("pair", 0.7 * pt.eq(z[0], z[1]) + 0.4 * pt.eq(c[0], c[1]))
    point_logp = model.compile_logp()
    for make in OURS.values():
        with model:
            step = make([z, c])
            trace = pm.sample(
                draws=6,
                tune=4,
                chains=1,
                step=[step],
                discard_tuned_samples=False,
                return_inferencedata=False,
                **FAST,
            )
        assert step.emits_model_logp
        np.testing.assert_array_equal(trace.get_sampler_stats("tune"), [True] * 4 + [False] * 6)
        logps = trace.get_sampler_stats("model_logp")
        for i, point in enumerate(trace.points()):
            assert logps[i] == pytest.approx(point_logp(point), abs=1e-9)
        # after tuning (PathAuxiliaryLBP's steps follow its scale while tuning)
        assert (trace.get_sampler_stats("mh_steps")[4:] == step.steps_per_draw).all()
    with model:
        idata = pm.sample(draws=5, tune=5, chains=1, step=[GibbsWithGradients([z, c])], **FAST)
    assert idata.sample_stats["lp"].shape == (1, 5)
