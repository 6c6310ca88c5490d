"""NeuralBlock on a hidden Markov model written the usual PyMC way, and a motif trained on it.

The model: three hidden regimes with ``Categorical`` states, the Markov chain as a
``pm.Potential`` of ``log(P[z[:-1], z[1:]])`` with Dirichlet rows for ``P``, Gaussian emissions
around known levels with an unknown noise. ``NeuralBlock([z])`` with no other argument finds the
chain in the model graph and uses the shipped ``chain-k3-b3`` proposal (trained once on random
chain potentials); NUTS takes ``P`` and ``sigma``.

Then, in a few lines, a proposal trained on this model itself: blocks of 4 states (81 joint
states), examples cut from posterior draws of exact block Gibbs (``motif_examples``), a short
training run, and sampling with the new proposal.

Prints ArviZ summaries and each proposal's acceptance, writes ``hmm_neural_block.png`` (the
posterior probability of every regime over time, with the true regimes).

Run: ``python examples/hmm_neural_block.py [--quick]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

import pymc_lbp  # noqa: E402
from pymc_lbp.samplers.block.motifs.chain import chain_blocks  # noqa: E402

T, K = 150, 3
LEVELS = np.array([-1.5, 0.0, 1.5])


def simulate(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    P = np.full((K, K), 0.05) + np.eye(K) * 0.85
    z = np.zeros(T, dtype=int)
    for t in range(1, T):
        z[t] = rng.choice(K, p=P[z[t - 1]])
    return z, rng.normal(LEVELS[z], 0.7)


def build_model(y: np.ndarray) -> pm.Model:
    with pm.Model() as model:
        P = pm.Dirichlet("P", a=np.ones((K, K)) + 4 * np.eye(K))
        sigma = pm.HalfNormal("sigma", 1.0)
        z = pm.Categorical("z", p=np.full(K, 1.0 / K), shape=T)
        pm.Potential("transitions", pm.math.log(P[z[:-1], z[1:]]).sum())
        pm.Normal("y", mu=pt.as_tensor(LEVELS)[z], sigma=sigma, observed=y)
    return model


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("hmm_neural_block.png"))
    args = ap.parse_args(argv)
    draws, tune, train_steps = (80, 50, 300) if args.quick else (1000, 500, 3000)
    logging.getLogger("pymc_lbp").setLevel(logging.INFO)
    z_true, y = simulate()
    model = build_model(y)
    # --quick (the test's smoke run): one chain, every line of the script still runs
    sample = dict(chains=1 if args.quick else 2, cores=1, progressbar=False, random_seed=1)
    with model:
        step = pymc_lbp.NeuralBlock([model["z"]])  # finds the chain, picks chain-k3-b3
        print(step.blocks_reason)
        idata = pm.sample(draws=draws, tune=tune, step=[step], **sample)
    print(az.summary(idata, var_names=["P", "sigma"]))
    shipped_accept = float(idata.sample_stats["accept"].mean())
    print(f"shipped proposal: mean acceptance {shipped_accept:.3f}")

    # a proposal for blocks of 4, trained on this model's own posterior draws
    blocks = chain_blocks("z", T, K, 4)
    with model:
        exact = pymc_lbp.NeuralBlock([model["z"]], blocks=blocks, proposal="exact")
        warm = pm.sample(draws=draws // 2, tune=tune, step=[exact], **sample)
        proposal = pymc_lbp.NeuralProposal.create(blocks.motif, seed=0)
        proposal.fit(exact.motif_examples(warm), steps=train_steps, progressbar=False)
        own = pymc_lbp.NeuralBlock([model["z"]], blocks=blocks, proposal=proposal)
        idata_own = pm.sample(draws=draws, tune=tune, step=[own], **sample)
    own_accept = float(idata_own.sample_stats["accept"].mean())
    print(f"proposal trained on this model (blocks of 4): mean acceptance {own_accept:.3f}")
    print(az.summary(idata_own, var_names=["sigma"]))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    z = idata.posterior["z"].values.reshape(-1, T)
    probs = np.stack([(z == k).mean(axis=0) for k in range(K)])
    fig, ax = plt.subplots(figsize=(9, 3))
    ax.stackplot(np.arange(T), probs, labels=[f"regime {k}" for k in range(K)], alpha=0.8)
    ax.plot(np.arange(T), z_true / (K - 1), "k.", ms=3, label="true regime (scaled)")
    ax.set_xlabel("time")
    ax.set_ylabel("posterior probability")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return {"shipped_accept": shipped_accept, "own_accept": own_accept}


if __name__ == "__main__":
    main()
