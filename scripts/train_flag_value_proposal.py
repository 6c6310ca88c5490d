"""Train the general flag-value proposal shipped as ``load_proposal("flag-value-g32")``.

The motif (:mod:`pymc_lbp.samplers.block.motifs.flag_value`): a binary flag and the continuous value
it switches on (a mixture component's active flag and its mean), described by the block's log
conditional density on a grid of 32 standardised values per flag. Training data are drawn afresh
for every minibatch by :func:`pymc_lbp.samplers.block.motifs.flag_value.flag_value_samples` (random
profiles: a broad Gaussian for the flag off, one to three bumps for the flag on, a random log-odds
offset; exact draws from the piecewise-linear target they describe). The network is a mixture
density network (two ELU layers of 4 x max(in, out) units, 8 components, each a flag table and
a Gaussian for the value), trained by maximum likelihood with Adam.

Evaluation (written into the file's metadata and printed), on held-out examples: the mean KL
divergence E KL(p || q) (E_p[log p - log q], exact log p) and the mean acceptance probability
of the independence proposal (x ~ p, y ~ q, min(1, p(y) q(x) / (p(x) q(y)))), before and after
training.

Usage::

    python scripts/train_flag_value_proposal.py                  # shipped settings
    python scripts/train_flag_value_proposal.py --steps 500 --out /tmp/try.npz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pymc_lbp.samplers.block.motifs.flag_value import (
    flag_value_log_density,
    flag_value_motif,
    flag_value_samples,
)
from pymc_lbp.samplers.block.neural_proposal import LIBRARY, NeuralProposal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proposal_training import train_and_save  # noqa: E402


def draw_from_proposal(proposal, params, rng) -> np.ndarray:
    """One draw ``(flag, t)`` per row of ``params`` from the network's mixture."""
    n = params.shape[0]
    net = proposal.net
    a0 = proposal.motif.features(np.zeros((n, 0), np.int64), params) @ net._w64["W0"]
    log_w, log_tables, means, sds = net.full_mixture_from_preactivation(a0 + net._w64["b0"])
    cdf = np.cumsum(np.exp(log_w), axis=1)
    k = np.minimum((rng.random((n, 1)) * cdf[:, -1:] >= cdf).sum(axis=1), log_w.shape[1] - 1)
    rows = np.arange(n)
    p_on = np.exp(log_tables[rows, k, 0, 1])
    flag = (rng.random(n) < p_on).astype(np.float64)
    t = means[rows, k, 0] + sds[rows, k, 0] * rng.standard_normal(n)
    return np.column_stack([flag, t])


def evaluate(proposal, x_block, x_cond, params, seed: int = 0) -> dict:
    """Mean KL(p || q) and mean acceptance of the independence proposal on held-out rows."""
    rng = np.random.default_rng(seed)
    log_p_x = flag_value_log_density(params, x_block[:, 0], x_block[:, 1])
    log_q_x = proposal.log_prob(x_block, x_cond, params)
    y = draw_from_proposal(proposal, params, rng)
    log_p_y = flag_value_log_density(params, y[:, 0], y[:, 1])
    log_q_y = proposal.log_prob(y, x_cond, params)
    with np.errstate(invalid="ignore"):
        log_r = (log_p_y - log_q_y) - (log_p_x - log_q_x)
    acc = np.where(np.isfinite(log_r), np.exp(np.minimum(log_r, 0.0)), 0.0)
    return {"kl": float(np.mean(log_p_x - log_q_x)), "acceptance": float(np.mean(acc))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid-points", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--components", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--final-learning-rate", type=float, default=1e-4)
    ap.add_argument("--sd-floor", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-samples", type=int, default=20000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    G = args.grid_points
    motif = flag_value_motif(G)
    out = args.out or LIBRARY / f"{motif.name}.npz"

    proposal = NeuralProposal.create(
        motif,
        n_components=args.components,
        hidden=args.hidden,
        seed=args.seed,
        sd_floor=args.sd_floor,
    )
    print(proposal, f"{proposal.net.n_parameters} weights", flush=True)
    held_out = flag_value_samples(np.random.default_rng(10_000 + args.seed), args.eval_samples, G)
    train_and_save(
        proposal,
        lambda rng, n: flag_value_samples(rng, n, G),
        args,
        script="scripts/train_flag_value_proposal.py",
        data_text=f"flag_value_samples(grid_points={G}), fresh per batch",
        evaluate=lambda prop: evaluate(prop, *held_out),
        out=out,
    )


if __name__ == "__main__":
    main()
