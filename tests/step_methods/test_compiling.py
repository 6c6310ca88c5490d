"""pymc_lbp.compiling: PyMC's compile once per distinct graph, with the collector paused."""

from __future__ import annotations

import gc

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors

from pymc_lbp import LocallyBalanced, compiling
from pymc_lbp.compiling import (
    clear_compile_cache,
    compile_cache_info,
    gc_paused,
    pm_compile,
)


@pytest.fixture
def fresh_cache():
    clear_compile_cache()
    yield
    clear_compile_cache()


def test_compiles_the_same_function_and_restores_the_collector():
    x = pt.vector("x")
    assert gc.isenabled()
    fn = pm_compile([x], (x**2).sum())
    assert gc.isenabled()
    assert fn(np.array([1.0, 2.0])) == 5.0
    gc.disable()
    try:
        pm_compile([x], x + 1)
        assert not gc.isenabled()  # a paused collector stays paused
    finally:
        gc.enable()


def test_the_collector_is_restored_on_error():
    with pytest.raises(RuntimeError):
        with gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()
    x = pt.vector("x")
    with pytest.raises(TypeError):
        pm_compile([x], x, no_such_option=1)
    assert gc.isenabled()


def _graph(c=2.0, dtype="float64", name="x", shared=None):
    x = pt.vector(name, dtype=dtype)
    out = pt.exp(x * c).sum() + (shared if shared is not None else 0.0)
    return [x], out


def test_an_equal_graph_gets_the_same_function(fresh_cache):
    """Graphs built twice from fresh variables are one function; what differs is another."""
    fn = pm_compile(*_graph())
    assert pm_compile(*_graph()) is fn
    assert compile_cache_info()[:3] == (1, 1, 0)
    np.testing.assert_allclose(fn(np.array([0.0, 1.0])), 1.0 + np.exp(2.0))
    others = [
        pm_compile(*_graph(c=3.0)),  # another constant
        pm_compile(*_graph(dtype="float32")),  # another input type
        pm_compile(*_graph(name="y")),  # another input name
    ]
    x, out = _graph()
    others.append(pm_compile(x, out, mode="FAST_COMPILE"))  # other options
    others.append(pm_compile(x, [out, out + 1]))  # other outputs
    assert len({id(f) for f in [fn, *others]}) == 6
    np.testing.assert_allclose(others[0](np.array([1.0])), np.exp(3.0))
    assert compile_cache_info().size == 6


def test_none_constants_are_keyed_by_type(fresh_cache):
    """Graphs with ``NoneConst`` (an open end of a slice in advanced indexing) are cached like
    others (the integer jumps' graphs have them; they were compiled anew for every step)."""

    def graph(start):
        m, i = pt.matrix("m"), pt.lvector("i")
        return [m, i], m[start:, i]  # advanced indexing: MakeSlice(start, NoneConst, NoneConst)

    inputs, out = graph(1)
    assert any(isinstance(c, Constant) and c.data is None for c in ancestors([out]))
    fn = pm_compile(*graph(1))
    assert pm_compile(*graph(1)) is fn
    other = pm_compile(*graph(0))
    assert other is not fn
    m = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(other(m, [1]), [[1.0], [3.0], [5.0]])
    assert compile_cache_info()[:3] == (1, 2, 0)


def test_shared_variables_are_compared_as_objects(fresh_cache):
    """The same shared variable: the same function (it reads that storage); another shared
    variable with the same value: another function, which follows its own variable."""
    a = pytensor.shared(1.0, name="s")
    b = pytensor.shared(1.0, name="s")
    fa = pm_compile(*_graph(shared=a))
    assert pm_compile(*_graph(shared=a)) is fa
    fb = pm_compile(*_graph(shared=b))
    assert fb is not fa
    b.set_value(10.0)
    x = np.array([0.0])
    assert fa(x) == pytest.approx(2.0) and fb(x) == pytest.approx(11.0)


def test_random_graphs_and_updates_are_never_shared(fresh_cache):
    """A graph that draws random numbers owns its generator's updates: compiled anew each time;
    so are compilations with ``updates``."""
    rng = pytensor.shared(np.random.default_rng(0))
    x = pt.vector("x")
    draw = pt.random.normal(rng=rng, size=3)
    f1, f2 = pm_compile([x], x.sum() + draw.sum()), pm_compile([x], x.sum() + draw.sum())
    assert f1 is not f2
    counter = pytensor.shared(0.0)
    g = [pm_compile([x], x.sum(), updates={counter: counter + 1}) for _ in range(2)]
    assert g[0] is not g[1]
    assert compile_cache_info()[:3] == (0, 0, 4)


def test_the_least_recently_used_graph_goes_first(fresh_cache, monkeypatch):
    monkeypatch.setattr(compiling, "CACHE_SIZE", 2)
    f1 = pm_compile(*_graph(c=1.0))
    pm_compile(*_graph(c=2.0))
    assert pm_compile(*_graph(c=1.0)) is f1  # c=1 used last: c=2 goes first
    pm_compile(*_graph(c=3.0))
    assert compile_cache_info().size == 2
    assert pm_compile(*_graph(c=1.0)) is f1
    assert compile_cache_info().misses == 3  # c=2 was evicted, c=1 never was
    pm_compile(*_graph(c=2.0))
    assert compile_cache_info().misses == 4


def test_a_step_built_again_on_the_same_model_compiles_nothing_and_draws_alike(fresh_cache):
    """The second LocallyBalanced on a model reuses every compiled function of the first, and
    both make the same draws from the same seed."""
    with pm.Model() as model:
        pm.Bernoulli("z", logit_p=np.linspace(-1.0, 1.0, 5), shape=5)
        pm.Potential("pair", pt.sum(model["z"][1:] * model["z"][:-1]))
    with model:
        first = LocallyBalanced([model["z"]], rng=np.random.default_rng(3))
    misses = compile_cache_info().misses
    assert misses > 0
    with model:
        second = LocallyBalanced([model["z"]], rng=np.random.default_rng(3))
    info = compile_cache_info()
    assert info.misses == misses and info.hits >= misses
    point = model.initial_point()
    for _ in range(20):
        p1, _ = first.step(point)
        p2, _ = second.step(point)
        np.testing.assert_array_equal(p1["z"], p2["z"])
        point = p1
