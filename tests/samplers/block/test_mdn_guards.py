"""NeuralBlock training sizes: out-of-range networks and minibatches are refused (issue #14.8)."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_lbp import NeuralProposal
from pymc_lbp.samplers.block.mdn import MAX_TRAINING_BYTES, MixtureDensityNetwork
from pymc_lbp.samplers.block.motifs.grid_bn import GRID_BN_MOTIF


def test_training_memory_estimate_is_the_documented_formula():
    net = MixtureDensityNetwork(5, (2, 3), n_components=4, hidden=7)
    K, D, C = 4, 2, 3
    n_out = K * (1 + 1 + 2)
    assert net.n_parameters == 5 * 7 + 7 + 7 * 7 + 7 + 7 * n_out + n_out
    width = 5 + 2 * 7 + n_out + 2 * K * D * C
    assert net.training_memory_bytes(10) == 32 * net.n_parameters + 6 * 8 * 10 * width


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"hidden": 10**5}, r"out of range: training it would hold about \d+\.\d GiB"),
        ({"n_components": 10**6, "hidden": 16}, r"n_components=1000000\) is out of range"),
        ({"hidden": 0}, "hidden must be a positive int"),
        ({"hidden": 2.5}, "hidden must be a positive int"),
        ({"n_components": 0}, "n_components must be a positive int"),
    ],
)
def test_out_of_range_networks_are_refused_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NeuralProposal.create(GRID_BN_MOTIF, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch_size": 10**9}, r"batch_size=1000000000 is out of range .*use a smaller"),
        ({"batch_size": 0}, "batch_size must be a positive int"),
        ({"steps": 0}, "steps must be a positive int"),
        ({"steps": 1.5}, "steps must be a positive int"),
        ({"learning_rate": 0.0}, "learning_rate must be a positive finite"),
        ({"final_learning_rate": float("nan")}, "final_learning_rate must be a positive finite"),
    ],
)
def test_out_of_range_training_options_are_refused_before_training(kwargs, match):
    prop = NeuralProposal.create(GRID_BN_MOTIF, n_components=2, hidden=8)
    before = {k: v.copy() for k, v in prop.net.weights.items()}

    def data(rng, n):  # never called: the options are checked first
        raise AssertionError("training started")

    with pytest.raises(ValueError, match=match):
        prop.fit(data, progressbar=False, **kwargs)
    for k, v in prop.net.weights.items():
        np.testing.assert_array_equal(v, before[k])


def test_sizes_within_range_are_accepted():
    # the default (4 x max(inputs, outputs)) and the seed paper's 5 x: far inside the bound
    net = NeuralProposal.create(GRID_BN_MOTIF).net
    assert net.training_memory_bytes(256) < MAX_TRAINING_BYTES / 100
    wide = NeuralProposal.create(GRID_BN_MOTIF, hidden=5 * net.hidden).net
    assert wide.training_memory_bytes(4096) < MAX_TRAINING_BYTES
