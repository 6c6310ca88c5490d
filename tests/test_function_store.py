"""The store of compiled functions (pymc_lbp/function_store.py): a later process loads the function
pm_compile compiled for an equal graph, over its own shared variables, instead of rewriting the
graph again; what the store cannot hold is compiled as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode

from pymc_lbp import compiling, function_store
from pymc_lbp.compiling import clear_compile_cache, pm_compile


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty store and the list of graphs compiled (not loaded); the process cache cleared
    before each call the test makes through ``compile_anew``."""
    monkeypatch.setattr(function_store, "store_folder", lambda: tmp_path / "functions")
    compiled = []
    real = compiling._pymc_compile

    def counted(inputs, outputs, **kwargs):
        compiled.append(outputs)
        return real(inputs, outputs, **kwargs)

    monkeypatch.setattr(compiling, "_pymc_compile", counted)
    clear_compile_cache()
    yield tmp_path / "functions", compiled
    clear_compile_cache()


def graph(scale=2.0, width=3):
    """A step's kind of graph: an input vector and the model's other values in shared
    variables (new ones at each call, as a new step makes them)."""
    x = pt.vector("x")
    w = pytensor.shared(np.arange(width, dtype="float64"), name="w")
    b = pytensor.shared(np.float64(1.0), name="b")
    return [x], [pt.logsumexp(x * scale + w) * b, (x * w).sum()], w, b


def compile_anew(inputs, outputs, **kwargs):
    """pm_compile as in a new process: nothing in the process cache."""
    clear_compile_cache()
    return pm_compile(inputs, outputs, **kwargs)


def test_a_stored_function_is_loaded_over_the_callers_shared_variables(store):
    folder, compiled = store
    x = np.array([0.5, -1.0, 2.0])
    inputs, outputs, w0, b0 = graph()
    first = compile_anew(inputs, outputs)
    assert len(compiled) == 1 and len(list(folder.iterdir())) == 1
    inputs, outputs, w, b = graph()  # an equal graph over new shared variables
    w.set_value(np.array([3.0, -2.0, 0.5]))
    b.set_value(np.float64(2.0))
    loaded = compile_anew(inputs, outputs)
    assert len(compiled) == 1  # loaded, not compiled
    expected = np.logaddexp.reduce(x * 2.0 + w.get_value()) * 2.0
    np.testing.assert_allclose(loaded(x)[0], expected, rtol=1e-12)
    np.testing.assert_allclose(loaded(x)[1], x @ w.get_value(), rtol=1e-12)
    b.set_value(np.float64(-1.0))  # it reads the caller's values when called
    np.testing.assert_allclose(loaded(x)[0], -expected / 2.0, rtol=1e-12)
    np.testing.assert_allclose(first(x)[1], x @ np.arange(3.0), rtol=1e-12)  # untouched


def test_other_graphs_and_shared_types_are_other_functions(store):
    folder, compiled = store
    compile_anew(*graph()[:2])
    compile_anew(*graph(scale=3.0)[:2])  # another constant
    compile_anew(*graph(width=4)[:2])  # same types (vectors of any length): stored one reused
    x = pt.vector("x")
    m = pytensor.shared(np.ones((2, 2)), name="w")  # a matrix where a vector was
    compile_anew([x], [(x[:2] @ m).sum()])
    assert len(compiled) == 3 and len(list(folder.iterdir())) == 3


def test_a_damaged_file_is_compiled_again_and_replaced(store):
    folder, compiled = store
    compile_anew(*graph()[:2])
    (path,) = folder.iterdir()
    path.write_bytes(b"not a pickle")
    fn = compile_anew(*graph()[:2])
    assert len(compiled) == 2 and path.read_bytes() != b"not a pickle"
    np.testing.assert_allclose(fn(np.zeros(3))[1], 0.0)
    compile_anew(*graph()[:2])
    assert len(compiled) == 2


def test_a_single_output_and_a_list_of_it_are_other_functions(store):
    """A function of one output (not a list) returns it alone, loaded too (PyTensor's own pickle
    forgets it: the start check once got a list back from a loaded function)."""
    folder, compiled = store
    for _ in range(2):  # compiled, then loaded
        inputs, outputs, _, _ = graph()
        assert isinstance(compile_anew(inputs, [outputs[1]])(np.ones(3)), list)
        assert not isinstance(compile_anew(inputs, outputs[1])(np.ones(3)), list)
        x = pt.vector("x")
        assert compile_anew([x], x.sum())(np.ones(2)) == 2.0  # no shared variables
    assert len(compiled) == 3 and len(list(folder.iterdir())) == 3


def test_a_function_with_a_blockwise_op_without_c_code_is_stored(store):
    """A ``Blockwise`` op that runs its Python ``perform`` keeps a closure in its node's tag once
    called; the store leaves it out (loading links the function again and remakes it). Before,
    no such function could be pickled, and every process rewrote the integer jumps' and
    SelfBalancing's batched graphs again."""
    from pytensor.graph.replace import vectorize_graph
    from pytensor.tensor.blockwise import Blockwise

    folder, compiled = store
    values = []
    for _ in range(2):  # compiled, then loaded
        x, i = pt.vector("x"), pt.scalar("i", dtype="int64")
        X, index = pt.matrix("X"), pt.vector("index", dtype="int64")
        rows = vectorize_graph(x[i], replace={x: X, i: index})
        fn = compile_anew([X, index], rows)
        assert any(isinstance(n.op, Blockwise) for n in fn.maker.fgraph.apply_nodes)
        for _ in range(2):  # the first call made the closure
            values.append(fn(np.arange(6.0).reshape(2, 3), np.array([1, 2])).tolist())
    assert values == [[1.0, 5.0]] * 4
    assert len(compiled) == 1 and len(list(folder.iterdir())) == 1


def test_options_the_fingerprint_cannot_print_are_not_stored(store):
    folder, compiled = store
    compile_anew(*graph()[:2], mode=Mode(linker="py", optimizer="fast_compile"))
    assert not folder.exists() and len(compiled) == 1


def test_the_store_lives_in_pytensors_compile_directory():
    assert function_store.store_folder() == (
        Path(pytensor.config.compiledir) / function_store.STORE_FOLDER
    )


def test_files_unused_for_pytensors_age_limit_are_removed(store, monkeypatch):
    """Files are touched when loaded; one untouched for longer than PyTensor keeps an unused C
    module is removed when a later process writes to the folder."""
    import os
    import time

    folder, compiled = store
    compile_anew(*graph()[:2])
    (old,) = folder.iterdir()
    limit = float(pytensor.config.cmodule__age_thresh_use)
    long_ago = time.time() - limit - 60
    os.utime(old, (long_ago, long_ago))
    compile_anew(*graph()[:2])  # loaded: touched, kept
    assert old.stat().st_mtime > long_ago + 60
    os.utime(old, (long_ago, long_ago))
    monkeypatch.setattr(function_store, "_PRUNED", set())  # a new process
    compile_anew(*graph(scale=5.0)[:2])
    assert not old.exists() and len(list(folder.iterdir())) == 1


def test_none_constants_load_as_pytensors_own(store):
    """``NoneConst`` in a loaded graph is PyTensor's object, not a copy: PyTensor tells a free
    dimension by ``is NoneConst``, and numba's ``SpecifyShape`` built from a copy asserted the
    free dimension against ``None`` and failed to compile (the integer jumps' NUMBA twin, with
    this store warm and numba's cache empty)."""
    from pytensor.tensor.shape import SpecifyShape
    from pytensor.tensor.type_other import NoneConst

    folder, compiled = store
    frees = []
    for _ in range(2):  # compiled, then loaded
        X = pt.matrix("X")
        fn = compile_anew([X], pt.specify_shape(X, (None, 2)).sum(0))
        nodes = [n for n in fn.maker.fgraph.apply_nodes if isinstance(n.op, SpecifyShape)]
        assert len(nodes) == 1  # kept by the rewrites: the case to check
        frees.append(nodes[0].inputs[1] is NoneConst)
        assert fn(np.ones((3, 2))).tolist() == [3.0, 3.0]
    assert len(compiled) == 1 and len(list(folder.iterdir())) == 1
    assert frees == [True, True]
