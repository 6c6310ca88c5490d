"""Example: sample a UAI network with evidence through pm.sample and check it against exact.

Reads the UAI 2006 Bayesian network BN_0 (100 binary variables) with its evidence file (26
observed variables) from the networks shipped with the package, builds the PyMC model with
:func:`pymc_lbp.models.read_uai`, samples the 74 free variables with GibbsWithGradients, prints
the ArviZ summary of a few variables (the posterior mean of a binary variable is P(x = 1 |
evidence)), the mean absolute error of the sampled marginals against the exact ones (bucket-tree
elimination) and writes the sampled marginals in the UAI MAR format.

The same run from the command line:
``python -m pymc_lbp mar BN_0.uai --evidence BN_0.uai.evid --method sample -o BN_0.MAR``
(``--method auto``, the default, would write the exact marginals: BN_0's elimination fits).

Run: ``python examples/uai_network.py [--network FILE --evidence FILE] [--draws N] [--out F]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm

from pymc_lbp import GibbsWithGradients
from pymc_lbp.diagnostics import ess, hamming_trace, reference_state
from pymc_lbp.models import exact_marginals, read_uai, uai_marginals, uai_variable_map, write_mar
from pymc_lbp.models.uai import NETWORKS

DATA = NETWORKS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", type=Path, default=DATA / "uai2006_bn" / "BN_0.uai")
    parser.add_argument("--evidence", type=Path, default=DATA / "uai2006_bn" / "BN_0.uai.evid")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=100)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("uai_network.MAR"))
    args = parser.parse_args(argv)

    # One Bernoulli vector per cardinality for a MARKOV build ("x_card2"; its dimension
    # "x_card2_var" holds the network indices). The evidence variables are fixed, not sampled,
    # and the start state has non-zero probability.
    model = read_uai(args.network, args.evidence, kind="MARKOV")
    info = uai_variable_map(model)
    n_free = sum(info.members[name].size for name in info.free_names)
    print(
        f"{info.network.name}: {info.network.n_vars} variables, {len(info.evidence)} observed, "
        f"{n_free} sampled as {list(info.free_names)}; start from {info.start_source}"
    )

    with model:
        step = GibbsWithGradients(
            [model[name] for name in info.free_names], steps_per_draw=max(1, n_free // 2)
        )
        start = time.perf_counter()
        idata = pm.sample(
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            cores=1,
            step=[step],
            random_seed=args.seed,
            compute_convergence_checks=False,
        )
        seconds = time.perf_counter() - start

    first = info.free_names[0]
    some = info.members[first][:: max(1, info.members[first].size // 5)][:5].tolist()
    print(f"\nArviZ summary of network variables {some} (mean = P(x = 1 | evidence)):")
    with pd.option_context("display.width", 120, "display.max_columns", 20):
        print(az.summary(idata, var_names=[first], coords={f"{first}_var": some}))

    cards = np.concatenate([info.network.cards[info.members[n]] for n in info.free_names])
    hamming = hamming_trace(idata, list(info.free_names), reference_state(cards.size, cards))
    print(
        f"\n{seconds:.1f} s; ESS of the Hamming statistic {ess(hamming):.0f}; mean acceptance "
        f"{float(idata.sample_stats['accept'].mean()):.3f}"
    )

    sampled = uai_marginals(idata, model)
    exact = exact_marginals(info.network, info.evidence)
    free = [v for v in range(info.network.n_vars) if v not in info.evidence]
    print("\nP(x = 1 | evidence) of the same variables, sampled vs exact:")
    for v in some:
        print(f"  x[{v:>3}]  {sampled[v][1]:.3f}  {exact[v][1]:.3f}")
    errors = np.concatenate([np.abs(sampled[v] - exact[v]) for v in free])
    print(
        f"marginals vs exact over the {len(free)} free variables: mean |error| "
        f"{errors.mean():.4f}, max {errors.max():.4f}"
    )
    write_mar(args.out, sampled)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
