"""Elimination blocks (issue #27.3): BlockGibbs' blocks on read_uai models, each drawn whole by
bucket elimination given a cutset.

The targets are written out here from the factor tables (explicit index arithmetic, no library
code): a block's draws are compared with its exact conditional, the random-scan kernel of the
chosen blocks is enumerated from its definition (``pi T = pi``, irreducible where single-site
Gibbs is not), and ``pm.sample`` runs match exact marginals.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import arviz as az
import cloudpickle
import numpy as np
import pymc as pm
import pytest

from pymc_lbp import BlockGibbs
from pymc_lbp.cli.samplers import make_steps
from pymc_lbp.factor_graph.clusters import deterministic_scopes
from pymc_lbp.models.uai import NETWORKS, UAINetwork, read_mar, read_uai, uai_marginals
from pymc_lbp.models.uai.exact import sample_exact
from pymc_lbp.models.uai.io import read_evidence, read_network
from pymc_lbp.models.uai.model import uai_state_from_point
from pymc_lbp.samplers.block.elimination import (
    BlockSampler,
    elimination_blocks,
    sample_block,
)
from tests.helpers.block_kernels import block_gibbs_kernel, irreducible_on_support
from tests.helpers.ess import checked_ess

UAI = NETWORKS


# ------------------------------------------------------------------------- the tiny network
def ring_network() -> UAINetwork:
    """Six variables (cards 2 3 2 2 2 2) on a ring with a chord, two deterministic factors:
    x0 = x5 (an equality), x2 = x3 XOR x4 (a parity table), soft factors elsewhere."""
    rng = np.random.default_rng(5)
    cards = [2, 3, 2, 2, 2, 2]
    scopes = [(0, 1), (1, 2), (2, 3, 4), (4, 5), (5, 0), (1, 4), (3,)]
    tables = []
    for scope in scopes:
        tables.append(rng.uniform(0.2, 2.0, size=[cards[v] for v in scope]))
    tables[2] = np.zeros((2, 2, 2))
    for a, b in itertools.product(range(2), repeat=2):
        tables[2][a ^ b, a, b] = rng.uniform(0.5, 2.0)
    tables[4] = np.eye(2) * np.array([1.3, 0.7])  # x5 == x0
    return UAINetwork("MARKOV", cards, scopes, tables)


def brute_force(network: UAINetwork) -> tuple[np.ndarray, np.ndarray]:
    """Every joint state and its probability, from row-major table lookups."""
    cards = network.cards.tolist()
    states = np.array(list(itertools.product(*[range(k) for k in cards])), dtype=np.int64)
    p = brute_force_probability(network, states)
    return states, p / p.sum()


def brute_force_probability(network: UAINetwork, draws: np.ndarray) -> np.ndarray:
    """Unnormalised probability of each row of ``draws`` (row-major table lookups)."""
    p = np.ones(len(draws))
    cards = network.cards.tolist()
    for scope, table in zip(network.scopes, network.tables, strict=True):
        index = np.zeros(len(draws), dtype=np.int64)
        for v in scope:
            index = index * cards[v] + draws[:, v]
        p *= np.asarray(table, dtype=np.float64).ravel()[index]
    return p


# ------------------------------------------------------------------------- the blocks
def test_small_budget_gives_cutsets_that_cover_fit_and_keep_zero_factors_whole():
    network = ring_network()
    whole = elimination_blocks(network, {})
    assert len(whole) == 1 and whole[0].cutset == () and whole[0].variables == tuple(range(6))
    blocks = elimination_blocks(network, {}, max_table_size=8)
    assert len(blocks) >= 2
    cuts = [set(b.cutset) for b in blocks]
    for i, j in itertools.combinations(range(len(cuts)), 2):
        assert not cuts[i] & cuts[j]  # disjoint cutsets
    for b in blocks:
        assert b.max_table_size <= 8
        assert set(b.variables) | set(b.cutset) == set(range(6))
        assert set(b.plan.order) == set(b.variables)  # the plan eliminates exactly the block
    assert set().union(*(b.variables for b in blocks)) == set(range(6))
    for scope in deterministic_scopes(network, {}):
        assert any(set(scope) <= set(b.variables) for b in blocks), scope
    with pytest.raises(ValueError, match="below the largest cardinality 3"):
        elimination_blocks(network, {}, max_table_size=2)
    with pytest.raises(ValueError, match="n_blocks must be at least 2"):
        elimination_blocks(network, {}, n_blocks=1)


def test_the_whole_network_has_a_budget_of_its_own():
    """The ring's whole elimination needs a table above 8 entries: a whole budget of that size
    makes one block, one entry less (or none) leaves the cutset blocks of ``max_table_size=8``."""
    network = ring_network()
    (one,) = elimination_blocks(network, {})
    largest = one.max_table_size
    assert largest > 8
    (whole,) = elimination_blocks(network, {}, max_table_size=8, max_whole_table_size=largest)
    assert whole.cutset == () and whole.variables == tuple(range(6))
    cut = elimination_blocks(network, {}, max_table_size=8)
    assert len(cut) >= 2
    below = elimination_blocks(network, {}, max_table_size=8, max_whole_table_size=largest - 1)
    assert below == cut


@pytest.mark.parametrize(
    "name", ["uai2006_bn/BN_1", "uai2008_grid_bn/50-12-5", "uai2014_mar/Pedigree_11"]
)
def test_shipped_networks_blocks_cover_every_free_variable_within_the_budget(name):
    path = UAI / f"{name}.uai"
    network = read_network(path)
    evid = Path(f"{path}.evid")
    evidence = read_evidence(evid if evid.is_file() else None, network)
    blocks = elimination_blocks(network, evidence)
    cuts = [set(b.cutset) for b in blocks]
    for i, j in itertools.combinations(range(len(cuts)), 2):
        assert not cuts[i] & cuts[j]  # disjoint cutsets where the budget allows
    free = set(range(network.n_vars)) - set(evidence)
    assert set().union(*(b.variables for b in blocks)) == free
    assert all(b.max_table_size <= 2**16 for b in blocks)
    for scope in deterministic_scopes(network, evidence):
        assert any(set(scope) <= set(b.variables) for b in blocks), scope


# ------------------------------------------------------------------------- exactness
def test_block_draws_follow_the_exact_conditional():
    """5,000 draws of every block from one state: each joint state of the block within 4.5
    binomial standard errors of its exact conditional probability (a chance failure < 1e-4 over
    all the states compared), and no state of conditional probability zero."""
    network = ring_network()
    states, pi = brute_force(network)
    blocks = elimination_blocks(network, {}, max_table_size=8)
    x = states[np.argmax(pi)]
    rng = np.random.default_rng(3)
    n = 5_000
    compared = 0
    for block in blocks:
        var = list(block.variables)
        rest = [v for v in range(6) if v not in var]
        same = np.flatnonzero((states[:, rest] == x[rest]).all(axis=1))
        exact = pi[same] / pi[same].sum()
        draws = np.stack([sample_block(network, block, x, rng) for _ in range(n)])
        for k, s in enumerate(same):
            freq = np.mean((draws == states[s, var]).all(axis=1))
            if exact[k] == 0:
                assert freq == 0
            else:
                se = np.sqrt(exact[k] * (1 - exact[k]) / n)
                assert abs(freq - exact[k]) <= 4.5 * se, (var, states[s], freq, exact[k])
            compared += 1
    assert compared > 2 * len(blocks)
    infeasible = x.copy()
    infeasible[5] = 1 - infeasible[0]  # breaks x0 = x5
    (outside,) = elimination_blocks(network, {0: 0, 5: 0})  # x0 and x5 held: no repair
    with pytest.raises(ValueError, match="probability zero"):
        sample_block(network, outside, infeasible, rng)


@pytest.mark.parametrize("name", ["ring", "uai2014_mar/Pedigree_11"])
def test_prepared_block_sampler_makes_the_reference_draws(name):
    """BlockSampler (factors conditioned on the evidence once, messages that no cutset value
    reaches kept between updates) draws what sample_block draws from the same generator, along
    a chain of updates of every block; on Pedigree_11 (deterministic inheritance factors,
    evidence, cutsets of 4-6 variables) from an exact draw, and it refuses a state that
    disagrees with its evidence."""
    if name == "ring":
        network, evidence = ring_network(), {3: 1}
        blocks = elimination_blocks(network, evidence, max_table_size=4)
        states, pi = brute_force(network)
        x = states[np.argmax(np.where(states[:, 3] == 1, pi, 0))]
    else:
        path = UAI / f"{name}.uai"
        network = read_network(path)
        evidence = read_evidence(Path(f"{path}.evid"), network)
        blocks = elimination_blocks(network, evidence)
        x = sample_exact(network, evidence, size=1, rng=0, max_table_size=None)[0]
    assert any(b.cutset for b in blocks)
    samplers = [BlockSampler(network, b, evidence) for b in blocks]
    if name != "ring":  # some messages kept between updates, some recomputed
        assert any(not all(s._constant_steps) and any(s._constant_steps) for s in samplers)
    ref, fast = np.random.default_rng(11), np.random.default_rng(11)
    moved = 0
    for _ in range(8):
        for block, sampler in zip(blocks, samplers, strict=True):
            a, b = sample_block(network, block, x, ref), sampler.draw(x, fast)
            np.testing.assert_array_equal(b, a)
            moved += int((x[list(block.variables)] != a).any())
            x[list(block.variables)] = a
    assert moved > len(blocks)
    bad = x.copy()
    v = next(iter(evidence))
    bad[v] = 1 - bad[v] if network.cards[v] == 2 else (bad[v] + 1) % network.cards[v]
    with pytest.raises(ValueError, match="disagrees with the block's evidence"):
        samplers[0].draw(bad, fast)


def test_kernel_of_the_chosen_blocks_is_invariant_and_irreducible_where_single_site_is_not():
    network = ring_network()
    states, pi = brute_force(network)
    blocks = [b.variables for b in elimination_blocks(network, {}, max_table_size=8)]
    T = block_gibbs_kernel(states, pi, blocks)
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    assert irreducible_on_support(T, pi)
    single = block_gibbs_kernel(states, pi, [(v,) for v in range(6)])
    assert not irreducible_on_support(single, pi)  # x0 = x5 locks single sites


def cutset_blocks(monkeypatch) -> BlockGibbs:
    """BlockGibbs on elimination blocks of tables up to 8 entries, the whole network given no
    budget of its own (``WHOLE_NETWORK_FACTOR`` 1), in the current model: cutset blocks on the
    ring network, whose whole elimination needs a bigger table."""
    from pymc_lbp.samplers.block import step_block_gibbs as block_gibbs

    monkeypatch.setattr(block_gibbs, "WHOLE_NETWORK_FACTOR", 1)
    return BlockGibbs(max_states=8)


def test_step_units_make_the_block_kernel_and_bayes_models_target_the_normalised_cpts(
    monkeypatch,
):
    network = ring_network()
    states, pi = brute_force(network)
    model = read_uai(network)
    with model:
        step = cutset_blocks(monkeypatch)
    assert step.logp_mode == "factors" and step.proposal == "eliminate"
    assert [tuple(step.elimination_blocks[u].variables) for u in range(len(step.units))] == [
        b.variables for b in elimination_blocks(network, {}, max_table_size=8)
    ]
    # one update of the step from feasible states: the enumerated unit transitions (sites are
    # the model's order; network variable step._net_free[i] is site step._net_sites[i])
    blocks = [b.variables for b in step.elimination_blocks]
    expected = block_gibbs_kernel(states, pi, blocks)
    for a in np.flatnonzero(pi > 0)[::5]:
        x = np.zeros(6, dtype=np.int64)
        x[step._net_sites] = states[a][step._net_free]
        row = np.zeros(len(states))
        for u in range(len(step.units)):
            Y, probs = step.unit_transitions(u, x)
            for y, p in zip(Y, probs, strict=True):
                net = y[step._net_sites]
                row[np.flatnonzero((states == net).all(axis=1))[0]] += p / len(step.units)
        np.testing.assert_allclose(row, expected[a], atol=1e-12)
    # BAYES: rows rescaled to sum 1 (read_uai accepts rows within 1e-4 of 1), as the model's
    # categoricals are
    cpt = UAINetwork("BAYES", [2, 3], [(0,), (0, 1)], [np.array([0.25, 0.75008]), np.array(
        [[0.25, 0.25, 0.5], [0.0, 0.7501, 0.25]])])  # fmt: skip
    target = cpt.normalised_cpts()  # what BlockGibbs draws from for kind="BAYES"
    np.testing.assert_allclose(target.tables[1][1], np.array([0.0, 0.7501, 0.25]) / 1.0001)
    bayes = read_uai(cpt, kind="BAYES")
    logp = bayes.compile_logp()
    info = bayes.uai_info
    states = np.array([(a, b) for a in range(2) for b in range(3)])
    log_model = []
    for s in states:
        point = dict(bayes.initial_point())
        for v in range(2):
            name, pos = info.names[v], int(info.positions[v])
            point[name] = np.array(point[name]).copy()
            point[name].reshape(-1)[pos] = s[v]
        log_model.append(logp(point))
    model_pi = np.exp(log_model) / np.exp(log_model).sum()
    np.testing.assert_allclose(model_pi, brute_force(target)[1], atol=1e-12)
    assert np.abs(model_pi - brute_force(cpt)[1]).max() > 1e-6  # the raw rows are not the target


# ------------------------------------------------------------------------- through pm.sample
def test_pm_sample_with_cutsets_matches_exact_marginals(monkeypatch):
    """Three blocks with cutsets; marginals within 4 MCSE of enumeration (MCSE from the chain's
    ArviZ estimate; a chance failure ~6e-5 per marginal)."""
    network = ring_network()
    states, pi = brute_force(network)
    model = read_uai(network)
    with model:
        step = cutset_blocks(monkeypatch)
        idata = pm.sample(
            step=[step], draws=1500, tune=0, chains=1, random_seed=7, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    assert len(step.units) >= 2
    clone = cloudpickle.loads(cloudpickle.dumps(step))  # cores > 1
    assert clone.elimination_blocks == step.elimination_blocks
    assert [u.elimination for u in clone._units] == step.elimination_blocks
    draws = uai_state_from_point({k: v.values[0] for k, v in idata.posterior.items()}, model)
    assert np.isfinite(np.log(brute_force_probability(network, draws))).all()
    for v, k in enumerate(network.cards.tolist()):
        for value in range(k):
            hits = (draws[:, v] == value).astype(np.float64)
            exact = float(pi[states[:, v] == value].sum())
            checked_ess(hits[None, :], f"variable {v} = {value}", method="bulk")
            mcse = float(np.asarray(az.mcse(hits[None, :])).ravel()[0])
            assert abs(hits.mean() - exact) <= max(4 * mcse, 1e-12), (v, value, hits.mean(), exact)


@pytest.mark.parametrize(
    ("name", "n_free"), [("uai2008_grid_bn/50-12-5", 143), ("uai2014_mar/DBN_11", 40)]
)
def test_cli_sampler_draws_whole_networks_that_fit_and_matches_the_shipped_marginals(
    caplog, name, n_free
):
    """50-12-5 (143 free variables, half of them deterministic; largest table 2**13) and DBN_11
    (40 densely coupled binary variables; 2**21, above the cutset blocks' 2**16, on which every
    sampler stayed in one mode): the CLI's default sampler is one elimination block, independent
    exact draws; every Rao-Blackwellised marginal within 4.5 MCSE of the shipped MAR (a chance
    failure < 1e-3 over the variables)."""
    path = UAI / f"{name}.uai"
    evid = Path(f"{path}.evid")
    model = read_uai(path, evidence=evid if evid.is_file() else None)
    with model, caplog.at_level(logging.INFO, logger="pymc_lbp"):
        (step,) = make_steps("block_gibbs", list(model.free_RVs), None)
        idata = pm.sample(
            step=[step], draws=150, tune=0, chains=2, cores=1, random_seed=2, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    assert len(step.units) == 1 and step.elimination_blocks[0].cutset == ()
    assert "one elimination block of every free variable" in step.blocks_reason
    from pymc_lbp.models.uai import uai_marginal_mcse

    ref = read_mar(Path(f"{path}.MAR"))
    marginals = uai_marginals(idata, model)
    mcse = uai_marginal_mcse(idata, model)
    free = np.flatnonzero(model.uai_info.fixed_values < 0)
    assert free.size == n_free
    worst = 0.0
    for v in free.tolist():
        err = np.abs(np.asarray(marginals[v]) - ref[v])
        bound = 4.5 * np.asarray(mcse[v]) + 1e-9
        assert np.all(err <= bound), (v, err, mcse[v])
        worst = max(worst, float(err.max()))
    assert worst > 0  # the estimate is a sample, not the reference copied


def test_options_and_models_elimination_cannot_take():
    network = ring_network()
    with read_uai(network):
        for bad in (0, 2.5, True):
            with pytest.raises(ValueError, match="max_states must be a positive integer"):
                BlockGibbs(max_states=bad)
        with pytest.raises(ValueError, match="max_states=2 is below the largest cardinality 3"):
            BlockGibbs(max_states=2)
        clusters = BlockGibbs(blocks="clusters")
    assert clusters.proposal == "exact" and clusters.elimination_blocks == []
    with pm.Model():
        pm.Bernoulli("z", 0.5, shape=2)
        with pytest.raises(ValueError, match=r"blocks='elimination'\) needs a model built by"):
            BlockGibbs(blocks="elimination")
