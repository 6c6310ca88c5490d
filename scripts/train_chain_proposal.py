"""Train a general chain-motif proposal shipped as ``load_proposal("chain-k{K}-b{L}")``.

The motif (:mod:`pymc_lbp.samplers.block.motifs.chain`): ``L`` consecutive ``K``-category states of
a chain (an HMM's hidden states, a chain CRF's tags) given the rest of the model, described by the
block's canonical unary and pairwise log-potentials (the Markov blanket absorbed). Training data
are drawn afresh for every minibatch by
:func:`pymc_lbp.samplers.block.motifs.chain.chain_motif_samples` (random sticky or dense
transitions, shared or per position, emission scales from 0.1 to 10, chain ends w.p. 1/4; exact
block samples by enumeration). The network is a mixture density network (two ELU layers of 4 x
max(in, out) units, K components), trained by maximum likelihood with Adam.

Evaluation (written into the file's metadata and printed): the mean KL divergence
E KL(p(B | rest) || q(B | rest)) on held-out motif samples (exact conditionals by enumeration of
the K^L block states) before and after training, and the mean acceptance probability of the
independence proposal on them (``E_p E_q min(1, p(y) q(x) / (p(x) q(y)))``).

Usage::

    python scripts/train_chain_proposal.py --categories 2 --length 4     # shipped settings
    python scripts/train_chain_proposal.py --categories 3 --length 3
    python scripts/train_chain_proposal.py --categories 4 --length 3
    python scripts/train_chain_proposal.py --steps 500 --out /tmp/try.npz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pymc_lbp.samplers.block.motifs.chain import (
    chain_block_states,
    chain_motif,
    chain_motif_log_conditional,
    chain_motif_samples,
)
from pymc_lbp.samplers.block.neural_proposal import LIBRARY, NeuralProposal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proposal_training import train_and_save  # noqa: E402


def evaluate(proposal, K: int, L: int, x_block, x_cond, params) -> dict:
    """Mean KL(p || q) and mean acceptance of the independence proposal on samples."""
    states = chain_block_states(K, L)
    log_p = chain_motif_log_conditional(params, K, L)  # (n, S)
    n, S = log_p.shape
    log_q = proposal.log_prob(
        np.tile(states, (n, 1)), np.repeat(x_cond, S, axis=0), np.repeat(params, S, axis=0)
    ).reshape(n, S)
    p = np.exp(log_p)
    q = np.exp(log_q)
    kl = float(np.mean(np.sum(p * (log_p - log_q), axis=1)))
    # acceptance: x ~ p, y ~ q: min(1, w(y) / w(x)) with w = p / q
    log_w = log_p - log_q
    acc = np.minimum(1.0, np.exp(log_w[:, None, :] - log_w[:, :, None]))
    mean_acc = float(np.mean(np.einsum("nx,ny,nxy->n", p, q, acc)))
    return {"kl": kl, "acceptance": mean_acc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--categories", type=int, default=2)
    ap.add_argument("--length", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--components", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--epsilon", type=float, default=1e-3)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--final-learning-rate", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-samples", type=int, default=4000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    K, L = args.categories, args.length
    motif = chain_motif(K, L)
    out = args.out or LIBRARY / f"{motif.name}.npz"

    proposal = NeuralProposal.create(
        motif,
        n_components=args.components,
        hidden=args.hidden,
        epsilon=args.epsilon,
        seed=args.seed,
    )
    print(proposal, f"{proposal.net.n_parameters} weights", flush=True)
    held_out = chain_motif_samples(args.eval_samples, 10_000 + args.seed, n_categories=K, length=L)
    train_and_save(
        proposal,
        lambda rng, n: chain_motif_samples(n, rng, n_categories=K, length=L),
        args,
        script="scripts/train_chain_proposal.py",
        data_text=f"chain_motif_samples(n_categories={K}, length={L}), fresh per batch",
        evaluate=lambda prop: evaluate(prop, K, L, *held_out),
        out=out,
    )


if __name__ == "__main__":
    main()
