"""Train the general grid-BN motif proposal shipped as ``pymc_lbp.load_proposal("grid-bn")``.

The motif (Wang et al. 2018): a 3 x 3 block of a binary grid Bayesian network, conditioned on
the 14 nodes around it, with the 60 CPT entries of the block's nodes and of its children as
local parameters (see :data:`pymc_lbp.samplers.block.motifs.grid_bn.GRID_BN_MOTIF`). Training data
are drawn afresh for every minibatch by
:func:`pymc_lbp.samplers.block.motifs.grid_bn.grid_bn_motif_samples`: every CPT row is [0, 1] w.p.
1/40, [1, 0] w.p. 1/40, Dirichlet(1/2, 1/2) otherwise; a quarter of the motifs lie on each grid
border. The network is a mixture density network (two ELU layers of 4 x max(in, out) units, K
components), trained by maximum likelihood with Adam.

Evaluation (written into the file's metadata and printed): the mean KL divergence
E_C KL(p(B | C) || q(B | C)) on held-out motif samples (exact conditionals by enumeration of the
512 block states), and the same on the blocks of the UAI'08 grids in ../shared/data/uai with
forward-sampled states, before and after training.

Usage::

    python scripts/train_grid_bn_proposal.py                # the shipped settings
    python scripts/train_grid_bn_proposal.py --steps 500 --out /tmp/try.npz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pymc_lbp.samplers.block.motifs.grid_bn import (
    GRID_BN_MOTIF,
    grid_bn_blocks,
    grid_bn_motif_log_conditional,
    grid_bn_motif_samples,
)
from pymc_lbp.samplers.block.neural_proposal import LIBRARY, NeuralProposal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proposal_training import ROOT, train_and_save  # noqa: E402

UAI_GRIDS = ROOT.parent / "shared" / "data" / "uai" / "uai2008_grid_bn"
POWERS = 2 ** np.arange(8, -1, -1)


def mean_kl(proposal, x_block, x_cond, params) -> float:
    """Monte-Carlo E[log p(x_B | x_C) - log q(x_B | x_C)] over joint samples (= E_C KL)."""
    exact = grid_bn_motif_log_conditional(x_cond, params)[np.arange(len(x_block)), x_block @ POWERS]
    return float(np.mean(exact - proposal.log_prob(x_block, x_cond, params)))


def grid_file_samples(n_states: int, seed: int):
    """Motif examples from the blocks of the shipped UAI'08 grids (forward-sampled states)."""
    from pymc_lbp.models.uai import forward_sample, read_network

    xb, xc, pr = [], [], []
    for path in sorted(UAI_GRIDS.glob("*.uai")):
        network = read_network(path)
        states = forward_sample(network, n_states, rng=seed)[0]
        for b in grid_bn_blocks(network, stride=1):
            xb.append(states[:, b.block])
            xc.append(np.where(b.cond >= 0, states[:, np.maximum(b.cond, 0)], b.pad))
            pr.append(np.broadcast_to(b.params, (n_states, b.params.size)))
    if not xb:
        return None
    return np.concatenate(xb), np.concatenate(xc), np.concatenate(pr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--components", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--epsilon", type=float, default=1e-3)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--final-learning-rate", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-samples", type=int, default=20000)
    ap.add_argument("--out", type=Path, default=LIBRARY / "grid-bn.npz")
    args = ap.parse_args()

    proposal = NeuralProposal.create(
        GRID_BN_MOTIF,
        n_components=args.components,
        hidden=args.hidden,
        epsilon=args.epsilon,
        seed=args.seed,
    )
    print(proposal, f"{proposal.net.n_parameters} weights", flush=True)
    held_out = grid_bn_motif_samples(args.eval_samples, rng=10_000 + args.seed)
    grids = grid_file_samples(20, seed=20_000 + args.seed)

    def evaluate(prop):
        kl = {"motif": mean_kl(prop, *held_out)}
        if grids is not None:
            kl["uai08_grids"] = mean_kl(prop, *grids)
        return kl

    train_and_save(
        proposal,
        lambda rng, n: grid_bn_motif_samples(n, rng),
        args,
        script="scripts/train_grid_bn_proposal.py",
        data_text="grid_bn_motif_samples(det_prob=1/40, border_prob=0.25), fresh per batch",
        evaluate=evaluate,
        out=args.out,
        before_key="kl_before",
        after_key="kl_after",
    )


if __name__ == "__main__":
    main()
