"""PyMC models of UAI networks: log density, layout, evidence, start states, forward sampling."""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest
from pytensor.graph.traversal import ancestors
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.variable import TensorConstant

from pymc_lbp.models.uai import (
    ImpossibleEvidenceError,
    UAINetwork,
    exact_marginals,
    forward_sample,
    read_evidence,
    read_network,
    read_uai,
    sample_exact,
    uai_marginals,
    uai_point_from_state,
    uai_state_from_point,
    uai_variable_map,
)
from pymc_lbp.models.uai.start import find_feasible_state

# Enumeration tests evaluate tiny graphs many times: skip pytensor's C compilation (tens of
# seconds on a cold cache). test_default_mode_agrees checks the default mode once.
FAST = "FAST_COMPILE"


def _expected_markov_logp(net, state, evidence):
    """log prod_f f(x) minus the uniform priors' log K per free variable, minus the factors
    whose whole scope is fixed (they are constants outside the model)."""
    w = net.weight(state)
    if w == 0:
        return -np.inf
    free = [v for v in range(len(net.cards)) if v not in evidence]
    fixed_factors = [f for f, s in enumerate(net.scopes) if all(v in evidence for v in s)]
    const = sum(math.log(net.entry(f, state)) for f in fixed_factors)
    return math.log(w) - sum(math.log(net.cards[v]) for v in free) - const


@pytest.mark.parametrize("evidence", [None, {1: 2}, {0: 1, 3: 0}])
def test_markov_logp_at_every_state(tmp_path, tiny_markov, evidence):
    model = read_uai(tiny_markov.write(tmp_path, "tiny.uai"), evidence)
    info = uai_variable_map(model)
    logp = model.compile_logp(mode=FAST)
    n_finite = 0
    for state in tiny_markov.states(evidence):
        expected = _expected_markov_logp(tiny_markov, state, evidence or {})
        got = logp(uai_point_from_state(np.array(state), model))
        if expected == -np.inf:
            assert got == -np.inf
        else:
            n_finite += 1
            assert got == pytest.approx(expected, abs=1e-10)
            # the documented offset relation
            assert got == pytest.approx(
                info.network.log_factor_product(np.array(state)) + info.logp_offset, abs=1e-10
            )
    assert n_finite > 0


@pytest.mark.parametrize("evidence", [None, {1: 2}, {4: 0, 0: 1}])
def test_bayes_logp_is_log_joint_at_every_state(tmp_path, tiny_bayes, evidence):
    model = read_uai(tiny_bayes.write(tmp_path, "tiny_bn.uai"), evidence)
    assert uai_variable_map(model).logp_offset == 0.0
    logp = model.compile_logp(mode=FAST)
    for state in tiny_bayes.states(evidence):
        w = tiny_bayes.weight(state)
        got = logp(uai_point_from_state(np.array(state), model))
        assert got == (pytest.approx(math.log(w), abs=1e-10) if w > 0 else -np.inf)


def test_default_mode_agrees(tmp_path, tiny_bayes):
    model = read_uai(tiny_bayes.write(tmp_path, "tiny_bn.uai"), {0: 1})
    point = model.initial_point()
    assert model.compile_logp()(point) == pytest.approx(model.compile_logp(mode=FAST)(point))


def test_markov_layout(tmp_path, tiny_markov):
    model = read_uai(tiny_markov.write(tmp_path, "tiny.uai"), {1: 2})
    info = uai_variable_map(model)
    assert [rv.name for rv in model.free_RVs] == ["x_card2", "x_card3"]
    assert isinstance(model["x_card2"].owner.op, type(pm.Bernoulli.dist(0.5).owner.op))
    assert info.members["x_card2"].tolist() == [0, 2, 3]
    assert info.members["x_card3"].tolist() == [4]
    assert model.coords["x_card2_var"] == (0, 2, 3)
    assert info.locate(3) == ("x_card2", 2, -1, False)
    assert info.locate(1) == ("", -1, 2, False)
    # reduced signatures: (2,0,1)->(2,0) 2x2; (4,3) 3x2; (1,4)->(4,) 3; (0,3) 2x2; (3,) 2
    assert sorted(p.name for p in model.potentials) == [
        "factors_2",
        "factors_2x2",
        "factors_3",
        "factors_3x2",
    ]


def test_potentials_index_constant_tables(tmp_path, tiny_markov):
    """The relaxation code relies on: constant table, arange, gathers; no switch/eq."""
    model = read_uai(tiny_markov.write(tmp_path, "tiny.uai"))
    for pot in model.potentials:
        indexed = pot.owner.inputs[0]
        assert type(indexed.owner.op).__name__ == "AdvancedSubtensor"
        table, first, *gathers = indexed.owner.inputs
        assert isinstance(table, TensorConstant) and isinstance(first, TensorConstant)
        assert np.array_equal(first.data, np.arange(first.data.size))
        for g in gathers:
            assert g.owner.inputs[0] in model.free_RVs
        names = {
            type(node.op.scalar_op).__name__
            for node in (v.owner for v in ancestors([pot]) if v.owner is not None)
            if isinstance(node.op, Elemwise)
        }
        assert not names & {"Switch", "EQ", "NEQ"}


def test_bayes_layout(tmp_path, tiny_bayes):
    model = read_uai(tiny_bayes.write(tmp_path, "tiny_bn.uai"), {1: 0})
    info = uai_variable_map(model)
    assert [rv.name for rv in model.free_RVs] == ["x_l0_card2", "x_l0_card3", "x_l2_card2"]
    assert [rv.name for rv in model.observed_RVs] == ["x_l1_card3_obs"]
    assert sorted(info.members["x_l2_card2"].tolist()) == [2, 4]
    assert info.locate(1) == ("x_l1_card3_obs", 0, 0, True)
    assert not model.potentials


def test_state_point_round_trip(tmp_path, tiny_bayes):
    model = read_uai(tiny_bayes.write(tmp_path, "tiny_bn.uai"), {1: 2})
    states = np.array([s for s in tiny_bayes.states({1: 2})])
    point = uai_point_from_state(states, model)
    np.testing.assert_array_equal(uai_state_from_point(point, model), states)
    with pytest.raises(ValueError, match="fixed value 2 of variable 1"):
        uai_point_from_state(np.zeros(5, dtype=int), model)


def test_initial_point_is_the_feasible_start(tmp_path, tiny_markov):
    model = read_uai(tiny_markov.write(tmp_path, "tiny.uai"), {1: 0}, seed=4)
    info = uai_variable_map(model)
    start = uai_state_from_point(model.initial_point(), model)
    np.testing.assert_array_equal(start, info.start)
    assert start[1] == 0
    assert np.isfinite(model.compile_logp(mode=FAST)(model.initial_point()))
    assert info.start_source == "greedy repair"


def test_user_start(tmp_path, tiny_markov):
    path = tiny_markov.write(tmp_path, "tiny.uai")
    good = next(s for s in tiny_markov.states({1: 0}) if tiny_markov.weight(s) > 0)
    zero = next(s for s in tiny_markov.states() if tiny_markov.weight(s) == 0)
    model = read_uai(path, start=good)
    assert uai_variable_map(model).start_source == "user"
    np.testing.assert_array_equal(uai_state_from_point(model.initial_point(), model), good)
    with pytest.raises(ValueError, match="probability zero"):
        read_uai(path, start=zero)
    with pytest.raises(ValueError, match=r"x\[1\] = 0, but the evidence says 2"):
        read_uai(path, {1: 2}, start=good)


def test_start_from_map_file_next_to_network(tmp_path, tiny_markov):
    path = tiny_markov.write(tmp_path, "tiny.uai")
    good = [s for s in tiny_markov.states() if tiny_markov.weight(s) > 0][-1]
    (tmp_path / "tiny.uai.MAP").write_text("MAP\n5 " + " ".join(map(str, good)) + "\n")
    info = uai_variable_map(read_uai(path))
    assert info.start_source.startswith("map file")
    assert info.start.tolist() == list(good)


def test_impossible_evidence_in_read_uai(tmp_path, tiny_markov, tiny_bayes):
    with pytest.raises(ImpossibleEvidenceError, match=r"tiny.uai.*impossible") as err:
        read_uai(tiny_markov.write(tmp_path, "tiny.uai"), {3: 1, 4: 0})
    assert err.value.definitive
    with pytest.raises(ImpossibleEvidenceError, match=r"tiny_bn.uai.*impossible"):
        read_uai(tiny_bayes.write(tmp_path, "tiny_bn.uai"), {0: 1, 1: 1})


def test_impossible_evidence_file_is_named(tmp_path, tiny_markov):
    evid = tmp_path / "dead.evid"
    evid.write_text("2 3 1 4 0\n")
    with pytest.raises(ImpossibleEvidenceError) as err:
        read_uai(tiny_markov.write(tmp_path, "tiny.uai"), evid)
    assert str(err.value).startswith(f"{evid}: tiny.uai: the evidence is impossible: factor 2")
    assert "x4=0, x3=1" in str(err.value) and err.value.definitive


def test_impossible_evidence_only_visible_globally():
    eq = np.eye(2)
    net = UAINetwork("MARKOV", [2, 2, 2], [(0, 1), (1, 2)], [eq, eq])
    with pytest.raises(ImpossibleEvidenceError, match=r"P\(evidence\) = 0 \(checked exactly") as e:
        read_uai(net, {0: 0, 2: 1})
    assert e.value.definitive
    with pytest.raises(ImpossibleEvidenceError, match="appears to be impossible") as e:
        find_feasible_state(net, {0: 0, 2: 1}, max_exact_table_size=0)
    assert not e.value.definitive


def test_kind_override_and_cpt_checks(tmp_path, tiny_markov, tiny_bayes):
    with pytest.raises(ValueError, match="not a Bayesian network"):
        read_uai(tiny_markov.write(tmp_path, "tiny.uai"), kind="BAYES")
    markov_view = read_uai(tiny_bayes.write(tmp_path, "tiny_bn.uai"), kind="MARKOV")
    assert [rv.name for rv in markov_view.free_RVs] == ["x_card2", "x_card3"]
    bad = tiny_bayes.text().replace("0.25 0.25\n0.5", "0.25 0.25\n0.6")
    (tmp_path / "bad_bn.uai").write_text(bad)
    with pytest.raises(ValueError, match=r"bad_bn.uai: factor 4 .* sums to 1.1.*kind='MARKOV'"):
        read_uai(tmp_path / "bad_bn.uai")


def test_forward_sampling_matches_exact_prior(tmp_path, tiny_bayes):
    path = tiny_bayes.write(tmp_path, "tiny_bn.uai")
    model = read_uai(path)
    draws = 3000
    values = pm.draw(model.free_RVs, draws=draws, random_seed=11)
    samples = {rv.name: v[None] for rv, v in zip(model.free_RVs, values, strict=True)}
    freq = uai_marginals(samples, model)
    exact = exact_marginals(read_network(path))
    for f, p in zip(freq, exact, strict=True):
        se = np.sqrt(p * (1 - p) / draws)
        assert np.all(np.abs(f - p) <= 5 * se + 1e-12)
    states = uai_state_from_point({k: v[0] for k, v in samples.items()}, model)
    assert np.all(np.isfinite(read_network(path).log_factor_product(states)))


def test_uai_marginals_from_inference_data(tmp_path, tiny_markov):
    """pm.sample with PyMC's own samplers: starts feasible, never leaves the support."""
    model = read_uai(tiny_markov.write(tmp_path, "tiny.uai"), {1: 1})
    with model:
        idata = pm.sample(
            draws=200,
            tune=0,
            chains=1,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    marg = uai_marginals(idata, model)
    assert [m.size for m in marg] == tiny_markov.cards
    np.testing.assert_allclose([m.sum() for m in marg], 1.0)
    np.testing.assert_array_equal(marg[1], [0, 1, 0])
    post = {name: idata.posterior[name].values for name in ("x_card2", "x_card3")}
    states = uai_state_from_point(post, model).reshape(-1, 5)
    assert np.all([tiny_markov.weight(tuple(s)) > 0 for s in states])


SHIPPED = [
    ("uai2014_mar/DBN_11.small.uai", False, None),
    ("uai2014_mar/Grids_12.uai", False, None),
    ("uai2014_mar/CSP_12.uai", False, None),
    ("uai2014_mar/Pedigree_11.uai", True, None),
    ("uai2006_bn/BN_0.uai", True, None),
    ("uai2006_bn/BN_0.uai", True, "BAYES"),
    ("uai2008_grid_bn/50-12-5.uai", True, None),
]


@pytest.mark.parametrize(("name", "with_evidence", "kind"), SHIPPED)
def test_shipped_models(uai_dir, name, with_evidence, kind):
    path = uai_dir / name
    evidence = path.with_name(path.name + ".evid") if with_evidence else None
    model = read_uai(path, evidence, kind=kind)
    info = uai_variable_map(model)
    net = info.network
    logp = model.compile_logp(mode=FAST)
    start = model.initial_point()
    assert np.isfinite(logp(start))
    if path.with_name(path.name + ".MAP").exists():
        assert info.start_source.startswith("map file")
    elif info.kind == "BAYES" or name.endswith("BN_0.uai"):
        assert info.start_source == "forward sampling"
    states = sample_exact(net, info.evidence, 2, rng=0)
    lp = [logp(uai_point_from_state(s, model)) for s in states]
    lf = net.log_factor_product(states)
    assert np.all(np.isfinite(lp))
    # BAYES: CPT rows are rescaled to sum to exactly 1 (printed values are off by ~1e-7)
    tol = 1e-5 if info.kind == "BAYES" else 1e-8
    assert lp[1] - lp[0] == pytest.approx(lf[1] - lf[0], abs=tol)
    assert lp[0] == pytest.approx(lf[0] + info.logp_offset, abs=tol * max(1, net.n_vars / 10))


@pytest.mark.parametrize("name", ["Pedigree_11.uai", "Promedus_11.uai"])
def test_start_search_without_map_file(uai_dir, name):
    """Deterministic moralised BNs: a random state is infeasible; the repair walk finds one."""
    path = uai_dir / "uai2014_mar" / name
    net = read_network(path)
    evidence = read_evidence(path.with_name(path.name + ".evid"), net)
    bare = UAINetwork(net.kind, net.cards, net.scopes, net.tables)  # no path: no MAP file
    state, source = find_feasible_state(bare, evidence, rng=1)
    assert source == "greedy repair"
    assert np.isfinite(net.log_factor_product(state))
    assert all(state[v] == x for v, x in evidence.items())


def test_forward_sample_likelihood_weights(tmp_path, tiny_bayes):
    net = read_network(tiny_bayes.write(tmp_path, "tiny_bn.uai"))
    evidence = {4: 1, 1: 0}
    log_pe, _ = tiny_bayes.brute_force(evidence)
    size = 4000
    states, log_w = forward_sample(net, size, evidence=evidence, rng=5)
    assert np.all(states[:, 4] == 1) and np.all(states[:, 1] == 0)
    w = np.exp(log_w)
    assert abs(w.mean() - math.exp(log_pe)) <= 5 * w.std() / math.sqrt(size)
