"""Clusters for exact block Gibbs (``uai_clusters``), block sets without a motif, and the random
feasible starts of the command line's chains (``random_feasible_states``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_lbp.models.uai import (
    UAINetwork,
    deterministic_scopes,
    random_feasible_states,
    read_evidence,
    read_network,
    uai_clusters,
)
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock
from pymc_lbp.samplers.block.motifs.uai_blocks import uai_exact_blocks

SHIPPED = [
    ("uai2008_grid_bn/50-12-5.uai", True),
    ("uai2008_grid_bn/75-16-5.uai", True),
    ("uai2014_mar/Pedigree_11.uai", True),
    ("uai2014_mar/Promedus_11.uai", True),
    ("uai2014_mar/DBN_11.uai", False),
    ("uai2006_bn/BN_0.uai", False),
]


def xor_network() -> UAINetwork:
    """x0 != x1 (table 0 1 1 0), and a factor on (x0, x2) with a zero entry: the feasible states
    form two regions for single-site moves, {x0=0, x1=1} (weight 2.15) and {x0=1, x1=0} (1)."""
    return UAINetwork(
        "MARKOV",
        [2, 2, 2],
        [(0, 1), (0, 2)],
        [np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[1.5, 0.65], [0.0, 1.0]])],
    )


def check_clusters(network, evidence, blocks, max_states) -> None:
    """The invariants of uai_clusters' answer."""
    free = {v for v in range(network.n_vars) if v not in evidence and network.cards[v] > 1}
    sets = [set(b) for b in blocks]
    assert set().union(*sets) == free  # every free variable, no evidence variable
    scopes = deterministic_scopes(network, evidence)
    for scope in scopes:  # every deterministic factor inside one block
        assert any(set(scope) <= b for b in sets), scope
    for b in blocks:
        assert list(b) == sorted(set(b))
        size = math.prod(int(network.cards[v]) for v in b)
        assert size <= max_states or b in scopes, (b, size)
    for i, a in enumerate(sets):  # none inside another
        assert not any(i != j and a <= b for j, b in enumerate(sets)), blocks[i]


def test_xor_network_is_one_cluster_and_smaller_budgets_keep_zero_factors_whole():
    net = xor_network()
    assert deterministic_scopes(net) == [(0, 1), (0, 2)]
    assert uai_clusters(net) == [(0, 1, 2)]
    for budget in (1, 2, 4):  # the zero scopes (4 states each) are kept whole even above it
        blocks = uai_clusters(net, max_states=budget)
        check_clusters(net, {}, blocks, budget)
        assert sorted(blocks) == [(0, 1), (0, 2)]
    # evidence x0 = 0 leaves x1 = 1 forced and x2 free: no deterministic scope, no x0
    assert deterministic_scopes(net, {0: 0}) == []
    assert uai_clusters(net, {0: 0}) in ([(1,), (2,)], [(2,), (1,)])


def test_zero_entries_that_the_evidence_removes_are_not_deterministic():
    table = np.array([1, 1, 1, 1, 0, 1, 1, 1.0]).reshape(2, 2, 2)
    net = UAINetwork("MARKOV", [2, 2, 2], [(0, 1, 2)], [table])
    assert deterministic_scopes(net) == [(0, 1, 2)]
    assert deterministic_scopes(net, {0: 0}) == []  # the zero is at x0 = 1
    assert deterministic_scopes(net, {0: 1}) == [(1, 2)]
    one = UAINetwork("MARKOV", [2, 1, 2], [(0, 1, 2)], [np.array([1, 0, 1, 1.0]).reshape(2, 1, 2)])
    assert deterministic_scopes(one) == [(0, 2)]  # x1 has one value: fixed, not in a scope
    assert uai_clusters(one) == [(0, 2)]


@pytest.mark.parametrize("budget", [4096, 64, 8])
@pytest.mark.parametrize(("name", "has_zeros"), SHIPPED, ids=[s[0].split("/")[1] for s in SHIPPED])
def test_shipped_networks_clusters_cover_and_keep_zero_factors_whole(
    uai_dir, name, has_zeros, budget
):
    network = read_network(uai_dir / name)
    evid = uai_dir / f"{name}.evid"
    evidence = read_evidence(evid, network) if evid.exists() else {}
    assert bool(deterministic_scopes(network, evidence)) == has_zeros
    blocks = uai_clusters(network, evidence, max_states=budget)
    check_clusters(network, evidence, blocks, budget)
    assert blocks == uai_clusters(network, evidence, max_states=budget)  # deterministic


def test_max_states_must_be_a_positive_integer():
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="max_states"):
            uai_clusters(xor_network(), max_states=bad)


# --------------------------------------------------------------------------- block sets
def test_exact_block_set_takes_blocks_of_any_shape():
    blocks = uai_exact_blocks(xor_network(), [(0, 1, 2), (2,)])
    assert blocks.motif is None and blocks.index == "uai" and len(blocks) == 2
    assert [b.block.tolist() for b in blocks] == [[0, 1, 2], [2]]
    with pytest.raises(ValueError, match="outside the network's variables"):
        uai_exact_blocks(xor_network(), [(0, 3)])
    with pytest.raises(ValueError, match="no conditioning variables"):
        BlockSet(None, (MotifBlock([0], [1]),), index="uai")


def mixed_network() -> UAINetwork:
    """Cardinalities 2, 3, 2 and zero entries in both factors."""
    return UAINetwork(
        "MARKOV",
        [2, 3, 2],
        [(0, 1), (1, 2)],
        [np.array([[1.0, 2.0, 0.0], [0.5, 0.0, 3.0]]), np.array([[1.0, 2.0], [0.0, 1.0], [3, 1]])],
    )


MIXED_BLOCKS = [(0, 1), (1, 2), (0,)]


def test_neural_block_runs_exact_block_gibbs_on_blocks_of_any_shape():
    """A block set without a motif: exact updates of blocks of different sizes and
    cardinalities, each unit's transition its exact conditional; a network proposal refused."""
    import pymc as pm

    from pymc_lbp.models.uai import read_uai
    from pymc_lbp.samplers.block.step import NeuralBlock

    net = mixed_network()
    model = read_uai(net)
    blocks = uai_exact_blocks(net, MIXED_BLOCKS)
    with model:
        step = NeuralBlock(blocks=blocks, proposal="exact", compile_kwargs={"mode": "FAST_COMPILE"})
        with pytest.raises(ValueError, match="exact block Gibbs only"):
            NeuralBlock(blocks=blocks, proposal=object())
    assert step.units == [b.label for b in blocks] and step.uncovered_sites.size == 0
    x = np.concatenate([np.asarray(model.initial_point()[n]) for n in model.uai_info.free_names])
    for u, block in enumerate(MIXED_BLOCKS):
        states, probs = step.unit_transitions(u, x)
        full = np.array([step_state_to_network(model, s) for s in states])
        weight = np.exp(net.log_factor_product(full))
        np.testing.assert_allclose(probs, weight / weight.sum(), atol=1e-12)
        assert len(states) == math.prod(int(net.cards[v]) for v in block)
    with model:
        idata = pm.sample(draws=5, tune=0, chains=1, step=[step], progressbar=False)
    assert idata.posterior["x_card2"].shape[:2] == (1, 5)


def test_compiled_scan_makes_the_numpy_moves_on_blocks_of_any_shape():
    """The compiled random scan pads units of different sizes and state tables; it must make
    the numpy steps' moves from the same uniforms (as for motif blocks; factor-local targets,
    what ``read_uai`` models get; FAST_COMPILE keeps the compilation short)."""
    from pymc_lbp.models.uai import read_uai
    from pymc_lbp.samplers.block.step import NeuralBlock
    from tests.samplers.block.test_neural_block_scan import assert_same_moves

    net = mixed_network()
    model = read_uai(net)
    with model:
        step = NeuralBlock(
            blocks=uai_exact_blocks(net, MIXED_BLOCKS),
            proposal="exact",
            logp="factors",
            compile_kwargs={"mode": "FAST_COMPILE"},
        )
    assert step.scan_compilable and step.logp_mode == "factors"
    assert_same_moves(step, model, n_steps=60)


def step_state_to_network(model, x: np.ndarray) -> np.ndarray:
    """A NeuralBlock state vector (its variables raveled in order) as a network state."""
    from pymc_lbp.models.uai import uai_state_from_point

    info = model.uai_info
    point, start = {}, 0
    for name in info.free_names:
        size = info.members[name].size
        point[name] = x[start : start + size]
        start += size
    return uai_state_from_point(point, model)


# --------------------------------------------------------------------------- random starts
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "forward-or-repair"])
@pytest.mark.parametrize(
    "name", ["uai2008_grid_bn/50-12-5.uai", "uai2014_mar/Pedigree_11.uai", "uai2006_bn/BN_0.uai"]
)
def test_random_starts_are_feasible_distinct_and_seeded(uai_dir, name, exact):
    network = read_network(uai_dir / name)
    evidence = read_evidence(uai_dir / f"{name}.evid", network)
    limit = 2**22 if exact else 1  # 1: no exact sampling, forward sampling or greedy repair
    states, sources = random_feasible_states(
        network, evidence, 4, rng=7, max_exact_table_size=limit
    )
    assert states.shape == (4, network.n_vars) and len(sources) == 4
    assert np.isfinite(network.log_factor_product(states)).all()
    for v, x in evidence.items():
        assert (states[:, v] == x).all()
    assert len({tuple(s) for s in states.tolist()}) == 4  # distinct
    if exact:
        assert sources == ["exact posterior sample"] * 4
    else:
        assert set(sources) <= {"forward sampling", "greedy repair"}
    again, _ = random_feasible_states(network, evidence, 4, rng=7, max_exact_table_size=limit)
    np.testing.assert_array_equal(states, again)
    other, _ = random_feasible_states(network, evidence, 4, rng=8, max_exact_table_size=limit)
    assert not np.array_equal(states, other)


def test_random_starts_cover_every_state_of_a_tiny_network_before_repeating():
    """The XOR network has three feasible states; four chains get all three (both regions)."""
    for seed in range(20):
        states, _ = random_feasible_states(xor_network(), None, 4, rng=seed)
        assert {tuple(s) for s in states.tolist()} == {(0, 1, 0), (0, 1, 1), (1, 0, 1)}
