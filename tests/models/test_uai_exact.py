"""Exact inference (bucket-tree elimination) against brute force and the shipped references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pymc_lbp.models.uai import (
    ImpossibleEvidenceError,
    TreewidthTooLargeError,
    UAINetwork,
    elimination_plan,
    exact_inference,
    exact_marginals,
    log_partition,
    read_mar,
    read_network,
    read_pr,
    sample_exact,
)

# (file, evidence?, reference log10 Z): the .PR where shipped, else the README's exact value
SHIPPED = [
    ("uai2014_mar/DBN_11.small.uai", False, 1.845719),
    ("uai2014_mar/Grids_12.uai", False, None),
    ("uai2014_mar/CSP_12.uai", False, None),
    ("uai2014_mar/Pedigree_11.uai", True, None),
    ("uai2006_bn/BN_0.uai", True, -8.893083),
    ("uai2008_grid_bn/50-12-5.uai", True, -0.404893),
]


@pytest.mark.parametrize("evidence", [None, {1: 0}, {1: 2, 3: 1}, {4: 1}])
def test_tiny_markov_matches_brute_force(tmp_path, tiny_markov, evidence):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    log_z, marg = tiny_markov.brute_force(evidence)
    res = exact_inference(net, evidence)
    assert res.log_z == pytest.approx(log_z, abs=1e-12)
    assert res.log10_z == pytest.approx(log_z / math.log(10), abs=1e-12)
    for a, b in zip(res.marginals, marg, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    assert log_partition(net, evidence) == pytest.approx(log_z, abs=1e-12)


@pytest.mark.parametrize("evidence", [None, {1: 2}, {4: 0, 0: 1}])
def test_tiny_bayes_matches_brute_force(tmp_path, tiny_bayes, evidence):
    net = read_network(tiny_bayes.write(tmp_path, "tiny_bn.uai"))
    log_z, marg = tiny_bayes.brute_force(evidence)
    if evidence is None:
        assert log_z == pytest.approx(0.0, abs=1e-12)  # normalised BN
    res = exact_inference(net, evidence)
    assert res.log_z == pytest.approx(log_z, abs=1e-12)
    for a, b in zip(res.marginals, marg, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("heuristic", ["min-fill", "min-weight", "rcm"])
def test_every_heuristic_is_exact(tmp_path, tiny_markov, heuristic):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    log_z, marg = tiny_markov.brute_force({3: 1})
    res = exact_inference(net, {3: 1}, heuristic=heuristic)
    assert res.plan.heuristic == heuristic
    assert res.log_z == pytest.approx(log_z, abs=1e-12)
    for a, b in zip(res.marginals, marg, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_large_scope_and_isolated_variable():
    """A 60-variable factor (beyond einsum's 52 letters; 56 of cardinality 1), a variable
    without factors and a unary factor."""
    rng = np.random.default_rng(1)
    cards = np.array([1] * 56 + [2] * 6)
    table = rng.random((1,) * 56 + (2,) * 4)
    net = UAINetwork("MARKOV", cards, [tuple(range(60)), (60,)], [table, np.array([1.0, 3.0])])
    res = exact_inference(net)
    # Z = sum(table) * 4 * 2 (variable 61 has no factor: a factor of 2)
    assert res.log_z == pytest.approx(math.log(table.sum() * 4 * 2), rel=1e-12)
    np.testing.assert_allclose(res.marginals[59], table.sum(axis=tuple(range(59))) / table.sum())
    np.testing.assert_allclose(res.marginals[60], [0.25, 0.75])
    np.testing.assert_allclose(res.marginals[61], [0.5, 0.5])
    np.testing.assert_allclose(res.marginals[0], [1.0])


def test_extreme_values_stay_finite():
    """Ising-like chain with couplings e^+-40: Z far above float64 range is fine in log space."""
    n = 200
    j = 40.0
    pair = np.exp(np.array([[j, -j], [-j, j]]))
    scopes = [(i, i + 1) for i in range(n - 1)]
    net = UAINetwork("MARKOV", np.full(n, 2), scopes, [pair] * (n - 1))
    expected = math.log(2) + (n - 1) * (j + math.log1p(math.exp(-2 * j)))
    res = exact_inference(net)
    assert res.log_z == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(res.marginals[n // 2], [0.5, 0.5], atol=1e-12)


@pytest.mark.parametrize(("name", "with_evidence", "log10_ref"), SHIPPED)
def test_shipped_marginals_and_pr(uai_dir, name, with_evidence, log10_ref):
    path = uai_dir / name
    net = read_network(path)
    evidence = path.with_name(path.name + ".evid") if with_evidence else None
    res = exact_inference(net, evidence)
    reference = read_mar(path.with_name(path.name + ".MAR"))
    err = max(np.abs(a - b).max() for a, b in zip(res.marginals, reference, strict=True))
    assert err < 2e-6
    pr = path.with_name(path.name + ".PR")
    if pr.exists():
        # .PR files print 6 significant digits
        assert res.log10_z == pytest.approx(read_pr(pr), abs=6e-4)
    if log10_ref is not None:
        assert res.log10_z == pytest.approx(log10_ref, abs=2e-6)


def test_bn0_is_a_normalised_bn_labelled_markov(uai_dir):
    """UAI'06 BNs say MARKOV but factor i is the CPT of variable i (child last).

    (Z = 1 without evidence; exact elimination of that case needs a 2^24 table and ~5 s, so it
    is checked through the CPT rows instead.)
    """
    net = read_network(uai_dir / "uai2006_bn" / "BN_0.uai")
    assert net.kind == "MARKOV"
    assert net.cpt_children().tolist() == list(range(net.n_vars))
    for table in net.tables:
        np.testing.assert_allclose(table.sum(axis=-1), 1.0, atol=1e-6)


def test_memory_guard_refuses_wide_networks(uai_dir):
    net = read_network(uai_dir / "uai2006_bn" / "BN_1.uai")
    plan = elimination_plan(net)
    assert plan.max_table_size > 2**27
    with pytest.raises(
        TreewidthTooLargeError, match=r"BN_1.uai.*entries.*induced width 2\d"
    ) as err:
        exact_marginals(net)
    assert isinstance(err.value, MemoryError)
    assert err.value.table_size == plan.max_table_size
    assert err.value.induced_width == plan.induced_width


def test_memory_guard_threshold(tmp_path, tiny_markov):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    plan = elimination_plan(net)
    exact_marginals(net, max_table_size=plan.max_table_size)
    with pytest.raises(TreewidthTooLargeError, match="max_table_size"):
        exact_marginals(net, max_table_size=plan.max_table_size - 1)


def test_max_table_size_none_means_no_limit(tmp_path, tiny_markov):
    """Issue #14.6: ``max_table_size=None`` raised a bare TypeError (None > int)."""
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    expected = exact_marginals(net)
    for a, b in zip(exact_marginals(net, max_table_size=None), expected, strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(log_partition(net, max_table_size=None))
    assert sample_exact(net, size=3, rng=0, max_table_size=None).shape == (3, net.n_vars)
    elimination_plan(net).check_size(None)


@pytest.mark.parametrize("bad", [2.5, "1000", True, [10]])
def test_max_table_size_of_the_wrong_type(tmp_path, tiny_markov, bad):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    with pytest.raises(TypeError, match=r"max_table_size must be a positive integer .* or None"):
        exact_marginals(net, max_table_size=bad)


@pytest.mark.parametrize("bad", [0, -5])
def test_max_table_size_below_one(tmp_path, tiny_markov, bad):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    with pytest.raises(ValueError, match=rf"max_table_size must be a positive integer.*{bad}"):
        sample_exact(net, max_table_size=bad)


def test_impossible_evidence_names_the_file_and_the_factor(tmp_path, tiny_markov):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    evid = tmp_path / "dead.evid"
    evid.write_text("2 3 1 4 0\n")  # factor 2 on (4, 3) is zero at x4 = 0, x3 = 1
    with pytest.raises(ImpossibleEvidenceError) as err:
        exact_marginals(net, evid)
    assert str(err.value).startswith(f"{evid} (evidence for tiny.uai): the evidence is impossible")
    assert "factor 2 on (4, 3) is zero at x4=0, x3=1" in str(err.value)


def test_impossible_evidence(tmp_path, tiny_markov):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    # factor (4, 3) is zero at x4 = 0, x3 = 1 and at x4 = 2, x3 = 0; with x3 = 1 and the
    # (1, 4) factor zero at (x1, x4) = (2, 2) and (0, 2), pick evidence that kills every state.
    impossible = {4: 0, 3: 1}
    assert all(tiny_markov.weight(s) == 0 for s in tiny_markov.states(impossible))
    with pytest.raises(ImpossibleEvidenceError, match=r"tiny.uai.*P\(evidence\) = 0") as err:
        exact_marginals(net, impossible)
    assert err.value.definitive
    assert log_partition(net, impossible) == -np.inf
    with pytest.raises(ImpossibleEvidenceError):
        sample_exact(net, impossible)


def test_sample_exact_frequencies(tmp_path, tiny_bayes):
    net = read_network(tiny_bayes.write(tmp_path, "tiny_bn.uai"))
    evidence = {4: 1}
    _, marg = tiny_bayes.brute_force(evidence)
    size = 4000
    samples = sample_exact(net, evidence, size, rng=3)
    assert np.all(samples[:, 4] == 1)
    assert np.all(np.isfinite(net.log_factor_product(samples)))
    for v, p in enumerate(marg):
        freq = np.bincount(samples[:, v], minlength=p.size) / size
        se = np.sqrt(p * (1 - p) / size)
        assert np.all(np.abs(freq - p) <= 5 * se + 1e-12)


def test_impossible_evidence_found_by_elimination():
    """No factor is fixed by the evidence, yet every state is zero (x0 = x1 = x2, x0 != x2)."""
    eq = np.eye(2)
    net = UAINetwork("MARKOV", [2, 2, 2], [(0, 1), (1, 2)], [eq, eq])
    with pytest.raises(ImpossibleEvidenceError, match=r"P\(evidence\) = 0"):
        exact_marginals(net, {0: 0, 2: 1})
    contradictory = UAINetwork("MARKOV", [2, 2, 2], [(0, 1), (1, 2), (0, 2)], [eq, eq, 1 - eq])
    with pytest.raises(ImpossibleEvidenceError, match="partition function is 0"):
        exact_marginals(contradictory)
