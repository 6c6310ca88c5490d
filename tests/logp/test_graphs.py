"""Graph-building helpers (pymc_lbp/logp/graphs.py): same values as the plain expressions, graphs
that stay linear in a chain of substitutions, gathers that compile to C."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.traversal import io_toposort
from pytensor.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor

from pymc_lbp.logp.graphs import pick_per_row, repeated_rows, set_per_row, substitute


def test_substitute_links_to_the_given_variables_and_keeps_the_template():
    x = pt.vector("x")
    y = pt.exp(x) * 2.0
    t = pt.vector("t")
    template = pt.log(t) + 1.0
    out = substitute(template, {t: y})
    # the value itself, not a copy of its graph; the template unchanged
    assert out.owner.inputs[0].owner.inputs[0] is y
    assert template.owner.inputs[0].owner.inputs[0] is t
    f = pytensor.function([x], out)
    np.testing.assert_allclose(f(np.array([0.5, 1.0])), np.array([0.5, 1.0]) + np.log(2.0) + 1.0)


def test_a_chain_of_substitutions_grows_linearly():
    """Each link of a chain substitutes the previous link into templates twice and uses it
    directly (as an unrolled integer jump evaluates the logp at its two ends and reads the
    state): nodes grow by a constant per link. ``clone_replace`` copied the chain so far at
    every substitution, two copies per link (geometric growth)."""
    t = pt.vector("t")
    template = pt.exp(t) * pt.sum(t)
    x = pt.vector("x")

    def chain(n):
        out = x
        for _ in range(n):
            out = substitute(template, {t: out}) + substitute(template, {t: out + 1.0}) + out
        return len(io_toposort([x], [out]))

    per_link = chain(2) - chain(1)
    assert chain(8) - chain(7) == per_link
    assert chain(8) == chain(1) + 7 * per_link


def test_row_helpers_match_numpy_and_compile_without_general_advanced_indexing():
    m = pt.matrix("m")
    cols = pt.vector("cols", dtype="int64")
    vals = pt.vector("vals")
    v = pt.vector("v")
    f = pytensor.function(
        [m, cols, vals, v],
        [pick_per_row(m, cols), set_per_row(m, cols, vals), repeated_rows(v, 3)],
    )
    rng = np.random.default_rng(0)
    M = rng.normal(size=(4, 5))
    c = np.array([4, 0, 2, 2])
    w = rng.normal(size=4)
    vec = rng.normal(size=5)
    picked, written, rows = f(M, c, w, vec)
    np.testing.assert_array_equal(picked, M[np.arange(4), c])
    expected = M.copy()
    expected[np.arange(4), c] = w
    np.testing.assert_array_equal(written, expected)
    np.testing.assert_array_equal(rows, np.tile(vec, (3, 1)))
    ops = {type(node.op) for node in f.maker.fgraph.apply_nodes}
    assert not ops & {AdvancedSubtensor, AdvancedIncSubtensor}  # run in Python by the C backend


def test_unblock_gathers_from_batched_and_unbatched_tables():
    """Vectorised gathers become plain indexing (no Blockwise left), from a table that depends
    on the row (batched) and from one that does not, with the row-by-row values."""
    import pytensor
    import pytensor.tensor as pt
    from pytensor.graph.replace import vectorize_graph
    from pytensor.tensor.blockwise import Blockwise

    from pymc_lbp.logp.vectorising import unblock_gathers

    x = pt.vector("x", dtype="int64")
    n = 5
    own = pt.outer(pt.cast(x, "float64"), pt.arange(1.0, 4.0))  # (n, 3), depends on x
    fixed = pt.as_tensor(np.arange(12.0).reshape(4, 3))
    out = own[pt.arange(n), x % 3] + fixed[x % 4, (x + 1) % 3] + own[(x + 2) % n][:, 1]
    X = pt.matrix("X", dtype="int64")
    batched = vectorize_graph(out, replace={x: X})
    f_block = pytensor.function([X], batched)
    assert any(isinstance(nd.op, Blockwise) for nd in f_block.maker.fgraph.toposort())
    plain = unblock_gathers(batched)
    f = pytensor.function([X], plain)
    assert not any(isinstance(nd.op, Blockwise) for nd in f.maker.fgraph.toposort())
    one = pytensor.function([x], out)
    rows = np.random.default_rng(0).integers(0, 7, size=(6, n))
    np.testing.assert_allclose(f(rows), np.stack([one(r) for r in rows]))
    np.testing.assert_allclose(f(rows), f_block(rows))
