"""Rao-Blackwellised marginals (``pymc_lbp.models.uai.rao_blackwell``) against enumeration.

The reference conditionals are computed here by brute force over the joint (``TinyNet.weight``,
the conftest's independent product of table entries), never by the module's gathers.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_lbp.models.uai import (
    FullConditionals,
    UAINetwork,
    count_marginals,
    exact_marginals,
    marginal_mcse,
    rao_blackwell_marginals,
    read_network,
    read_uai,
    sample_exact,
    uai_marginal_mcse,
    uai_marginals,
)

EVIDENCE = {1: 1}  # TINY_MARKOV: x1 (cardinality 3) fixed; its factors leave zero rows


def _conditional(net, state, v):
    """p(x_v = k | the rest of ``state``) by enumerating the joint's weights (None if 0/0)."""
    weights = []
    for k in range(net.cards[v]):
        other = list(state)
        other[v] = k
        weights.append(net.weight(tuple(other)))
    weights = np.array(weights)
    return weights / weights.sum() if weights.sum() > 0 else None


def _feasible(net, evidence):
    return [s for s in net.states(evidence) if net.weight(s) > 0]


@pytest.fixture
def tiny(tmp_path, tiny_markov):
    return tiny_markov, read_network(tiny_markov.write(tmp_path, "tiny.uai"))


def test_a_single_draw_gives_the_enumerated_full_conditionals(tiny):
    tinynet, net = tiny
    plan = FullConditionals.from_network(net, EVIDENCE)
    assert plan.free.tolist() == [0, 2, 3, 4]
    for state in _feasible(tinynet, EVIDENCE):
        got = rao_blackwell_marginals(net, EVIDENCE, np.array([state]), plan=plan)
        np.testing.assert_array_equal(got[1], [0.0, 1.0, 0.0])  # evidence: a delta
        for v in plan.free.tolist():
            np.testing.assert_allclose(got[v], _conditional(tinynet, state, v), atol=1e-14)


def test_the_average_over_the_exact_posterior_is_the_exact_marginal(tiny):
    """Unbiasedness in closed form: sum_x P(x | e) p(x_i = k | x_-i) = P(x_i = k | e)."""
    tinynet, net = tiny
    log_z, exact = tinynet.brute_force(EVIDENCE)
    states = np.array(_feasible(tinynet, EVIDENCE))
    weights = np.array([tinynet.weight(tuple(s)) for s in states]) / np.exp(log_z)
    per_draw = FullConditionals.from_network(net, EVIDENCE).probabilities(states)
    average = np.einsum("d,dvk->vk", weights, per_draw)
    for i, v in enumerate([0, 2, 3, 4]):
        np.testing.assert_allclose(average[i, : tinynet.cards[v]], exact[v], atol=1e-12)
        assert np.all(average[i, tinynet.cards[v] :] == 0)  # padding of cardinality 2


@pytest.mark.parametrize("which", ["tiny_markov", "tiny_bayes"])
def test_exact_samples_fed_as_draws_give_the_exact_marginals(tmp_path, request, which):
    """Independent exact posterior draws: the mean of the per-draw conditionals is within 4
    standard errors (their sample standard deviation over sqrt(N)) of the exact marginal,
    every entry (Bonferroni over <= 12 entries: family-wise level < 1e-3); the counts of the
    same draws are not closer on average (Rao-Blackwell: a variance no larger)."""
    tinynet = request.getfixturevalue(which)
    net = read_network(tinynet.write(tmp_path, "t.uai"))
    evidence = {4: 1} if which == "tiny_bayes" else EVIDENCE
    draws = sample_exact(net, evidence, 4000, rng=3)
    plan = FullConditionals.from_network(net, evidence)
    per_draw = plan.probabilities(draws)
    rb = rao_blackwell_marginals(net, evidence, draws, plan=plan)
    exact = exact_marginals(net, evidence)
    for i, v in enumerate(plan.free.tolist()):
        card = tinynet.cards[v]
        se = per_draw[:, i, :card].std(axis=0, ddof=1) / np.sqrt(len(draws))
        assert np.all(np.abs(rb[v] - exact[v]) <= 4 * se + 1e-12), (v, rb[v], exact[v], se)
        # the per-draw values' variance is at most the indicators' (law of total variance)
        assert np.all(se <= np.sqrt(exact[v] * (1 - exact[v]) / len(draws)) * 1.1 + 1e-12)
    for v, x in evidence.items():
        assert rb[v][x] == 1.0 and rb[v].sum() == 1.0


def test_a_variable_without_a_possible_value_contributes_its_indicator():
    """x0's factor is zero in every row with x1 = 0: at a state with x1 = 0 every value of x0
    has probability zero given its blanket; the draw then counts as its indicator, no NaN.
    x2 has a zero-probability value (its table row (0, 1)) and gets exactly (0, 1)."""
    net = UAINetwork(
        "MARKOV",
        [2, 2, 2],
        [(0, 1), (1, 2)],
        [np.array([[0.0, 2.0], [0.0, 3.0]]), np.array([[1.0, 1.0], [0.0, 5.0]])],
    )
    states = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 1]])
    got = FullConditionals.from_network(net, {}).probabilities(states)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got[0, 0], [0.0, 1.0])  # dead row: the drawn x0 = 1
    np.testing.assert_allclose(got[1, 0], [0.4, 0.6])  # x1 = 1: (2, 3) / 5
    np.testing.assert_array_equal(got[1, 2], [0.0, 1.0])  # x1 = 1: row (0, 5)
    means = rao_blackwell_marginals(net, {}, states)
    assert all(np.isfinite(m).all() and m.sum() == pytest.approx(1.0) for m in means)


def test_uai_marginals_defaults_and_mcse(tmp_path, tiny_markov, tiny_bayes):
    """``uai_marginals`` Rao-Blackwellises the posterior by default, counts other groups; the
    BAYES build uses its rescaled CPTs; ``uai_marginal_mcse`` is ArviZ's mcse of the per-draw
    values: for independent draws close to their standard deviation over sqrt(N)."""
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    model = read_uai(net, EVIDENCE)
    draws = sample_exact(net, EVIDENCE, 2 * 1500, rng=5).reshape(2, 1500, -1)
    samples = {"x_card2": draws[..., [0, 2, 3]], "x_card3": draws[..., [4]]}
    rb = rao_blackwell_marginals(net, EVIDENCE, draws)
    counts = count_marginals(net, EVIDENCE, draws)
    for got, want in zip(uai_marginals(samples, model), rb, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-15)
    for got, want in zip(uai_marginals(samples, model, group="prior"), counts, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-15)
    assert any(not np.allclose(a, b) for a, b in zip(rb, counts, strict=True))
    errors = uai_marginal_mcse(samples, model)
    per_draw = FullConditionals.from_network(net, EVIDENCE).probabilities(draws.reshape(-1, 5))
    naive = per_draw.std(axis=0, ddof=1) / np.sqrt(per_draw.shape[0])
    for i, v in enumerate([0, 2, 3, 4]):
        # ESS of independent draws is N up to its estimation noise (a few per cent at N=3000)
        ratio = errors[v] / naive[i, : tiny_markov.cards[v]]
        assert np.all((ratio > 0.8) & (ratio < 1.25)), (v, ratio)
    assert errors[1].tolist() == [0.0, 0.0, 0.0]
    count_errors = marginal_mcse(net, EVIDENCE, draws, rao_blackwellize=False)
    assert all(np.all(c >= r * 0.9) for c, r in zip(count_errors, errors, strict=True))
    # BAYES: the conditionals of the CPTs as the model rescales them
    bayes_net = read_network(tiny_bayes.write(tmp_path, "bn.uai"))
    bayes = read_uai(bayes_net, {4: 1}, kind="BAYES")
    draws = sample_exact(bayes_net, {4: 1}, 200, rng=1)
    samples = {
        name: draws[None][..., bayes.uai_info.members[name]] for name in bayes.uai_info.free_names
    }
    want = rao_blackwell_marginals(bayes_net.normalised_cpts(), {4: 1}, draws)
    for got, w in zip(uai_marginals(samples, bayes), want, strict=True):
        np.testing.assert_allclose(got, w, atol=1e-15)


def test_chunks_of_draws_and_of_variables_agree_with_one_pass(uai_dir, monkeypatch):
    """A shipped network (BN_0 with its evidence, 74 free variables): the estimate and the
    MCSE do not depend on how the draws and variables are cut into chunks."""
    import pymc_lbp.models.uai.rao_blackwell as rb_module
    from pymc_lbp.models.uai import read_evidence

    path = uai_dir / "uai2006_bn/BN_0.uai"
    net = read_network(path)
    evidence = read_evidence(f"{path}.evid", net)
    draws = sample_exact(net, evidence, 2 * 300, rng=2).reshape(2, 300, -1)
    whole = rao_blackwell_marginals(net, evidence, draws)
    errors = marginal_mcse(net, evidence, draws)
    monkeypatch.setattr(rb_module, "_CHUNK_ENTRIES", 64)  # a few draws / variables at a time
    for a, b in zip(whole, rao_blackwell_marginals(net, evidence, draws), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    for a, b in zip(errors, marginal_mcse(net, evidence, draws), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
