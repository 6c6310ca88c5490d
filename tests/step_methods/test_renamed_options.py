"""Issue #26.4, one vocabulary: the options renamed to the name the other samplers use keep their
former names for one release, with a FutureWarning naming the new one, and do the same."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from pymc.blocking import DictToArrayBijection

import pymc_lbp
from pymc_lbp.step_methods.neural_block import NeuralBlock


def _bernoulli_model():
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.4, shape=4)
        pm.Potential("couple", 0.7 * (x[:-1] * x[1:]).sum())
    return model


def _draws(step, model, n=3):
    """n draws of the step from the model's initial point: the states and the stats."""
    q = DictToArrayBijection.map({"x": model.initial_point()["x"]})
    out = []
    for _ in range(n):
        q, stats = step.astep(q)
        out.append((q.data.copy(), stats[0]))
    return out


def _same(a, b):
    for (qa, sa), (qb, sb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(qa, qb)
        assert sa.keys() == sb.keys()
        for k in sa:
            np.testing.assert_equal(sa[k], sb[k])


def _new_and_old(cls, model, new: dict, old: dict, match: str, **kw):
    with model:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # the new name warns nothing
            fresh = cls(rng=np.random.default_rng(3), **new, **kw)
        with pytest.warns(FutureWarning, match=match):
            former = cls(rng=np.random.default_rng(3), **old, **kw)
        with pytest.raises(ValueError, match="pass .* only, not both"):
            cls(**new, **old, **kw)
    return fresh, former


@pytest.mark.parametrize("value", [True, False, "auto"])
def test_path_auxiliary_compiled_kernel_is_compiled(value):
    model = _bernoulli_model()
    fresh, former = _new_and_old(
        pymc_lbp.PathAuxiliaryLBP,
        model,
        {"compiled": value},
        {"compiled_kernel": value},
        r"compiled_kernel=.*use compiled=",
        differences="gradient",  # off the pairwise kernel, so the option matters
        steps_per_draw=3,
    )
    assert fresh.compiled == former.compiled == value
    assert fresh.uses_compiled_kernel == former.uses_compiled_kernel
    _same(_draws(fresh, model), _draws(former, model))
    with pytest.warns(FutureWarning, match=r"\.compiled"):
        assert former.compiled_kernel == value
    with pytest.warns(FutureWarning, match=r"\.compiled"):
        former.compiled_kernel = not value if isinstance(value, bool) else False
    assert former.compiled is (not value if isinstance(value, bool) else False)


@pytest.mark.parametrize("value", [True, False])
def test_neural_block_compiled_sweep_is_compiled(value):
    model = _bernoulli_model()
    fresh, former = _new_and_old(
        NeuralBlock,
        model,
        {"compiled": value},
        {"compiled_sweep": value},
        r"compiled_sweep=.*use compiled=",
        blocks=None,
        steps_per_draw=4,
    )
    assert fresh.compiled is former.compiled is value
    _same(_draws(fresh, model), _draws(former, model))
    with pytest.warns(FutureWarning, match=r"\.compiled"):
        assert former.compiled_sweep is value


@pytest.mark.parametrize("family", ["lsb1", "lsb2"])
def test_self_balancing_parametrization_is_balancing(family):
    model = _bernoulli_model()
    fresh, former = _new_and_old(
        pymc_lbp.SelfBalancing,
        model,
        {"balancing": family},
        {"parametrization": family},
        r"parametrization=.*use balancing=",
        n_particles=3,
        steps_per_draw=2,
        differences="exact",
        compile_kwargs={"mode": "FAST_COMPILE"},  # the same graphs either way: compile fast
    )
    assert fresh.parametrization.name == former.parametrization.name == family
    assert fresh.stats_dtypes_shapes == former.stats_dtypes_shapes
    _same(_draws(fresh, model), _draws(former, model))


def test_compiled_is_checked_under_either_name():
    with _bernoulli_model():
        for kw in ({"compiled": "yes"}, {"compiled_kernel": "yes"}, {"compiled": None}):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                with pytest.raises(ValueError, match="compiled must be 'auto', True or False"):
                    pymc_lbp.PathAuxiliaryLBP(**kw)
        with pytest.raises(ValueError, match="compiled must be 'auto', True or False"):
            NeuralBlock(blocks=None, compiled=1)


def test_defaults_are_the_plain_values():
    with _bernoulli_model():
        assert pymc_lbp.PathAuxiliaryLBP().compiled == "auto"
        assert type(NeuralBlock(blocks=None).compiled) is str
        assert pymc_lbp.SelfBalancing(n_particles=2).parametrization.name == "lsb1"


def test_path_length_stat_is_mean_path_length():
    """The option path_length sets the scale U; the stat of the draw's mean R is
    mean_path_length (and the scale's is path_scale)."""
    model = _bernoulli_model()
    with model:
        step = pymc_lbp.PathAuxiliaryLBP(path_length=2, steps_per_draw=5)
    assert "mean_path_length" in step.stats_dtypes_shapes
    assert "path_length" not in step.stats_dtypes_shapes
    stats = _draws(step, model, n=2)[-1][1]
    assert 1 <= stats["mean_path_length"] <= 2 and stats["path_scale"] == 2
