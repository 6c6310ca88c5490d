"""The compile directory's record of compiled graphs (pymc_lbp/compile_record.py): fingerprints
equal for equal graphs in any process, different for different graphs, and the record itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytensor
import pytest

from pymc_lbp import compile_record
from pymc_lbp.compile_record import compiled_before, graph_fingerprint, note_compiled

GRAPH = """
import numpy as np
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import shared
from pymc_lbp.compile_record import graph_fingerprint

def graph(scale=2.0, table=(0.1, 0.2, 0.7), op="exp"):
    x = pt.vector("x", dtype="int64")
    w = shared(np.ones(3), name="w")
    t = pt.as_tensor_variable(np.log(np.asarray(table)))
    y = getattr(pt, op)(t[x] * scale) + w[x]
    return [x], [pt.logsumexp(y), pt.sort(y)]
"""


@pytest.fixture
def graph():
    namespace: dict = {}
    exec(GRAPH, namespace)
    return namespace["graph"]


def test_equal_graphs_have_one_fingerprint_in_every_process(graph):
    """Two builds of one graph (new variables, new shared variable with another value) and a
    build in another process (another string-hash seed) print alike."""
    first = graph_fingerprint(*graph())
    assert graph_fingerprint(*graph()) == first  # a second, independent build
    # the suite's compiler flags are set at run time (tests/helpers/compile_cache.py)
    flags = f"import pytensor; pytensor.config.gcc__cxxflags = {pytensor.config.gcc__cxxflags!r}\n"
    code = GRAPH + flags + "print(graph_fingerprint(*graph()))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip().splitlines()[-1] == first


def test_different_graphs_options_and_settings_print_differently(graph, monkeypatch):
    first = graph_fingerprint(*graph())
    assert graph_fingerprint(*graph(scale=3.0)) != first  # a scalar constant
    assert graph_fingerprint(*graph(table=(0.2, 0.1, 0.7))) != first  # an array constant's bytes
    assert graph_fingerprint(*graph(op="log")) != first  # an op
    assert graph_fingerprint(*graph(), options={"mode": "NUMBA"}) != first
    monkeypatch.setattr(pytensor.config, "floatX", "float32")
    assert graph_fingerprint(*graph()) != first


def test_an_op_printed_with_its_address_prints_without_it():
    """Properties that print with a memory address (an object without a repr) are printed
    without it, so the fingerprint does not change from one process to the next."""
    assert compile_record._text(object()) == "<object object>"


def test_the_record_says_what_was_noted(tmp_path, monkeypatch, graph):
    monkeypatch.setattr(compile_record, "record_folder", lambda: tmp_path / "graphs")
    fp = graph_fingerprint(*graph())
    assert not compiled_before(fp)
    note_compiled(fp)
    assert compiled_before(fp) and not compiled_before(graph_fingerprint(*graph(scale=5.0)))
    assert (tmp_path / "graphs" / fp).is_file()


def test_the_record_lives_in_pytensors_compile_directory():
    assert compile_record.record_folder() == Path(pytensor.config.compiledir) / "pymc_lbp_graphs"


def test_numpy_seconds_add_up_over_runs(tmp_path, monkeypatch, graph):
    monkeypatch.setattr(compile_record, "record_folder", lambda: tmp_path / "graphs")
    fp = graph_fingerprint(*graph())
    assert compile_record.numpy_seconds(fp) == 0.0
    compile_record.add_numpy_seconds(fp, 1.25)
    compile_record.add_numpy_seconds(fp, 0.5)
    assert compile_record.numpy_seconds(fp) == 1.75
    assert not compiled_before(fp)  # seconds spent without a graph do not say it was compiled


def test_the_rule_compiles_warm_graphs_soon_and_cold_ones_when_their_cost_is_paid(monkeypatch):
    monkeypatch.setattr(compile_record, "COMPILE_AFTER_SECONDS_WARM", 0.5)
    monkeypatch.setattr(compile_record, "COMPILE_AFTER_SECONDS_COLD", 5.0)
    pays = compile_record.compiling_pays
    assert not pays(0.4, 100.0, True) and pays(0.5, 0.0, True)  # warm: this run's seconds
    assert not pays(4.9, 0.0, False) and pays(0.4, 4.6, False)  # cold: summed over runs


def test_strict_fingerprints_refuse_what_they_cannot_tell_apart(graph):
    """A strict fingerprint stands for the graph: arrays in an op's properties count by their
    bytes (numpy prints them rounded and elided), inner graphs by their own fingerprint, and a
    shared variable (its value may change) or an op with neither properties nor inner graph
    raises."""
    import numpy as np
    import pytensor.scalar as ps
    import pytensor.tensor as pt
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.tensor.elemwise import Elemwise

    with pytest.raises(compile_record.Unfingerprintable, match="shared variable w"):
        graph_fingerprint(*graph(), strict=True)
    a = np.linspace(0.0, 1.0, 2000)
    b = a.copy()
    b[1000] += 1e-12  # prints as a does
    assert repr(a) == repr(b) and compile_record._text((a,)) != compile_record._text((b,))

    def composite(c):
        s = ps.float64("s")
        return Elemwise(ps.Composite([s], [s * c]))

    x = pt.vector("x")
    first = graph_fingerprint([x], [composite(0.1)(x)], strict=True)
    assert graph_fingerprint([x], [composite(0.1)(x)], strict=True) == first
    assert graph_fingerprint([x], [composite(0.1 + 1e-15)(x)], strict=True) != first

    class Nameless(Op):
        def make_node(self, v):
            return Apply(self, [v], [v.type()])

        def perform(self, node, inputs, outputs):
            outputs[0][0] = inputs[0]

    graph_fingerprint([x], [Nameless()(x)])  # the record (timing only) takes it by name
    with pytest.raises(compile_record.Unfingerprintable, match="Nameless"):
        graph_fingerprint([x], [Nameless()(x)], strict=True)


def test_strict_fingerprints_refuse_a_constant_that_prints_without_its_content():
    """A value whose own repr leaves out what tells it apart (scipy's sparse matrices print their
    shape and number of entries) makes a strict fingerprint raise; the record's takes it."""
    import pytensor.tensor as pt
    import scipy.sparse as sp
    from pytensor.graph.basic import Constant
    from pytensor.graph.type import Type

    class Opaque(Type):  # a type whose values are any objects
        def filter(self, data, strict=False, allow_downcast=None):
            return data

        def __eq__(self, other):
            return type(self) is type(other)

        def __hash__(self):
            return hash(type(self))

    c = Constant(Opaque(), sp.csr_matrix([[0.0, 1.0]]))
    x = pt.scalar("x")
    graph_fingerprint([x], [c])
    with pytest.raises(compile_record.Unfingerprintable, match="prints as"):
        graph_fingerprint([x], [c], strict=True)
