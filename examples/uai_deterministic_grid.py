"""Example: a grid Bayesian network with deterministic CPTs, where single-site Gibbs is stuck.

Reads the UAI 2008 grid BN 50-12-5 (144 binary variables on a 12 x 12 grid, half of the CPTs
deterministic, evidence on the sink) from the networks shipped with the package, builds the
PyMC model with :func:`pymc_lbp.models.read_uai` and samples it twice for the same number of
draws: with PyMC's own step for binary variables (``BinaryGibbsMetropolis``, what ``pm.sample``
assigns) and with :class:`pymc_lbp.BlockGibbs`, whose default blocks on a ``read_uai`` model are
elimination blocks (every free variable but a small cutset, drawn whole by bucket elimination;
here the whole network fits one block, so every draw is an independent exact sample). Prints how
the blocks were chosen, the ArviZ summary of a few variables, and each run's mean absolute
marginal error against the shipped exact marginals (Rao-Blackwellised estimates, as ``mar``
writes them).

The same from the command line: ``python -m pymc_lbp mar 50-12-5.uai --method sample``
(``block_gibbs`` is the default sampler).

Run: ``python examples/uai_deterministic_grid.py [--draws N] [--chains N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm

from pymc_lbp import BlockGibbs
from pymc_lbp.models import read_uai, uai_marginals, uai_variable_map
from pymc_lbp.models.uai import NETWORKS, read_mar

NETWORK = NETWORKS / "uai2008_grid_bn" / "50-12-5.uai"


def mean_error(idata, model, reference) -> float:
    """Mean |estimated - exact| over the free variables and their categories."""
    info = uai_variable_map(model)
    marginals = uai_marginals(idata, model)
    free = np.flatnonzero(info.fixed_values < 0).tolist()
    return float(np.mean([np.abs(np.asarray(marginals[v]) - reference[v]).mean() for v in free]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    model = read_uai(NETWORK, Path(f"{NETWORK}.evid"))
    reference = read_mar(Path(f"{NETWORK}.MAR"))
    info = uai_variable_map(model)
    free_vars = [model[name] for name in info.free_names]
    runs = {}
    for label in ("PyMC's BinaryGibbsMetropolis", "pymc_lbp.BlockGibbs"):
        with model:
            if label == "pymc_lbp.BlockGibbs":
                step = BlockGibbs(free_vars)
                print(f"BlockGibbs blocks: {step.blocks_reason}")
            else:
                step = pm.BinaryGibbsMetropolis(free_vars)
            start = time.perf_counter()
            idata = pm.sample(
                draws=args.draws, tune=0, chains=args.chains, cores=1, step=[step],
                random_seed=args.seed, progressbar=False, compute_convergence_checks=False,
            )  # fmt: skip
            seconds = time.perf_counter() - start
        runs[label] = (mean_error(idata, model, reference), seconds, idata)

    name = max(info.free_names, key=lambda n: info.members[n].size)  # the largest layer
    members = info.members[name]
    some = members[:: max(1, members.size // 4)][:4].tolist()
    print(f"\nArviZ summary (BlockGibbs) of network variables {some}:")
    block_idata = runs["pymc_lbp.BlockGibbs"][2]
    print(az.summary(block_idata, var_names=[name], coords={f"{name}_var": some}))
    print(f"\n{args.chains} chains x {args.draws} draws; mean |marginal error| vs the exact MAR:")
    for label, (error, seconds, _) in runs.items():
        print(f"  {label:30s} {error:.4f}   ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
