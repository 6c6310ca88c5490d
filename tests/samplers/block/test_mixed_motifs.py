"""Mixed discrete-continuous motifs: the proposal network's Gaussian outputs (issue #12.3).

A mixed block (Wang et al.'s Gaussian-mixture experiment: a cluster's active flag and its mean)
is proposed from a mixture whose components hold categorical tables for the discrete entries
and a Gaussian for each continuous entry. Checked here: the numpy forward pass equals the
pytensor training graph; training on a synthetic motif with a known conditional reaches its
entropy (the expected negative log-likelihood minus the exact conditional entropy is the
expected KL divergence, >= 0, and small after training); files keep the continuous part; a
network without continuous entries keeps its old layout; NeuralBlock refuses mixed motifs with
a clear message.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy.special import expit

from pymc_lbp import NeuralBlock, NeuralProposal, load_proposal
from pymc_lbp.samplers.block.mdn import MixtureDensityNetwork
from pymc_lbp.samplers.block.motifs.motif_api import BlockSet, MotifBlock, MotifSpec

MIXED = MotifSpec("flag-and-mean", (2,), (2,), 1, "test motif", n_continuous=1)
SD = 0.5


def mixed_samples(rng, n):
    """b ~ Bernoulli(expit(2 c + s)), v | b ~ N(3 b - 1 + c, SD^2); c a parameter, s a binary
    conditioning value (+-1 in the features)."""
    c = rng.normal(size=n)
    s = rng.integers(0, 2, size=n)
    b = (rng.random(n) < expit(2 * c + (2 * s - 1))).astype(float)
    v = rng.normal(3 * b - 1 + c, SD)
    return np.stack([b, v], axis=1), s[:, None], c[:, None]


def exact_entropy(c, s):
    p = expit(2 * c + (2 * s[:, 0] - 1))
    h_b = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    return float(np.mean(h_b + 0.5 * np.log(2 * np.pi * np.e * SD**2)))


def test_numpy_forward_equals_the_training_graph():
    net = MixtureDensityNetwork(5, (2, 3), n_components=3, hidden=16, seed=1, n_continuous=2)
    rng = np.random.default_rng(0)
    w = {k: rng.normal(scale=0.5, size=v.shape) for k, v in net.weights.items()}
    net.set_weights(w)
    u = rng.normal(size=(20, 5))
    y = np.column_stack([rng.integers(0, 2, 20), rng.integers(0, 3, 20), rng.normal(size=(20, 2))])
    np.testing.assert_allclose(net.log_prob(u, y), net.compile_log_prob()(u, y), rtol=1e-9)
    means, sds = net.gaussians_from_preactivation(u @ net._w64["W0"] + net._w64["b0"])
    assert means.shape == sds.shape == (20, 3, 2) and np.all(sds >= net.sd_floor)


def test_without_continuous_entries_the_layout_is_unchanged():
    """The shipped proposals (no continuous entries) load and score as before."""
    prop = load_proposal("chain-k2-b4")
    assert prop.net.n_continuous == 0 and prop.net.n_outputs == prop.net.weights["b2"].size
    assert "n_continuous" not in prop.header()["network"]


def test_training_reaches_the_exact_conditional_entropy(tmp_path):
    prop = NeuralProposal.create(MIXED, n_components=4, hidden=32, seed=0)
    rng = np.random.default_rng(7)
    held = mixed_samples(rng, 4000)
    entropy = exact_entropy(held[2][:, 0], held[1])

    def nll():
        return float(-np.mean(prop.log_prob(*held)))

    before = nll()
    prop.fit(
        lambda r, n: mixed_samples(r, n), steps=1500, batch_size=256, seed=3, progressbar=False
    )
    after = nll()
    # E[NLL] - H = E KL(p || q) >= 0 (up to the held-out sample's noise, about 0.02 nats)
    assert after - entropy > -0.05
    assert after - entropy < 0.05, (before, after, entropy)
    assert before - entropy > 0.5
    path = prop.save(tmp_path / "mixed.npz")
    back = NeuralProposal.load(path)
    assert back.net.n_continuous == 1 and back.net.sd_floor == prop.net.sd_floor
    assert back.motif == MIXED
    np.testing.assert_allclose(back.log_prob(*held), prop.log_prob(*held), rtol=1e-12)


def test_motif_spec_round_trip_and_shape():
    assert MotifSpec.from_dict(MIXED.to_dict()) == MIXED
    assert MIXED.block_size == 2
    discrete = MotifSpec("flag", (2,), (2,), 1)
    assert not MIXED.same_shape(discrete)
    assert (
        MotifSpec.from_dict({k: v for k, v in discrete.to_dict().items() if k != "n_continuous"})
        == discrete
    )
    with pytest.raises(ValueError, match="n_continuous must be >= 0"):
        MotifSpec("bad", (2,), (), 0, n_continuous=-1)
    with pytest.raises(ValueError, match="n_continuous must be an int >= 0"):
        MixtureDensityNetwork(3, (2,), n_continuous=1.5)
    with pytest.raises(ValueError, match="sd_floor must be a positive"):
        MixtureDensityNetwork(3, (2,), n_continuous=1, sd_floor=0.0)


def test_neural_block_refuses_a_mixed_motif():
    prop = NeuralProposal.create(MIXED, n_components=2, hidden=8)
    blocks = BlockSet(MIXED, [MotifBlock([0, 1], [2], [0.0], label="cluster")], "flat", ("z",))
    with pm.Model():
        pm.Bernoulli("z", 0.5, shape=3)
        with pytest.raises(ValueError, match="continuous entries; NeuralBlock samples discrete"):
            NeuralBlock(blocks=blocks, proposal=prop)
