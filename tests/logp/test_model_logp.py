"""model_logp: the model's logp graph built once per model state, equal to ``model.logp``."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pymc as pm

from pymc_lbp.logp.model_logp import model_logp


def _model():
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.3, shape=3)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", x.sum() + s, 1.0, observed=[0.5, 1.5])
        pm.Potential("p", -0.5 * x[0] * x[1])
    return model


def _value(model, graph):
    fn = model.compile_fn(graph, inputs=model.value_vars, on_unused_input="ignore", point_fn=True)
    return fn(model.initial_point())


def test_repeats_share_one_graph_equal_to_pymcs():
    model = _model()
    total = model_logp(model)
    assert model_logp(model) is total
    np.testing.assert_allclose(_value(model, total), _value(model, model.logp()), rtol=1e-12)
    terms = model_logp(model, sum=False)
    again = model_logp(model, sum=False)
    assert terms is not again and all(a is b for a, b in zip(terms, again, strict=True))
    again.pop()  # a caller's list is its own
    assert len(model_logp(model, sum=False)) == len(terms) == 4
    some = model_logp(model, [model["y"], model["p"]], sum=False)
    assert len(some) == 2
    assert model_logp(model, [model["p"]], sum=False)[0] is not some[1]  # other arguments


def test_a_changed_model_gets_a_new_graph():
    model = _model()
    before = model_logp(model)
    with model:
        pm.Normal("z", 0.0, 1.0)
    after = model_logp(model)
    assert after is not before
    np.testing.assert_allclose(_value(model, after), _value(model, model.logp()), rtol=1e-12)
    assert len(model_logp(model, sum=False)) == 5


def test_the_graphs_go_with_the_model():
    model = _model()
    ref = weakref.ref(model_logp(model))
    del model
    gc.collect()  # the model (its cycles): its entry goes with it
    gc.collect()  # then the graph's own cycles
    assert ref() is None


def test_a_blocks_state_enters_the_compiled_logp_unsliced():
    """The model logp over a one-variable block's raveled state (what a step's first numpy moves
    score with) keeps no slice or shape check of that state once rewritten: its length is part
    of its type. It so compiles to the C modules of NUTS's own logp; with the length unknown, a
    ``Subtensor`` and a ``SpecifyShape`` stayed, two more modules on a cold first run."""
    from pytensor.tensor.shape import SpecifyShape
    from pytensor.tensor.subtensor import Subtensor

    from pymc_lbp import LocallyBalanced

    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.3, shape=4)
        psi = pm.Beta("psi", 2.0, 2.0)
        pm.Binomial("y", n=3, p=z * psi + 0.01, observed=[0, 1, 2, 0])
        step = LocallyBalanced([z])
    x = np.array([1, 1, 1, 0])
    ip = model.initial_point()
    expected = model.compile_logp()({**ip, "z": x})
    np.testing.assert_allclose(step.differences.model_logp(x), expected, rtol=1e-12)
    ops = [node.op for node in step.differences._logp_fn.maker.fgraph.apply_nodes]
    assert ops and not any(isinstance(op, Subtensor | SpecifyShape) for op in ops)
