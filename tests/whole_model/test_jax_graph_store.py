"""The store of rewritten JAX graphs (pymc_lbp/whole_model/jaxify.py): a later process converts
the stored graph instead of rewriting it again, with the same function; graphs the fingerprint
cannot stand for, and damaged files, are rewritten."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

pytest.importorskip("jax", reason="the JAX program needs the extra pymc_lbp[jax]")

from pymc_lbp.whole_model import jaxify  # noqa: E402


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty store, and a count of the graphs rewritten."""
    monkeypatch.setattr(jaxify, "store_folder", lambda: tmp_path / "graphs")
    rewrites = []
    real = jaxify._rewritten

    def counted(fgraph):
        rewrites.append(fgraph)
        return real(fgraph)

    monkeypatch.setattr(jaxify, "_rewritten", counted)
    return tmp_path / "graphs", rewrites


def scan_graph(data):
    """A graph with shared data (held as a constant) and a Scan (an inner function graph)."""
    x = pt.vector("x")
    w = pytensor.shared(np.asarray(data, dtype="float64"), name="w")
    ys = pytensor.scan(
        lambda a, acc: acc + pt.exp(a * w).sum(),
        sequences=[x],
        outputs_info=[pt.as_tensor_variable(np.float64(0.0))],
        return_updates=False,
    )
    return [x], [ys[-1], pt.logsumexp(x * w.sum())]


def test_a_stored_graph_is_converted_without_rewriting_and_computes_the_same(store):
    folder, rewrites = store
    x = np.array([0.1, -0.4, 0.7])
    first = jaxify.jaxified_graph(*scan_graph([1.0, 2.0]))
    assert len(rewrites) == 1 and len(list(folder.iterdir())) == 1
    again = jaxify.jaxified_graph(*scan_graph([1.0, 2.0]))  # a new, equal graph
    assert len(rewrites) == 1  # read from the store
    np.testing.assert_array_equal(np.asarray(first(x)[0]), np.asarray(again(x)[0]))
    np.testing.assert_array_equal(np.asarray(first(x)[1]), np.asarray(again(x)[1]))
    expected = sum(np.exp(a * np.array([1.0, 2.0])).sum() for a in x)
    np.testing.assert_allclose(np.asarray(again(x)[0]), expected, rtol=1e-12)
    other = jaxify.jaxified_graph(*scan_graph([1.0, 3.0]))  # other data: another graph
    assert len(rewrites) == 2 and len(list(folder.iterdir())) == 2
    assert not np.allclose(np.asarray(other(x)[0]), expected)


def test_a_damaged_file_is_rewritten_and_replaced(store):
    folder, rewrites = store
    jaxify.jaxified_graph(*scan_graph([1.0, 2.0]))
    (path,) = folder.iterdir()
    path.write_bytes(b"not a pickle")
    fn = jaxify.jaxified_graph(*scan_graph([1.0, 2.0]))
    assert len(rewrites) == 2 and path.read_bytes() != b"not a pickle"
    np.testing.assert_allclose(np.asarray(fn(np.array([0.0]))[0]), 2.0)
    jaxify.jaxified_graph(*scan_graph([1.0, 2.0]))
    assert len(rewrites) == 2  # the replaced file is read


def test_a_graph_the_fingerprint_cannot_stand_for_is_not_stored(store):
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op
    from pytensor.link.jax.dispatch import jax_funcify

    class Nameless(Op):  # no __props__: two such ops print alike
        def make_node(self, v):
            return Apply(self, [v], [v.type()])

        def perform(self, node, inputs, outputs):
            outputs[0][0] = inputs[0]

    @jax_funcify.register(Nameless)
    def _(op, **kwargs):
        return lambda v: v * 2.0

    folder, rewrites = store
    x = pt.vector("x")
    fn = jaxify.jaxified_graph([x], [Nameless()(x) + 1.0])
    np.testing.assert_allclose(np.asarray(fn(np.array([1.0, 2.0]))[0]), [3.0, 5.0])
    assert len(rewrites) == 1 and not folder.exists()
