"""NeuralBlock: exact kernels, training, sampling frequencies, save/load, grid-BN motif."""

from __future__ import annotations

import itertools
import json
import zipfile

import cloudpickle
import numpy as np
import pymc as pm
import pytest

import pymc_lbp
from pymc_lbp import NeuralBlock, NeuralProposal, ProposalFileError, load_proposal
from pymc_lbp.models import ising_log_density, ising_model, read_uai
from pymc_lbp.models.uai import (
    UAINetwork,
    forward_sample,
    grid_bn,
    read_network,
    uai_state_from_point,
    uai_variable_map,
    write_network,
)
from pymc_lbp.samplers.block.motifs.grid_bn import (
    GRID_BN_MOTIF,
    grid_bn_blocks,
    grid_bn_layout,
    grid_bn_motif_log_conditional,
    grid_bn_motif_samples,
    uai_grid_blocks,
)
from pymc_lbp.samplers.block.motifs.lattice_blocks import lattice_blocks
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock, MotifSpec
from pymc_lbp.samplers.block.motifs.training_samples import prior_motif_samples
from tests.helpers.block_kernels import neural_block_kernel
from tests.helpers.frequencies import max_z_score, posterior_draws

FAST = {"mode": "FAST_COMPILE"}


# ----------------------------------------------------------------------------- a tiny network
def tiny_network() -> UAINetwork:
    """Six variables, cards 3 2 3 2 2 2; v5 is observed (=1); a zero CPT entry.

    v0 -> v1, v1 -> v2, (v0, v2) -> v3, v3 -> v4, (v2, v4) -> v5.
    """
    rng = np.random.default_rng(42)
    cards = [3, 2, 3, 2, 2, 2]
    parents = {0: (), 1: (0,), 2: (1,), 3: (0, 2), 4: (3,), 5: (2, 4)}
    scopes, tables = [], []
    for v in range(6):
        shape = tuple(cards[u] for u in parents[v]) + (cards[v],)
        t = rng.dirichlet(np.full(cards[v], 0.8), size=shape[:-1]).reshape(shape)
        scopes.append((*parents[v], v))
        tables.append(t)
    tables[1][2] = [1.0, 0.0]  # v1 = 0 whenever v0 = 2 (determinism)
    return UAINetwork("BAYES", np.array(cards), scopes, tables)


EVIDENCE = {5: 1}
# blocks (v0, v1) and (v2, v5): the second holds the evidence variable, which is clamped
MOTIF = MotifSpec("tiny", (3, 2), (3, 2, 2, 2), 2)
BLOCKS = BlockSet(
    MOTIF,
    (
        MotifBlock([0, 1], [2, 3, 4, 5], params=[0.3, -0.2], label="A"),
        MotifBlock([2, 5], [0, 1, 3, 4], params=[-0.5, 0.7], label="B"),
    ),
    index="uai",
)


def tiny_joint(network, evidence):
    """(states, log pi) over every full state consistent with the evidence."""
    states = np.array(list(itertools.product(*[range(c) for c in network.cards])))
    keep = np.ones(len(states), dtype=bool)
    for v, x in evidence.items():
        keep &= states[:, v] == x
    states = states[keep]
    return states, network.log_factor_product(states)


def random_proposal(motif, seed, scale=1.5, **kw):
    prop = NeuralProposal.create(motif, n_components=3, hidden=12, seed=seed, **kw)
    rng = np.random.default_rng(seed + 100)
    prop.net.set_weights(
        {
            k: rng.normal(scale=scale / np.sqrt(max(v.shape[0], 1)), size=v.shape)
            for k, v in prop.net.weights.items()
        }
    )
    return prop


def step_to_network(step, model):
    """Network index of every site of the step's raveled block."""
    info = uai_variable_map(model)
    return np.concatenate([info.members[s.name] for s in step.specs])


# ----------------------------------------------------------------------------- exact kernels
def test_kernel_matches_independent_enumeration_and_is_invariant():
    network = tiny_network()
    model = read_uai(network, EVIDENCE)
    prop = random_proposal(MOTIF, seed=3, epsilon=0.05)
    with model:
        step = NeuralBlock(model.free_RVs, blocks=BLOCKS, proposal=prop, compile_kwargs=FAST)
    assert step.units == ["A", "B", *[f"site {s}" for s in step.uncovered_sites]]
    net_of = step_to_network(step, model)
    assert sorted(net_of[step.uncovered_sites].tolist()) == [3, 4]
    assert step.steps_per_draw == 4

    states, log_pi = tiny_joint(network, EVIDENCE)
    units = [
        {
            "kind": "neural",
            "block": [0, 1],
            "cond": [2, 3, 4, 5],
            "pad": [0] * 4,
            "params": [0.3, -0.2],
            "free": [True, True],
        },
        {
            "kind": "neural",
            "block": [2, 5],
            "cond": [0, 1, 3, 4],
            "pad": [0] * 4,
            "params": [-0.5, 0.7],
            "free": [True, False],
        },
        {"kind": "site", "site": 3, "card": 2},
        {"kind": "site", "site": 4, "card": 2},
    ]
    K, eps = prop.net.n_components, prop.net.epsilon
    T = neural_block_kernel(
        states, log_pi, units, prop.net.weights, (MOTIF.block_cards, MOTIF.cond_cards), K, eps
    )
    pi = np.exp(log_pi - log_pi.max())
    pi /= pi.sum()
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    # detailed balance holds unit by unit, hence for the random-scan mixture
    flow = pi[:, None] * T
    np.testing.assert_allclose(flow, flow.T, atol=1e-12)
    assert np.count_nonzero(T[pi > 0][:, pi > 0]) > 3 * len(states)  # it really moves

    # the step's own transition probabilities equal the enumerated kernel
    lookup = {tuple(s): i for i, s in enumerate(states)}
    for a, full in enumerate(states):
        if pi[a] == 0:
            continue
        x = full[net_of]
        row = np.zeros(len(states))
        for u in range(len(step.units)):
            Y, probs = step.unit_transitions(u, x)
            for y, p in zip(Y, probs, strict=True):
                state = full.copy()
                state[net_of] = y
                row[lookup[tuple(state)]] += p / len(step.units)
        np.testing.assert_allclose(row, T[a], atol=1e-10)


def test_lattice_blocks_kernel_is_invariant_flat_index():
    """Overlapping 2x2 patches of a 3x3 Ising model (flat index space, padded borders)."""
    shape, coupling = (2, 3), 0.6
    field = np.linspace(-0.5, 0.5, 6).reshape(shape)
    model = ising_model(shape, coupling, field, periodic=False)
    blocks = lattice_blocks(shape, 2)
    assert len(blocks) == 2 and blocks.covered().size == 6
    assert blocks[0].cond.tolist() == [-1, -1, -1, -1, -1, -1, 2, 5]  # dummies off the lattice
    prop = random_proposal(blocks.motif, seed=5)
    with model:
        step = NeuralBlock([model["x"]], blocks=blocks, proposal=prop, compile_kwargs=FAST)
    assert step.uncovered_sites.size == 0
    states = np.array(list(itertools.product([0, 1], repeat=6)))
    log_pi = ising_log_density(states, shape, coupling, field, False)
    pi = np.exp(log_pi - log_pi.max())
    pi /= pi.sum()
    index = {tuple(s): i for i, s in enumerate(states)}
    T = np.zeros((64, 64))
    for a, x in enumerate(states):
        for u in range(len(step.units)):
            Y, probs = step.unit_transitions(u, x)
            for y, p in zip(Y, probs, strict=True):
                T[a, index[tuple(y)]] += p / len(step.units)
    np.testing.assert_allclose(T.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)


def test_step_pickles_with_its_proposal():
    network = tiny_network()
    model = read_uai(network, EVIDENCE)
    prop = random_proposal(MOTIF, seed=8)
    with model:
        step = NeuralBlock(model.free_RVs, blocks=BLOCKS, proposal=prop, compile_kwargs=FAST)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    assert clone.logp_mode == step.logp_mode == "factors"
    x = step.state_vector(model.initial_point())
    for u in range(len(step.units)):
        np.testing.assert_array_equal(
            step.unit_transitions(u, x)[1], clone.unit_transitions(u, x)[1]
        )
    assert (
        NeuralBlock.competence(model.free_RVs[0])
        == pm.step_methods.compound.Competence.INCOMPATIBLE
    )


def test_factor_local_and_model_logp_give_the_same_kernel():
    network = tiny_network()
    model = read_uai(network, EVIDENCE)
    prop = random_proposal(MOTIF, seed=9)
    with model:
        local = NeuralBlock(model.free_RVs, blocks=BLOCKS, proposal=prop, compile_kwargs=FAST)
        full = NeuralBlock(
            model.free_RVs, blocks=BLOCKS, proposal=prop, logp="model", compile_kwargs=FAST
        )
    assert (local.logp_mode, full.logp_mode) == ("factors", "model")
    rng = np.random.default_rng(1)
    cards = local._site_cards()
    for _ in range(5):
        x = local.state_vector(model.initial_point())
        x = np.where(rng.random(x.size) < 0.5, rng.integers(0, cards), x)
        if not np.isfinite(local.target.logp(x)):
            continue
        for u in range(len(local.units)):
            np.testing.assert_allclose(
                local.unit_transitions(u, x)[1], full.unit_transitions(u, x)[1], atol=1e-10
            )


# ----------------------------------------------------------------------------- training
def _expected_kl(network, proposal, blockset):
    """E over prior states of KL(p(B | C) || q(B | C)) for each block, by enumeration."""
    states, log_pi = tiny_joint(network, {})
    pi = np.exp(log_pi)
    out = []
    for b in blockset:
        rest = [v for v in range(network.n_vars) if v not in b.block.tolist()]
        # log p(x_B | x_rest): B's Markov blanket is inside the conditioning set, so this is
        # p(B | C)
        keys = [tuple(s[rest]) for s in states]
        groups: dict = {}
        for i, k in enumerate(keys):
            groups.setdefault(k, []).append(i)
        log_cond = np.empty(len(states))
        for idx in groups.values():
            lp = log_pi[idx]
            with np.errstate(invalid="ignore"):
                log_cond[idx] = lp - np.logaddexp.reduce(lp)
        x_cond = states[:, b.cond]
        log_q = proposal.log_prob(
            states[:, b.block], x_cond, np.broadcast_to(b.params, (len(states), 2))
        )
        ok = pi > 0
        out.append(float(np.sum(pi[ok] * (log_cond[ok] - log_q[ok]))))
    return np.array(out)


@pytest.fixture(scope="module")
def trained():
    """A proposal for the tiny network's blocks, trained on forward samples of the model."""
    network = tiny_network()
    model = read_uai(network, EVIDENCE)
    data = prior_motif_samples(model, BLOCKS, 4000, seed=1)
    prop = NeuralProposal.create(MOTIF, n_components=4, hidden=32, seed=0)
    before = _expected_kl(network, prop, BLOCKS)
    report = prop.fit(
        data,
        steps=600,
        batch_size=128,
        learning_rate=1e-2,
        final_learning_rate=1e-3,
        seed=0,
        progressbar=False,
    )
    after = _expected_kl(network, prop, BLOCKS)
    return network, model, prop, data, before, after, report


def markov_blanket(network, variables) -> tuple[int, ...]:
    """The union of the scopes of the factors that involve ``variables``, minus them."""
    inside = set(variables)
    scopes = [network.scopes[f] for v in inside for f in network.factors_of_variable[v]]
    return tuple(sorted({u for scope in scopes for u in scope} - inside))


def test_markov_blanket_is_inside_the_conditioning_sets():
    network = tiny_network()
    for b in BLOCKS:
        assert set(markov_blanket(network, b.block)) <= set(b.cond.tolist())
    assert markov_blanket(network, [4]) == (2, 3, 5)


def test_training_lowers_kl_to_the_exact_block_conditional(trained):
    _, _, _, _, before, after, report = trained
    assert np.all(after < 0.2 * before), (before, after)
    assert np.all(after < 0.03), after
    assert report.losses[-50:].mean() < report.losses[:50].mean()


def test_training_is_reproducible_from_a_seed(trained):
    _, _, _, data, _, _, _ = trained
    weights = []
    for _ in range(2):
        prop = NeuralProposal.create(MOTIF, n_components=4, hidden=32, seed=7)
        prop.fit(data, steps=20, batch_size=64, seed=11, progressbar=False)
        weights.append(prop.net.weights)
    for k in weights[0]:
        np.testing.assert_array_equal(weights[0][k], weights[1][k])


def test_sample_frequencies_match_exact_enumeration(trained):
    """Through pm.sample (the compiled random scan, whose moves are the numpy steps', tested in
    test_neural_block_scan.py)."""
    network, model, prop, *_ = trained
    with model:
        step = NeuralBlock(model.free_RVs, blocks=BLOCKS, proposal=prop)
        assert step.scan_compilable
        idata = pm.sample(
            draws=1000,  # the z-scores' standard errors come from the ESS, checked below
            tune=100,
            chains=2,
            cores=1,
            step=[step],
            random_seed=4,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert float(idata.sample_stats["accept"].mean()) > 0.5
    net_of = step_to_network(step, model)
    draws = posterior_draws(idata, [s.name for s in step.specs])
    states, log_pi = tiny_joint(network, EVIDENCE)
    keep = np.isfinite(log_pi)
    pi = np.exp(log_pi[keep] - log_pi[keep].max())
    z, crit = max_z_score(draws, states[keep][:, net_of], pi / pi.sum())
    assert z < crit


# ----------------------------------------------------------------------------- save / load
def test_save_load_round_trip_is_identical(trained, tmp_path):
    prop = trained[2]
    path = prop.save(tmp_path / "tiny")
    assert path.name == "tiny.npz"
    back = load_proposal(path)
    assert back.motif == prop.motif
    for k, v in prop.net.weights.items():
        np.testing.assert_array_equal(back.net.weights[k], v)
    rng = np.random.default_rng(0)
    x_cond = np.stack([rng.integers(0, c, 50) for c in MOTIF.cond_cards], axis=1)
    params = rng.normal(size=(50, 2))
    for a, b in zip(prop.mixture(x_cond, params), back.mixture(x_cond, params), strict=True):
        np.testing.assert_array_equal(a, b)
    assert back.metadata["training"][0]["steps"] == 600


def _rewrite(path, out, *, header=None, arrays=None, drop=None):
    with np.load(path, allow_pickle=False) as npz:
        data = {k: npz[k] for k in npz.files}
    if header is not None:
        h = json.loads(str(data["header"]))
        header(h)
        data["header"] = np.array(json.dumps(h))
    for k, v in (arrays or {}).items():
        data[k] = v
    for k in drop or ():
        data.pop(k)
    np.savez(out, **data)
    return out


def test_corrupt_and_mismatched_files_are_refused(trained, tmp_path):
    prop = trained[2]
    good = prop.save(tmp_path / "good.npz", compress=False)
    raw = good.read_bytes()

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(raw[: len(raw) // 2])
    flipped = tmp_path / "flipped.npz"
    mid = len(raw) // 2
    flipped.write_bytes(raw[:mid] + bytes([raw[mid] ^ 0xFF]) + raw[mid + 1 :])
    text = tmp_path / "text.npz"
    text.write_text("not a proposal")
    cases = {
        truncated: "corrupt",
        flipped: "corrupt|checksum",
        text: "corrupt",
        _rewrite(good, tmp_path / "v.npz", header=lambda h: h.update(version=99)): "version",
        _rewrite(good, tmp_path / "f.npz", header=lambda h: h.update(format="x")): "not a",
        _rewrite(good, tmp_path / "drop.npz", drop=["W1"]): "lacks",
        _rewrite(good, tmp_path / "nohead.npz", drop=["header"]): "header",
        _rewrite(
            good,
            tmp_path / "shape.npz",
            arrays={"W2": np.zeros((3, 3), np.float32)},
        ): "shape|float32",
        _rewrite(
            good,
            tmp_path / "tamper.npz",
            arrays={"b0": prop.net.weights["b0"] + np.float32(1.0)},
        ): "checksum",
        _rewrite(
            good,
            tmp_path / "motif.npz",
            header=lambda h: h["motif"].update(block_cards=[2, 2]),
        ): "match",
    }
    for path, pattern in cases.items():
        with pytest.raises(ProposalFileError, match=pattern):
            NeuralProposal.load(path)
    with pytest.raises(FileNotFoundError, match="shipped"):
        load_proposal("no-such-proposal")
    assert zipfile.is_zipfile(good)


def test_mismatched_proposal_and_blocks_are_refused(trained):
    network, model, prop, *_ = trained
    other = NeuralProposal.create(GRID_BN_MOTIF, n_components=2, hidden=8)
    with model, pytest.raises(ValueError, match="motif"):
        NeuralBlock(model.free_RVs, blocks=BLOCKS, proposal=other)
    with model, pytest.raises(TypeError, match="BlockSet"):
        NeuralBlock(model.free_RVs, blocks=[[0, 1]], proposal=prop)
    bad = BlockSet(
        MotifSpec("tiny", (2, 2), (3, 2, 2, 2), 2),
        (MotifBlock([0, 1], [2, 3, 4, 5], params=[0.0, 0.0]),),
        index="uai",
    )
    with model, pytest.raises(ValueError, match="categories"):
        NeuralBlock(model.free_RVs, blocks=bad, proposal="exact", compile_kwargs=FAST)


# ----------------------------------------------------------------------------- grid-BN motif
def test_grid_layout_and_motif_conditional_match_the_network(uai_dir):
    shuffled = read_network(uai_dir / "uai2008_grid_bn" / "50-12-5.uai")
    layout = grid_bn_layout(shuffled)
    assert layout.shape == (12, 12) and np.unique(layout).size == 144
    blocks = uai_grid_blocks(shuffled)
    assert len(blocks) == 16 and blocks.covered().size == 144
    assert all(b.cond.size == 14 and b.params.size == 60 for b in blocks)

    # generated 7x7 grid: overlapping blocks, every border case; the motif's own conditional
    # (from its 60 parameters and padded conditioning values) equals the network's
    network, _ = grid_bn(7, 0.5, seed=2)
    blocks = grid_bn_blocks(network)
    assert len(blocks) == 9
    # the 512 block states in the order of grid_bn_motif_log_conditional's columns
    S = np.array(list(itertools.product(range(2), repeat=9)), dtype=np.int64)
    for full in forward_sample(network, 3, rng=0)[0]:
        for b in blocks:
            x_cond = np.where(b.cond >= 0, full[np.maximum(b.cond, 0)], b.pad)
            motif = grid_bn_motif_log_conditional(x_cond[None], b.params[None])[0]
            states = np.repeat(full[None], 512, axis=0)
            states[:, b.block] = S
            lp = network.log_factor_product(states)
            lp = lp - np.logaddexp.reduce(lp)
            assert np.array_equal(np.isfinite(lp), np.isfinite(motif))
            ok = np.isfinite(lp)
            np.testing.assert_allclose(motif[ok], lp[ok], atol=1e-10)


def test_grid_motif_samples_respect_their_cpts():
    xb, xc, params = grid_bn_motif_samples(500, rng=1)
    assert xb.shape == (500, 9) and xc.shape == (500, 14) and params.shape == (500, 60)
    log_cond = grid_bn_motif_log_conditional(xc, params)
    idx = xb @ (2 ** np.arange(8, -1, -1))
    assert np.all(np.isfinite(log_cond[np.arange(500), idx]))
    np.testing.assert_array_equal(
        grid_bn_motif_samples(10, rng=5)[2], grid_bn_motif_samples(10, rng=5)[2]
    )


def test_shipped_grid_bn_proposal_short_path(uai_dir):
    proposal = load_proposal("grid-bn")
    assert proposal.motif.same_shape(GRID_BN_MOTIF)
    assert (
        pymc_lbp.samplers.block.neural_proposal.LIBRARY / "grid-bn.npz"
    ).stat().st_size < 1_000_000
    # it has learned the motif: lower KL to the exact conditional than an untrained network
    xb, xc, params = grid_bn_motif_samples(2000, rng=123)
    log_cond = grid_bn_motif_log_conditional(xc, params)
    idx = xb @ (2 ** np.arange(8, -1, -1))
    exact = log_cond[np.arange(2000), idx]
    untrained = NeuralProposal.create(GRID_BN_MOTIF, n_components=2, hidden=16)
    kl_trained = np.mean(exact - proposal.log_prob(xb, xc, params))
    kl_untrained = np.mean(exact - untrained.log_prob(xb, xc, params))
    assert kl_trained < 0.5 * kl_untrained

    path = uai_dir / "uai2008_grid_bn" / "50-12-5.uai"
    model = read_uai(path, f"{path}.evid")
    blocks = uai_grid_blocks(model)
    with model:
        step = NeuralBlock(model.free_RVs, blocks=blocks, proposal=proposal)
        idata = pm.sample(
            draws=20,
            tune=5,
            chains=1,
            cores=1,
            step=[step],
            random_seed=0,
            progressbar=False,
            compute_convergence_checks=False,
        )
    stats = idata.sample_stats
    assert step.steps_per_draw == 16
    assert {"accept", "n_accepted", "mh_steps", "block", "sites_changed"} <= set(stats)
    assert stats["block"].values.max() < 16
    assert stats["accept"].values.mean() > 0


def test_a_400_variable_grid_network_samples_with_the_shipped_proposal(tmp_path):
    """The documented short path on a grid of the size of the UAI'08 instances (20 x 20, 90 %
    deterministic): the model logp adds 39 terms, more than PyTensor's Python implementation of
    an elementwise op takes, so nothing may evaluate it in Python mode (it crashed at
    construction). Every draw keeps the evidence and has positive probability."""
    network, evidence = grid_bn(20, 0.9, seed=3)
    path = tmp_path / "grid-20.uai"
    write_network(path, network)
    model = read_uai(path, evidence)
    with model:
        step = NeuralBlock(
            model.free_RVs, blocks=uai_grid_blocks(model), proposal=load_proposal("grid-bn")
        )
        idata = pm.sample(draws=10, tune=2, chains=1, step=[step], random_seed=0,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    post = idata.posterior.isel(chain=0)
    states = uai_state_from_point({n: post[n].values for n in post.data_vars}, model)
    assert states.shape == (10, 400)
    assert np.all(states[:, list(evidence)] == list(evidence.values()))
    assert np.all(np.isfinite(network.log_factor_product(states)))
