"""The grid-BN generator (UAI 2008 grids family)."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_lbp.models.uai import (
    exact_marginals,
    log_partition,
    read_network,
    write_network,
)
from pymc_lbp.models.uai.generate import grid_bn, grid_index


def _deterministic_nodes(network) -> np.ndarray:
    return np.array([bool(np.all((t == 0) | (t == 1))) for t in network.tables])


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.9, 1.0])
def test_grid_bn_structure(fraction):
    n = 6
    network, evidence = grid_bn(n, fraction, seed=3)
    assert network.kind == "BAYES" and network.n_vars == n * n
    assert evidence == {n * n - 1: 1}
    children = network.cpt_children()
    np.testing.assert_array_equal(children, np.arange(n * n))
    for i in range(n):
        for j in range(n):
            v = grid_index(i, j, n)
            parents = [
                grid_index(a, b, n) for a, b in ((i - 1, j), (i, j - 1)) if a >= 0 and b >= 0
            ]
            assert network.scopes[v] == (*parents, v)
            np.testing.assert_allclose(network.tables[v].sum(axis=-1), 1.0)
    assert _deterministic_nodes(network).sum() == round(fraction * n * n)
    # the sink evidence is always possible
    assert np.isfinite(log_partition(network, evidence))


def test_grid_bn_seeded_and_round_trips(tmp_path):
    a, ev = grid_bn(5, 0.75, seed=11)
    b, _ = grid_bn(5, 0.75, seed=11)
    c, _ = grid_bn(5, 0.75, seed=12)
    assert all(np.array_equal(s, t) for s, t in zip(a.tables, b.tables, strict=True))
    assert not all(np.array_equal(s, t) for s, t in zip(a.tables, c.tables, strict=True))
    write_network(tmp_path / "g.uai", a)
    back = read_network(tmp_path / "g.uai")
    for s, t in zip(a.tables, back.tables, strict=True):
        np.testing.assert_array_equal(s, t)
    marg = exact_marginals(back, ev)
    assert marg[24][1] == 1.0


def test_grid_bn_sink_evidence_feasible_over_seeds():
    # fully deterministic grids: P(sink = 1) is 0 or 1 before the repair, so this exercises it
    for seed in range(20):
        network, evidence = grid_bn(4, 1.0, seed=seed)
        assert np.isfinite(log_partition(network, evidence))


def test_grid_bn_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n >= 2"):
        grid_bn(1, 0.5, seed=0)
    with pytest.raises(ValueError, match="deterministic_fraction"):
        grid_bn(4, 1.5, seed=0)
