"""Fingerprints of PyTensor graphs (pymc_lbp/fingerprint.py): equal for equal graphs in any
process, different for different graphs, and refused for a graph they cannot tell apart."""

from __future__ import annotations

import os
import subprocess
import sys

import pytensor
import pytest

from pymc_lbp import fingerprint
from pymc_lbp.fingerprint import graph_fingerprint

GRAPH = """
import numpy as np
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import shared
from pymc_lbp.fingerprint import graph_fingerprint

def graph(scale=2.0, table=(0.1, 0.2, 0.7), op="exp", value=1.0):
    x = pt.vector("x", dtype="int64")
    w = shared(np.full(3, value), name="w")
    t = pt.as_tensor_variable(np.log(np.asarray(table)))
    y = getattr(pt, op)(t[x] * scale) + w[x]
    return [x], [pt.logsumexp(y), pt.sort(y)]

def fingerprint(inputs, outputs, options=None):
    return graph_fingerprint(inputs, outputs, options, shared=[])
"""


@pytest.fixture
def graph():
    namespace: dict = {}
    exec(GRAPH, namespace)
    return namespace["graph"]


def _fp(inputs, outputs, options=None) -> str:
    return graph_fingerprint(inputs, outputs, options, shared=[])


def test_equal_graphs_have_one_fingerprint_in_every_process(graph):
    """Two builds of one graph (new variables, a new shared variable with another value) and a
    build in another process (another string-hash seed) print alike."""
    first = _fp(*graph())
    assert _fp(*graph(value=3.0)) == first  # a second, independent build
    # the suite's compiler flags are set at run time (tests/helpers/compile_cache.py)
    flags = f"import pytensor; pytensor.config.gcc__cxxflags = {pytensor.config.gcc__cxxflags!r}\n"
    code = GRAPH + flags + "print(fingerprint(*graph()))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip().splitlines()[-1] == first


def test_different_graphs_options_and_settings_print_differently(graph, monkeypatch):
    first = _fp(*graph())
    assert _fp(*graph(scale=3.0)) != first  # a scalar constant
    assert _fp(*graph(table=(0.2, 0.1, 0.7))) != first  # an array constant's bytes
    assert _fp(*graph(op="log")) != first  # an op
    assert _fp(*graph(), options={"mode": "NUMBA"}) != first
    monkeypatch.setattr(pytensor.config, "floatX", "float32")
    assert _fp(*graph()) != first


def test_shared_variables_count_by_type_and_place(graph):
    """Each shared variable is handed back in the order the fingerprint counts it."""
    inputs, outputs = graph()
    shared: list = []
    graph_fingerprint(inputs, outputs, shared=shared)
    assert [v.name for v in shared] == ["w"]


def test_an_object_printed_with_its_address_prints_without_it():
    """A property that prints with a memory address (an object without a repr) prints by its
    class and attributes, so the fingerprint does not change from one process to the next."""

    class Plain:
        def __init__(self, a):
            self.a = a

    assert "0x" in repr(Plain(1))
    assert fingerprint._text(Plain(1)) == fingerprint._text(Plain(1)) != fingerprint._text(Plain(2))
    assert "0x" not in fingerprint._text(Plain(1))


def test_fingerprints_refuse_what_they_cannot_tell_apart(graph):
    """A fingerprint stands for the graph: arrays in an op's properties count by their bytes
    (numpy prints them rounded and elided), inner graphs by their own fingerprint, and a shared
    variable not handed back (its value may change) or an op with neither properties nor inner
    graph raises."""
    import numpy as np
    import pytensor.scalar as ps
    import pytensor.tensor as pt
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.tensor.elemwise import Elemwise

    with pytest.raises(fingerprint.Unfingerprintable, match="shared variable w"):
        graph_fingerprint(*graph())
    a = np.linspace(0.0, 1.0, 2000)
    b = a.copy()
    b[1000] += 1e-12  # prints as a does
    assert repr(a) == repr(b) and fingerprint._text((a,)) != fingerprint._text((b,))

    def composite(c):
        s = ps.float64("s")
        return Elemwise(ps.Composite([s], [s * c]))

    x = pt.vector("x")
    first = graph_fingerprint([x], [composite(0.1)(x)])
    assert graph_fingerprint([x], [composite(0.1)(x)]) == first
    assert graph_fingerprint([x], [composite(0.1 + 1e-15)(x)]) != first

    class Nameless(Op):
        def make_node(self, v):
            return Apply(self, [v], [v.type()])

        def perform(self, node, inputs, outputs):
            outputs[0][0] = inputs[0]

    with pytest.raises(fingerprint.Unfingerprintable, match="Nameless"):
        graph_fingerprint([x], [Nameless()(x)])


def test_fingerprints_refuse_a_constant_that_prints_without_its_content():
    """A value whose own repr leaves out what tells it apart (scipy's sparse matrices print their
    shape and number of entries) makes the fingerprint raise."""
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
    with pytest.raises(fingerprint.Unfingerprintable, match="prints as"):
        graph_fingerprint([x], [c])
