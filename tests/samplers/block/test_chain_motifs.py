"""Chain motifs for NeuralBlock (pymc_lbp.samplers.block.motifs.chain,
pymc_lbp.samplers.block.motifs.finding; issue #12).

1. The block potentials read from the model at the reference states reproduce a chain logp
   exactly, and the canonical parameters give the same block conditional.
2. The training samples follow the exact conditional of their parameters (z-test of the
   first state's frequencies against the mean exact probability).
3. Motif finding: an HMM written the usual PyMC way is a chain; a lattice, a skip coupling, a
   block of two variables are not, and each says why.
4. The exact kernel: NeuralBlock with chain blocks and a (random) chain proposal, every
   transition probability enumerated by independent numpy code (tests/helpers/block_kernels.py, the
   parameters computed from the definition), equals the step's own and leaves pi invariant.
5. ``pm.sample`` with ``NeuralBlock([z])`` and defaults on small HMMs (K = 2 and 3) matches the
   forward-backward marginals (Bonferroni bound over sites, ESS-based standard errors).
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_lbp import NeuralBlock, NeuralProposal
from pymc_lbp.samplers.block.motifs.chain import (
    CLIP,
    canonical_chain_params,
    chain_block_states,
    chain_blocks,
    chain_motif,
    chain_motif_log_conditional,
    chain_motif_samples,
    chain_potentials_from_reference,
    chain_reference_states,
)
from pymc_lbp.samplers.block.reference import colour_update
from pymc_lbp.step_methods.step_results import DrawResult
from tests.helpers.backends import require
from tests.helpers.block_kernels import neural_block_kernel
from tests.helpers.frequencies import marginal_z_scores, posterior_draws

FAST = {"mode": "FAST_COMPILE"}
# draws per chain of the pm.sample checks against exact marginals: the z-scores' standard errors
# come from each indicator's own ESS, which marginal_z_scores asserts large enough to be sound
DRAWS = 1000


def random_chain_logp(K, L, rng):
    a = rng.normal(size=(L, K))
    b = rng.normal(size=(L - 1, K, K))
    states = chain_block_states(K, L)
    lp = np.array(
        [
            sum(a[i, s[i]] for i in range(L)) + sum(b[i, s[i], s[i + 1]] for i in range(L - 1))
            for s in states
        ]
    )
    return states, lp + 3.7  # an arbitrary constant


@pytest.mark.parametrize(("K", "L"), [(2, 4), (3, 3), (4, 2)])
def test_reference_potentials_reproduce_a_chain_logp(K, L):
    rng = np.random.default_rng(K * 10 + L)
    states, lp = random_chain_logp(K, L, rng)
    index = {tuple(s): j for j, s in enumerate(states)}
    ref = chain_reference_states(K, L)
    assert ref.shape == (1 + L * (K - 1) + (L - 1) * (K - 1) ** 2, L)
    a, b = chain_potentials_from_reference(np.array([lp[index[tuple(r)]] for r in ref]), K, L)
    rebuilt = [
        sum(a[i, s[i]] for i in range(L)) + sum(b[i, s[i], s[i + 1]] for i in range(L - 1))
        for s in states
    ]
    np.testing.assert_allclose(np.array(rebuilt), lp - lp[0], atol=1e-12)
    params = canonical_chain_params(a, b)
    exact = lp - np.log(np.exp(lp - lp.max()).sum()) - lp.max()
    np.testing.assert_allclose(chain_motif_log_conditional(params, K, L)[0], exact, atol=1e-10)
    _, b_c = params[: L * K], params[L * K :].reshape(L - 1, K, K)
    np.testing.assert_allclose(b_c.mean(axis=1), 0.0, atol=1e-12)  # double-centred
    np.testing.assert_allclose(b_c.mean(axis=2), 0.0, atol=1e-12)


def test_impossible_transitions_are_clipped_without_nan():
    K, L = 2, 3
    a = np.zeros((L, K))
    b = np.zeros((L - 1, K, K))
    b[0, 0, 1] = -np.inf
    params = canonical_chain_params(a, b)
    assert np.all(np.isfinite(params)) and np.all(np.abs(params) <= CLIP)
    cond = np.exp(chain_motif_log_conditional(params, K, L)[0])
    states = chain_block_states(K, L)
    blocked = (states[:, 0] == 0) & (states[:, 1] == 1)
    assert cond[blocked].sum() < 1e-6 and np.isclose(cond.sum(), 1.0)
    # an impossible one-site change: an impossible pair with it stays impossible (never NaN),
    # a possible one compensates (+inf); the canonical parameters are finite
    ref = chain_reference_states(K, L)
    lp = np.zeros(ref.shape[0])
    lp[1] = -np.inf  # site 0 -> 1
    lp[1 + L * (K - 1) + 1] = -np.inf  # sites (1, 2) -> (1, 1): finite singles, impossible pair
    a2, b2 = chain_potentials_from_reference(lp, K, L)
    assert not np.isnan(a2).any() and not np.isnan(b2).any()
    assert a2[0, 1] == -np.inf and b2[0, 1, 1] == np.inf and b2[1, 1, 1] == -np.inf
    assert np.all(np.isfinite(canonical_chain_params(a2, b2)))


@pytest.mark.parametrize(("K", "L"), [(2, 4), (3, 3)])
def test_training_samples_follow_their_exact_conditionals(K, L):
    n = 6000
    xb, xc, params = chain_motif_samples(n, 4, n_categories=K, length=L)
    assert (
        xb.shape == (n, L)
        and xc.shape == (n, 0)
        and params.shape == (n, chain_motif(K, L).n_params)
    )
    assert np.all(np.abs(params) <= CLIP)
    cond = np.exp(chain_motif_log_conditional(params, K, L))
    states = chain_block_states(K, L)
    for k in range(K):
        p = cond[:, states[:, 0] == k].sum(axis=1)  # exact P(first state = k | params)
        hit = (xb[:, 0] == k).astype(float)
        z = (hit - p).sum() / np.sqrt((p * (1 - p)).sum())
        assert abs(z) < 4.0, (k, z)


# ----------------------------------------------------------------------------- motif finding
def hmm_model(T, P, mu, y, init=None):
    K = len(mu)
    with pm.Model() as model:
        z = pm.Categorical("z", p=np.full(K, 1.0 / K) if init is None else init, shape=T)
        pm.Potential("transitions", pm.math.log(pt.as_tensor(P)[z[:-1], z[1:]]).sum())
        pm.Normal("y", mu=pt.as_tensor(mu)[z], sigma=1.0, observed=y)
    return model


def test_an_hmm_is_found_to_be_a_chain_and_other_structures_are_not():
    P = np.array([[0.8, 0.2], [0.3, 0.7]])
    model = hmm_model(12, P, np.array([0.0, 1.5]), np.linspace(-1, 2, 12))
    with model:
        step = NeuralBlock([model["z"]], compile_kwargs=FAST)
    assert "chain of 12 2-category states" in step.blocks_reason
    assert step.blockset.params_from == "chain" and step.blockset.motif.block_size == 4
    assert step.uncovered_sites.size == 0

    with pm.Model():
        s = pm.Bernoulli("s", 0.5, shape=(4, 4))
        pm.Potential("ising", (s[1:] * s[:-1]).sum() + (s[:, 1:] * s[:, :-1]).sum())
        lattice = NeuralBlock([s], compile_kwargs=FAST)
    assert lattice.blockset is None and "not a one-dimensional" in lattice.blocks_reason

    with pm.Model():
        z = pm.Bernoulli("z", 0.5, shape=8)
        pm.Potential("skip", (z[2:] * z[:-2]).sum())
        skip = NeuralBlock([z], compile_kwargs=FAST)
    assert skip.blockset is None and "not coupled along one path" in skip.blocks_reason
    assert len(skip.units) == 8  # single-site Gibbs on every site

    with pm.Model():
        z = pm.Bernoulli("z", 0.5, shape=6)
        w = pm.Bernoulli("w", 0.5, shape=6)
        pm.Potential("chain", (z[1:] * z[:-1]).sum() + (w * z).sum())
        two = NeuralBlock([z, w], compile_kwargs=FAST)
    assert two.blockset is None and "several variables" in two.blocks_reason


def test_a_chain_numbered_out_of_order_is_found_and_sampled_exactly():
    """The chain's states numbered in a shuffled order (``z[perm]`` is the chain): motif
    finding orders them along the path, blocks follow the chain, colour classes keep blocks
    that a term joins apart, and the draws match forward-backward marginals."""
    rng = np.random.default_rng(21)
    T, K = 16, 2
    perm = rng.permutation(T)
    P = np.array([[0.85, 0.15], [0.2, 0.8]])
    mu = np.array([0.0, 1.5])
    y = rng.normal(mu[(np.arange(T) // 5) % 2], 1.0)
    with pm.Model():
        z = pm.Categorical("z", p=np.full(K, 0.5), shape=T)
        chain = z[perm]  # chain position t is state perm[t]
        pm.Potential("transitions", pm.math.log(pt.as_tensor(P)[chain[:-1], chain[1:]]).sum())
        pm.Normal("y", mu=pt.as_tensor(mu)[chain], sigma=1.0, observed=y)
        step = NeuralBlock([z])
        assert "chain of 16 2-category states" in step.blocks_reason, step.blocks_reason
        blocks = [b.block.tolist() for b in step.blockset]
        order = perm if perm[0] < perm[-1] else perm[::-1]  # from the lower-numbered end
        assert blocks[0] == order[:4].tolist()
        assert step.colours is not None and len(step.colours) == 2
        idata = pm.sample(
            draws=DRAWS,
            tune=100,
            chains=2,
            step=[step],
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    exact_chain = forward_backward(np.full(K, 0.5), P, -0.5 * (y[:, None] - mu[None, :]) ** 2)
    exact = np.zeros_like(exact_chain)
    exact[perm] = exact_chain  # state perm[t] has the marginal of chain position t
    draws = posterior_draws(idata, ["z"])
    per_site = {s: draws[..., s] for s in range(T)}
    zs, crit, violations = marginal_z_scores(per_site, [exact[s] for s in range(T)])
    assert not violations
    assert zs.max() < crit, (zs.max(), crit)


def test_auto_blocks_refuse_a_proposal_and_chain_blocks_must_be_sampled():
    P = np.array([[0.8, 0.2], [0.3, 0.7]])
    model = hmm_model(6, P, np.array([0.0, 1.5]), np.zeros(6))
    with model:
        with pytest.raises(ValueError, match="picks the proposal too"):
            NeuralBlock([model["z"]], proposal="exact")
        with pytest.raises(ValueError, match="BlockSet, None or 'auto'"):
            NeuralBlock([model["z"]], blocks="chains")


# ----------------------------------------------------------------------------- exact kernel
def definition_params(log_pi_of, x, block, K):
    """The chain motif's parameters at full state ``x``, written from the definition."""
    L = len(block)

    def F(changes):
        y = x.copy()
        y[block] = 0
        for i, k in changes:
            y[block[i]] = k
        return log_pi_of(y)

    f0 = F([])
    a = np.zeros((L, K))
    b = np.zeros((L - 1, K, K))
    for i in range(L):
        for k in range(1, K):
            a[i, k] = F([(i, k)]) - f0
    for i in range(L - 1):
        for k in range(1, K):
            for k2 in range(1, K):
                b[i, k, k2] = F([(i, k), (i + 1, k2)]) - F([(i, k)]) - F([(i + 1, k2)]) + f0
    for i in range(L - 1):
        rows = b[i].mean(axis=1)
        cols = b[i].mean(axis=0)
        m = b[i].mean()
        for k in range(K):
            a[i, k] += rows[k] - m
            a[i + 1, k] += cols[k]
        for k in range(K):
            for k2 in range(K):
                b[i, k, k2] -= rows[k] + cols[k2] - m
    for i in range(L):
        a[i] -= a[i].mean()
    return np.clip(np.concatenate([a.ravel(), b.ravel()]), -CLIP, CLIP)


def random_proposal(motif, seed):
    prop = NeuralProposal.create(motif, n_components=3, hidden=12, seed=seed, epsilon=0.05)
    rng = np.random.default_rng(seed + 100)
    prop.net.set_weights(
        {
            k: rng.normal(scale=1.5 / np.sqrt(max(v.shape[0], 1)), size=v.shape)
            for k, v in prop.net.weights.items()
        }
    )
    return prop


@pytest.mark.parametrize(("K", "T", "L"), [(2, 5, 4), (3, 4, 3)])
def test_chain_block_kernel_matches_independent_enumeration_and_is_invariant(K, T, L):
    rng = np.random.default_rng(K)
    P = rng.dirichlet(np.ones(K), size=K)
    mu = np.arange(K) * 1.2
    y = rng.normal(size=T)
    init = rng.dirichlet(np.ones(K))
    model = hmm_model(T, P, mu, y, init)
    blocks = chain_blocks("z", T, K, L)
    prop = random_proposal(blocks.motif, seed=5)
    with model:
        step = NeuralBlock([model["z"]], blocks=blocks, proposal=prop, compile_kwargs=FAST)
    assert step.units == [f"z[0:{L}]", f"z[{T - L}:{T}]"]

    states = np.array(list(itertools.product(range(K), repeat=T)), dtype=np.int64)

    def log_pi_of(s):
        lp = np.log(init[s]).sum() + np.log(P[s[:-1], s[1:]]).sum()
        return lp - 0.5 * ((y - mu[s]) ** 2).sum()

    log_pi = np.array([log_pi_of(s) for s in states])
    units = [
        {
            "kind": "neural",
            "block": list(b.block),
            "cond": [],
            "pad": [],
            "params": (lambda x, blk=list(b.block): definition_params(log_pi_of, x, blk, K)),
            "free": [True] * L,
        }
        for b in blocks
    ]
    Tm = neural_block_kernel(
        states,
        log_pi,
        units,
        prop.net.weights,
        (blocks.motif.block_cards, blocks.motif.cond_cards),
        prop.net.n_components,
        prop.net.epsilon,
    )
    pi = np.exp(log_pi - log_pi.max())
    pi /= pi.sum()
    np.testing.assert_allclose(Tm.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ Tm, pi, atol=1e-12)
    flow = pi[:, None] * Tm
    np.testing.assert_allclose(flow, flow.T, atol=1e-12)
    assert np.count_nonzero(Tm) > 4 * len(states)  # it really moves blocks
    lookup = {tuple(s): i for i, s in enumerate(states)}
    for a, x in enumerate(states):
        row = np.zeros(len(states))
        for u in range(len(step.units)):
            Y, probs = step.unit_transitions(u, x)
            for yy, p in zip(Y, probs, strict=True):
                row[lookup[tuple(yy)]] += p / len(step.units)
        np.testing.assert_allclose(row, Tm[a], atol=1e-10)


# ----------------------------------------------------------------------------- pm.sample
def forward_backward(init, P, log_em):
    """Exact smoothed marginals of an HMM (T, K)."""
    T, K = log_em.shape
    em = np.exp(log_em - log_em.max(axis=1, keepdims=True))
    alpha = np.zeros((T, K))
    alpha[0] = init * em[0]
    alpha[0] /= alpha[0].sum()
    for t in range(1, T):
        alpha[t] = (alpha[t - 1] @ P) * em[t]
        alpha[t] /= alpha[t].sum()
    beta = np.ones((T, K))
    for t in range(T - 2, -1, -1):
        beta[t] = P @ (em[t + 1] * beta[t + 1])
        beta[t] /= beta[t].sum()
    post = alpha * beta
    return post / post.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("K", [2, 3])
def test_default_neural_block_on_an_hmm_matches_forward_backward(K):
    """``NeuralBlock([z])`` with no other argument: the shipped chain proposal for K
    categories on chain blocks, against exact marginals."""
    rng = np.random.default_rng(30 + K)
    T = 30
    P = np.full((K, K), 0.1 / (K - 1)) + np.eye(K) * (0.9 - 0.1 / (K - 1))
    mu = np.arange(K) * 1.5
    z_true = np.zeros(T, dtype=int)
    for t in range(1, T):
        z_true[t] = rng.choice(K, p=P[z_true[t - 1]])
    y = rng.normal(mu[z_true], 1.0)
    init = np.full(K, 1.0 / K)
    model = hmm_model(T, P, mu, y, init)
    with model:
        step = NeuralBlock([model["z"]])
        assert isinstance(step.proposal, NeuralProposal), step.blocks_reason
        assert step.proposal.motif.name.startswith(f"chain-k{K}-")
        idata = pm.sample(
            draws=DRAWS,  # sticky sites: their indicators' ESS is checked below
            tune=100,
            chains=2,
            step=[step],
            random_seed=K,
            progressbar=False,
            compute_convergence_checks=False,
        )
    exact = forward_backward(init, P, -0.5 * (y[:, None] - mu[None, :]) ** 2)
    draws = posterior_draws(idata, ["z"])
    per_site = {t: draws[..., t] for t in range(T)}
    zs, crit, violations = marginal_z_scores(per_site, [exact[t] for t in range(T)])
    assert not violations
    assert zs.max() < crit, (zs.max(), crit)
    assert float(idata.sample_stats["accept"].mean()) > 0.3  # the proposal is useful


def test_motif_examples_from_posterior_draws_carry_each_draws_parameters():
    """``motif_examples`` on an HMM with unknown transitions and noise (NUTS): every example's
    parameters give the exact block conditional at that draw's P and sigma (written out here),
    so a proposal trained on them learns the model's own conditionals."""
    T, K = 8, 2
    y = np.array([0.1, -0.3, 1.9, 2.2, 0.2, 1.8, 2.1, -0.1])
    with pm.Model():
        P = pm.Dirichlet("P", a=np.ones((K, K)))
        sigma = pm.HalfNormal("sigma", 1.0)
        z = pm.Categorical("z", p=np.full(K, 0.5), shape=T)
        pm.Potential("transitions", pm.math.log(P[z[:-1], z[1:]]).sum())
        pm.Normal("y", mu=pt.as_tensor(np.array([0.0, 2.0]))[z], sigma=sigma, observed=y)
        blocks = chain_blocks("z", T, K, 4)
        step = NeuralBlock([z], blocks=blocks, proposal="exact", compile_kwargs=FAST)
        idata = pm.sample(
            draws=30,
            tune=30,
            chains=1,
            step=[step],
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
        before = {k: np.array(v.get_value()) for k, v in step.shared.items()}
        xb, xc, params = step.motif_examples(idata, max_draws=10)
    for k, v in step.shared.items():  # the step's view of the other variables is restored
        np.testing.assert_array_equal(v.get_value(), before[k])
    assert xb.shape == (10 * len(blocks), 4) and xc.shape == (10 * len(blocks), 0)
    post = idata.posterior
    draws = np.linspace(0, 29, 10).round().astype(int)
    mu = np.array([0.0, 2.0])
    for row in range(xb.shape[0]):
        d, b = divmod(row, len(blocks))
        Pd = post["P"].values[0, draws[d]]
        sd = float(post["sigma"].values[0, draws[d]])
        zd = post["z"].values[0, draws[d]].astype(np.int64)
        block = blocks[b].block
        np.testing.assert_array_equal(xb[row], zd[block])

        def log_pi_of(full, Pd=Pd, sd=sd):
            trans = np.log(Pd[full[:-1], full[1:]]).sum()
            return trans - 0.5 * (((y - mu[full]) / sd) ** 2).sum() - T * np.log(sd)

        expected = definition_params(log_pi_of, zd, list(block), K)
        np.testing.assert_allclose(params[row], expected, atol=1e-8)


@pytest.mark.parametrize("kind", ["neural", "exact"])
def test_colour_update_is_the_product_of_its_blocks_updates(kind):
    """Chain blocks of one colour (no term touches two of them) are updated at once; the
    joint outcome must follow the product of the blocks' own transition probabilities
    (``unit_transitions``, enumerated), and the returned logp is the model's at the new state."""
    from scipy import stats as sps

    T, K = 6, 2
    rng = np.random.default_rng(9)
    P = rng.dirichlet(np.ones(K), size=K)
    model = hmm_model(T, P, np.array([0.0, 1.0]), rng.normal(size=T))
    blocks = chain_blocks("z", T, K, 2)
    proposal = random_proposal(blocks.motif, seed=2) if kind == "neural" else "exact"
    with model:
        step = NeuralBlock([model["z"]], blocks=blocks, proposal=proposal, compile_kwargs=FAST)
    assert [c.tolist() for c in step.colours] == [[0, 2], [1]]
    x = np.array([1, 0, 0, 1, 1, 0])
    logp = step.target.logp(x)
    rows = [step.unit_transitions(u, x) for u in (0, 2)]
    expected = {}
    for Y0, p0 in zip(*rows[0], strict=True):
        for Y2, p2 in zip(*rows[1], strict=True):
            key = (*Y0[0:2], *Y2[4:6])
            expected[key] = expected.get(key, 0.0) + p0 * p2
    n = 4000
    counts: dict = {}
    for _ in range(n):
        y, logp_y, _, _ = colour_update(step, step.colours[0], x, logp)
        np.testing.assert_array_equal(y[2:4], x[2:4])
        assert abs(logp_y - step.target.logp(y)) < 1e-9
        key = (*y[0:2], *y[4:6])
        counts[key] = counts.get(key, 0) + 1
    keys = [k for k, p in expected.items() if p > 0]
    assert set(counts) <= set(keys)
    obs = np.array([counts.get(k, 0) for k in keys])
    exp = n * np.array([expected[k] for k in keys])
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    assert sps.chi2.sf(chi2, len(keys) - 1) > 1e-4


def test_hmm_example_runs_and_both_proposals_are_accepted(tmp_path, monkeypatch):
    """examples/hmm_neural_block.py --quick: the shipped proposal on the HMM with unknown
    transitions and noise, and a proposal for blocks of 4 trained on the model's own posterior
    draws; both are useful proposals (mean acceptance above 0.5) and the plot is written. On a
    shorter series than the example's (every line of the script runs; acceptance is per block,
    so the length does not change what is checked)."""
    from examples import hmm_neural_block

    monkeypatch.setattr(hmm_neural_block, "T", 40)

    out = hmm_neural_block.main(["--quick", "--out", str(tmp_path / "hmm.png")])
    assert out["shipped_accept"] > 0.5 and out["own_accept"] > 0.5
    assert (tmp_path / "hmm.png").stat().st_size > 0


def test_default_chain_step_pickles_and_samples_after_unpickling():
    """``pm.sample(cores > 1)`` ships the step by cloudpickle: the default chain step (its
    proposal, blocks and colour classes) survives the round trip and makes the same draws."""
    import cloudpickle

    P = np.array([[0.85, 0.15], [0.2, 0.8]])
    model = hmm_model(10, P, np.array([0.0, 1.5]), np.linspace(-1, 2, 10))
    with model:
        step = NeuralBlock([model["z"]], compile_kwargs=FAST)
        clone = cloudpickle.loads(cloudpickle.dumps(step))
        point = model.initial_point()
        step.set_rng(np.random.default_rng(4))
        clone.set_rng(np.random.default_rng(4))
        a, b = point, point
        for _ in range(5):
            a, _ = step.step(a)
            b, _ = clone.step(b)
            np.testing.assert_array_equal(a["z"], b["z"])
    assert clone.colours is not None and clone.blocks_reason == step.blocks_reason


def test_chain_mrf_from_a_uai_file_is_found_and_sampled_exactly(tmp_path):
    """A chain Markov network in UAI form (variables numbered along the chain, sticky pairwise
    tables, unary evidence-like tables), written to a file and read back with ``read_uai``:
    ``NeuralBlock(model.free_RVs)`` with defaults finds the chain (the factor-table gathers
    ``T[x_a, x_b]`` touch consecutive states), uses the shipped proposal for K = 3, and matches
    the network's exact marginals."""
    from pymc_lbp.models import exact_marginals, read_uai
    from pymc_lbp.models.uai import UAINetwork
    from pymc_lbp.models.uai.io import write_network

    rng = np.random.default_rng(12)
    T, K = 12, 3
    scopes = [(t,) for t in range(T)] + [(t, t + 1) for t in range(T - 1)]
    sticky = np.full((K, K), 0.2) + np.eye(K) * 2.0
    tables = [rng.gamma(2.0, size=K) for _ in range(T)] + [sticky.copy() for _ in range(T - 1)]
    network = UAINetwork("MARKOV", np.full(T, K), scopes, tables)
    path = tmp_path / "chain.uai"
    write_network(path, network)
    model = read_uai(path)
    with model:
        step = NeuralBlock(model.free_RVs)
        assert "chain of 12 3-category states" in step.blocks_reason, step.blocks_reason
        assert isinstance(step.proposal, NeuralProposal)
        idata = pm.sample(
            draws=3 * DRAWS // 2,  # K = 3 sticky pairs: the slowest indicators (ESS ~190 at 1000)
            tune=100,
            chains=2,
            step=[step],
            random_seed=7,
            progressbar=False,
            compute_convergence_checks=False,
        )
    exact = exact_marginals(network)
    draws = posterior_draws(idata, [rv.name for rv in model.free_RVs])
    per_site = {t: draws[..., t] for t in range(T)}
    zs, crit, violations = marginal_z_scores(per_site, [exact[t] for t in range(T)])
    assert not violations
    assert zs.max() < crit, (zs.max(), crit)


# -- the compiled sweep ----------------------------------------------------------------------------
def _sticky_hmm():
    P = np.array([[0.7, 0.2, 0.1], [0.15, 0.7, 0.15], [0.1, 0.2, 0.7]])
    return hmm_model(12, P, np.array([0.0, 1.5, 3.0]), np.linspace(-1, 3, 12))


def numpy_sweeps(step: NeuralBlock) -> NeuralBlock:
    """``step`` with its draws' sweeps made by the numpy reference
    (:func:`pymc_lbp.samplers.block.reference.colour_update`, class after class, from the
    step's generator) instead of the compiled sweep: the compiled sweep's oracle."""

    def run_steps(x, logp, deltas, n_steps):
        evals0, total, won = step._draw_evals, 0.0, 0
        for _ in range(n_steps // len(step.units)):
            for colour in step.colours:
                x, logp, acc, n_acc = colour_update(step, colour, x, logp)
                total, won = total + acc, won + n_acc
        extras = {"block": [int(step.colours[-1][-1])]}
        return DrawResult(x, logp, deltas, total, won, step._draw_evals - evals0, 0, extras)

    step.run_steps = run_steps
    return step


@pytest.fixture(scope="module")
def sticky():
    """The sticky HMM, the default step on it drawing by the numpy reference and that step's 40
    draws from seed 3: the reference of every compiled-sweep test (built once: the model is
    shared, so the compiled graphs can be too)."""
    model = _sticky_hmm()
    with model:
        ref = numpy_sweeps(NeuralBlock([model["z"]]))
    return model, ref, _draws(ref, model, 40, 3)


def _draws(step, model, n: int, seed: int) -> list:
    step.set_rng(np.random.default_rng(seed))
    point, out = model.initial_point(), []
    for _ in range(n):
        point, (stats,) = step.step(point)
        out.append((point["z"].copy(), stats["n_accepted"], stats["logp_evals"], stats["accept"]))
        out[-1] += (stats["model_logp"],)  # the logp the step carries (it samples every variable)
    return out


def test_compiled_sweep_of_exact_blocks_makes_the_numpy_draws():
    """Exact block Gibbs on chain blocks (proposal="exact"): the compiled sweep (logp at every
    joint state of every block, inverse-CDF draws) makes the numpy colour updates' draws."""
    model = _sticky_hmm()
    blocks = chain_blocks("z", 12, 3, 3)
    with model:
        ref = numpy_sweeps(NeuralBlock([model["z"]], blocks=blocks, proposal="exact"))
        fast = NeuralBlock([model["z"]], blocks=blocks, proposal="exact")
    assert fast.sweep_compilable and ref.colours is not None
    a, b = _draws(ref, model, 30, 5), _draws(fast, model, 30, 5)
    for (xa, na, ea, _, la), (xb, nb, eb, _, lb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(xb, xa)
        assert (nb, eb) == (na, ea)
        np.testing.assert_allclose(lb, la, rtol=1e-9)
    states = [x for x, *_ in a]
    assert sum(not np.array_equal(x, y) for x, y in zip(states[:-1], states[1:], strict=True)) > 20


@pytest.mark.parametrize("mode", [None, "JAX"], ids=["c", "jax"])
def test_compiled_sweep_makes_the_numpy_colour_updates_moves(mode, sticky):
    """NeuralBlock's compiled sweep (every colour class of the sweep in one compiled graph:
    reference logps, chain parameters, network, proposals, their logps, the MH decisions) makes
    the draws of the numpy colour updates from the same seed, with the same statistics, over 40
    draws with many accepted moves; also with the JAX backend (skipped without jax). Not run
    under NUMBA: from empty caches numba took 60 s to compile this sweep (364 nodes in one
    function), and its kinds of ops run under NUMBA in other twins: the network and MH
    decisions in the random scan's (test_neural_block_scan.py), advanced indexing and
    increments in the path kernel's and SelfBalancing's."""
    if mode is not None:
        require(mode)
    model, ref, a = sticky
    kwargs = {"compile_kwargs": {"mode": mode}} if mode else {}
    with model:
        fast = NeuralBlock([model["z"]], **kwargs)
    assert fast.sweep_compilable
    b = _draws(fast, model, 40, 3)
    for (xa, na, ea, pa, la), (xb, nb, eb, pb, lb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(xb, xa)
        assert (nb, eb) == (na, ea)
        np.testing.assert_allclose(pb, pa, rtol=1e-12)
        np.testing.assert_allclose(lb, la, rtol=1e-9)
    states = [x for x, *_ in a]
    assert sum(not np.array_equal(x, y) for x, y in zip(states[:-1], states[1:], strict=True)) > 20
