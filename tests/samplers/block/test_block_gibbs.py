"""BlockGibbs: exact block Gibbs on clusters of any discrete PyMC model's structure (issue #27.3).

The kernels are enumerated here from their definition (each block drawn from its exact joint
conditional, a block picked uniformly at random), with the targets written out in numpy, so the
step is checked against the math and the math against ``pi T = pi``.
"""

from __future__ import annotations

import itertools
import math

import arviz as az
import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_lbp
from pymc_lbp import BlockGibbs
from pymc_lbp.factor_graph.clusters import graph_clusters
from pymc_lbp.models.uai import UAINetwork, read_uai, uai_clusters
from pymc_lbp.samplers.block.model_structure import structure_clusters
from pymc_lbp.samplers.block.step_block_gibbs import CLUSTER_SHARE
from tests.helpers.block_kernels import block_gibbs_kernel, irreducible_on_support
from tests.helpers.ess import checked_ess

# ------------------------------------------------------------------------- the tiny models
# XOR model: x0 != x1 (a Potential that is -inf otherwise), x2 coupled to x1, and y ~ T[x2]
# with a zero in T. Sites: x0 x1 x2 (binary), y (3 categories).
P_X = np.array([0.3, 0.6, 0.45])
T_Y = np.array([[0.6, 0.4, 0.0], [0.1, 0.3, 0.6]])
XOR_KINDS = [2, 2, 2, 3]


def xor_model() -> pm.Model:
    with pm.Model() as model:
        x = pm.Bernoulli("x", P_X, shape=3, initval=np.array([0, 1, 0]))
        pm.Potential("xor", pt.switch(pt.neq(x[0], x[1]), 0.0, -np.inf))
        pm.Potential("couple", 0.9 * pt.eq(x[1], x[2]))
        pm.Categorical("y", p=pt.as_tensor(T_Y)[x[2]], initval=np.array(1))
    return model


def xor_log_pi(s: np.ndarray) -> float:
    x, y = s[:3], s[3]
    if x[0] == x[1]:
        return -np.inf
    lp = np.sum(np.where(x == 1, np.log(P_X), np.log1p(-P_X))) + 0.9 * (x[1] == x[2])
    with np.errstate(divide="ignore"):
        return float(lp + np.log(T_Y[x[2], y]))


# Mixed model: a (3) -> b (3) through a table with zeros, b -> c (binary), a binary pair d
# coupled to c by a summed Potential, and an observed Bernoulli child of a.
P_A = np.array([0.3, 0.5, 0.2])
T_B = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.0, 0.4, 0.6]])
P_C = np.array([0.2, 0.9, 0.5])
P_OBS = np.array([0.7, 0.2, 0.5])
MIXED_KINDS = [3, 3, 2, 2, 2]


def mixed_model() -> pm.Model:
    with pm.Model() as model:
        a = pm.Categorical("a", p=P_A)
        b = pm.Categorical("b", p=pt.as_tensor(T_B)[a], initval=np.array(1))
        c = pm.Bernoulli("c", p=pt.as_tensor(P_C)[b])
        d = pm.Bernoulli("d", p=0.3, shape=2)
        pm.Potential("dc", 0.8 * pt.eq(d[0], c) + 0.5 * pt.eq(d[1], d[0]))
        pm.Bernoulli("obs", p=pt.as_tensor(P_OBS)[a], observed=1)
    return model


def mixed_log_pi(s: np.ndarray) -> float:
    a, b, c, d0, d1 = s
    with np.errstate(divide="ignore"):
        lp = np.log(P_A[a]) + np.log(T_B[a, b]) + np.log(P_C[b] if c else 1 - P_C[b])
    lp += np.log(0.3 if d0 else 0.7) + np.log(0.3 if d1 else 0.7)
    return float(lp + 0.8 * (d0 == c) + 0.5 * (d1 == d0) + np.log(P_OBS[a]))


def joint(kinds, log_pi):
    states = np.array(list(itertools.product(*[range(k) for k in kinds])), dtype=np.int64)
    lp = np.array([log_pi(s) for s in states])
    pi = np.exp(lp - lp.max())
    return states, pi / pi.sum()


@pytest.fixture(scope="module")
def xor_step():
    model = xor_model()
    with model:
        step = BlockGibbs(max_states=6 * CLUSTER_SHARE)
    return model, step


@pytest.fixture(scope="module")
def mixed_step():
    model = mixed_model()
    with model:
        step = BlockGibbs(max_states=6 * CLUSTER_SHARE)
    return model, step


def step_kernel(step, states, rows) -> np.ndarray:
    """The step's own transition matrix (one random-scan update) from the states ``rows``
    (indices into ``states``), from its unit updates."""
    index = {tuple(s): i for i, s in enumerate(states)}
    T = np.zeros((len(states), len(states)))
    for a in rows:
        x = states[a]
        for u in range(len(step.units)):
            Y, probs = step.unit_transitions(u, x)
            for y, p in zip(Y, probs, strict=True):
                T[a, index[tuple(y)]] += p / len(step.units)
    return T


# ------------------------------------------------------------------------- exact kernels
def test_kernel_is_exact_block_gibbs_invariant_and_irreducible_where_single_site_is_not(
    xor_step,
):
    _, step = xor_step
    # both zero-probability walls were found and each lies inside one block of <= 6 states
    assert step.scopes == [(0, 1), (2, 3)]
    assert all(any(set(s) <= set(b) for b in step.clusters) for s in step.scopes)
    assert all(math.prod(XOR_KINDS[i] for i in b) <= 6 for b in step.clusters)
    assert len(step.clusters) > 1  # not one block of everything: the kernel test has teeth
    assert step.uncovered_sites.size == 0

    states, pi = joint(XOR_KINDS, xor_log_pi)
    assert 0 < np.count_nonzero(pi) < len(states)  # there are zero-probability states
    T = block_gibbs_kernel(states, pi, [list(b) for b in step.clusters])
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    flow = pi[:, None] * T
    np.testing.assert_allclose(flow, flow.T, atol=1e-12)  # each block update is reversible

    # the step's own transition probabilities are the enumerated kernel's, state by state
    feasible = np.flatnonzero(pi > 0)
    np.testing.assert_allclose(
        step_kernel(step, states, feasible)[feasible], T[feasible], atol=1e-10
    )

    # irreducible on the feasible states; single-site Gibbs is stationary but reducible there
    single = block_gibbs_kernel(states, pi, [[i] for i in range(len(XOR_KINDS))])
    np.testing.assert_allclose(pi @ single, pi, atol=1e-12)
    assert irreducible_on_support(T, pi)
    assert not irreducible_on_support(single, pi)


def test_mixed_model_kernel_is_invariant_on_the_chosen_clusters(mixed_step):
    _, step = mixed_step
    assert step.scopes == [(0, 1)]  # the zeros of T_B; P_C, the Potential and obs have none
    states, pi = joint(MIXED_KINDS, mixed_log_pi)
    T = block_gibbs_kernel(states, pi, [list(b) for b in step.clusters])
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    assert irreducible_on_support(T, pi)
    feasible = np.flatnonzero(pi > 0)
    np.testing.assert_allclose(
        step_kernel(step, states, feasible)[feasible], T[feasible], atol=1e-10
    )


# ------------------------------------------------------------------------- pm.sample
@pytest.mark.parametrize(
    ("fixture", "kinds", "log_pi"),
    [("xor_step", XOR_KINDS, xor_log_pi), ("mixed_step", MIXED_KINDS, mixed_log_pi)],
    ids=["xor", "mixed"],
)
def test_pm_sample_matches_exact_marginals(request, fixture, kinds, log_pi):
    model, step = request.getfixturevalue(fixture)
    states, pi = joint(kinds, log_pi)
    with model:
        idata = pm.sample(
            step=[step], draws=1200, tune=50, chains=1, random_seed=11, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    post = idata.posterior
    draws = np.concatenate(
        [post[s.name].values.reshape(1, post.sizes["draw"], -1) for s in step.specs], axis=2
    )[0]
    assert np.all(np.isfinite([log_pi(s) for s in draws]))  # never an impossible state
    checked = 0
    for site, k in enumerate(kinds):
        for value in range(k):
            exact = float(pi[states[:, site] == value].sum())
            hits = (draws[:, site] == value).astype(np.float64)
            mcse = float(np.asarray(az.mcse(hits[None, :])).ravel()[0])
            if 0 < hits.mean() < 1:  # the MCSE's ESS (600 draws gave 188 on "mixed")
                checked_ess(hits[None, :], f"site {site} = {value}")
            # 4 MCSE (a chance failure ~6e-5 per marginal), MCSE estimated from the chain
            assert abs(hits.mean() - exact) <= 4 * mcse, (site, value, hits.mean(), exact, mcse)
            checked += 1
    assert checked == sum(kinds)


# ------------------------------------------------------------------------- the clusters
def chain_with_constraints(n: int = 8) -> pm.Model:
    """A chain of 3-category sites (pairwise Potentials) with two hard constraints: a triple
    that must not be all equal and a pair that must differ."""
    with pm.Model() as model:
        z = pm.Categorical("z", p=np.ones(3) / 3, shape=n, initval=np.arange(n) % 3)
        pm.Potential("chain", 0.4 * pt.sum(pt.eq(z[1:], z[:-1])))
        same = pt.and_(pt.eq(z[0], z[1]), pt.eq(z[1], z[2]))
        pm.Potential("triple", pt.switch(same, -np.inf, 0.0))
        pm.Potential("pair", pt.switch(pt.eq(z[5], z[7]), -np.inf, 0.0))
    return model


def test_clusters_cover_every_site_keep_scopes_whole_and_respect_the_budget():
    model = chain_with_constraints()
    with model:
        step = BlockGibbs(max_states=9 * CLUSTER_SHARE)
    structure = step.structure
    assert structure.analysed and structure.unchecked == ()
    assert step.scopes == [(0, 1, 2), (5, 7)]
    chain_pairs = {(i, i + 1) for i in range(7)} | {(0, 2), (5, 7)}
    assert {(a, b) for a, nb in structure.adjacency.items() for b in nb if a < b} == chain_pairs
    assert step.clusters == structure_clusters(structure, 9)
    for budget in (3, 9, 27):
        blocks = structure_clusters(structure, budget)
        sets = [set(b) for b in blocks]
        assert set().union(*sets) == set(range(8))
        for scope in step.scopes:
            assert any(set(scope) <= b for b in sets), (budget, scope)
        for b in blocks:  # within the budget, except a scope alone above it
            assert 3 ** len(b) <= budget or b in step.scopes, (budget, b)
    assert (0, 1, 2) in structure_clusters(structure, 3)  # 27 states, above the budget of 3
    # the generic algorithm: a 4-state scope above a budget of 2 is a block of its own
    assert graph_clusters({0: [1], 1: [2], 2: []}, [2, 2, 2], [(0, 1)], max_states=2) == [
        (0, 1),
        (2,),
    ]
    with pytest.raises(ValueError, match="not a variable of the graph"):
        graph_clusters({0: [5]}, [2, 2])


def tiny_network() -> UAINetwork:
    """Four variables, cards 2 3 2 2: x0 -> x1 -> x2 (a zero CPT entry), (x1, x3) a factor."""
    t01 = np.array([[1.0, 2.0, 0.5], [0.0, 1.0, 3.0]])  # zero at (x0=1, x1=0)
    t12 = np.array([[1.0, 2.0], [0.5, 0.5], [2.0, 1.0]])
    t13 = np.array([[1.0, 3.0], [2.0, 1.0], [0.7, 1.5]])
    t3 = np.array([0.4, 0.6])
    return UAINetwork("MARKOV", [2, 3, 2, 2], [(0, 1), (1, 2), (1, 3), (3,)], [t01, t12, t13, t3])


def test_uai_model_gets_the_cli_blocks():
    from pymc_lbp.cli.samplers import make_steps

    network = tiny_network()
    model = read_uai(network, {3: 1})
    with model:
        step = BlockGibbs(blocks="clusters", max_states=4 * CLUSTER_SHARE)
        big = BlockGibbs(blocks="clusters")
        default = BlockGibbs()
        (cli,) = make_steps("block_gibbs", list(model.free_RVs), None)
    for s, budget in ((step, 4), (big, 1024)):
        expected = uai_clusters(network, {3: 1}, max_states=budget)
        assert [tuple(b.block.tolist()) for b in s.blockset] == expected
    assert len(step.units) > 1 and len(big.units) == 1  # 12 free joint states: one block
    for s in (default, cli):  # elimination blocks: the 3 free variables fit in one
        assert s.proposal == "eliminate"
        assert [b.variables for b in s.elimination_blocks] == [(0, 1, 2)]
    assert isinstance(cli, BlockGibbs) and cli.units == default.units
    assert step.logp_mode == "factors" and step.structure is None
    assert len(step.scopes) == 1 and any(set(step.scopes[0]) <= set(b) for b in step.clusters)


# ------------------------------------------------------------------------- the step's contract
def test_options_are_checked_before_any_compilation():
    model = xor_model()
    with model:
        for bad in (0, -2, 2.5, True, "8"):
            with pytest.raises(ValueError, match="max_states must be a positive integer"):
                BlockGibbs(max_states=bad)
        with pytest.raises(ValueError, match=r"24 joint states, more than max_states=16"):
            BlockGibbs(blocks=[[0, 1, 2, 3]], max_states=16)  # a given block above it, by name
        with pytest.raises(ValueError, match="blocks must be one of"):
            BlockGibbs(blocks="grid")
        with pytest.raises(ValueError, match="non-empty"):
            BlockGibbs(blocks=[[0], []])
        with pytest.raises(TypeError, match="sequence of sequences"):
            BlockGibbs(blocks=[3])
    with pm.Model():
        pm.Bernoulli("z", 0.5, shape=2)
        mu = pm.Normal("mu")
        k = pm.Poisson("k", 3.0)
        with pytest.raises(ValueError, match="is continuous"):
            BlockGibbs([mu])
        with pytest.raises(ValueError, match=r"BlockGibbs samples Bernoulli and categorical.*'k'"):
            BlockGibbs([k])


def test_given_blocks_pickle_register_and_run_in_the_compiled_program():
    model = xor_model()
    with model:
        step = BlockGibbs(blocks=[[0, 1], [2]])
        with pytest.raises(ValueError, match="outside 0..3"):
            BlockGibbs(blocks=[[0, 4]])
    assert step.clusters == [(0, 1), (2,)] and step.uncovered_sites.tolist() == [3]
    assert step.name == "block_gibbs" and step.scopes == []
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    x = np.array([0, 1, 1, 2])
    for u in range(len(step.units)):
        np.testing.assert_array_equal(
            step.unit_transitions(u, x)[1], clone.unit_transitions(u, x)[1]
        )
    x_rv, y_rv = model["x"], model["y"]
    assert BlockGibbs.competence(x_rv) == pm.step_methods.compound.Competence.COMPATIBLE
    try:
        pymc_lbp.register(BlockGibbs)
        assert BlockGibbs.competence(y_rv) == pm.step_methods.compound.Competence.IDEAL
    finally:
        pymc_lbp.unregister()
    with pm.Model():
        k = pm.Poisson("k", 3.0)
    assert BlockGibbs.competence(k) == pm.step_methods.compound.Competence.INCOMPATIBLE
    pytest.importorskip("blackjax", reason="pymc_lbp[jax] extra not installed")
    # the random scan in the JAX program (tests/whole_model/test_block_twins.py holds its moves
    # to the numpy steps'): every draw stays on the support, x0 != x1
    idata = pymc_lbp.sample(
        step=[step], model=model, draws=30, tune=5, chains=1, progressbar=False,
        compute_convergence_checks=False, random_seed=3,
    )  # fmt: skip
    s = np.concatenate([idata.posterior["x"].values[0], idata.posterior["y"].values[0, :, None]], 1)
    assert all(np.isfinite(xor_log_pi(row)) for row in s)
    assert len(np.unique(s, axis=0)) > 1
    assert set(np.unique(idata.sample_stats["block"].values)) <= {0, 1, 2}
