"""What a BLAS is worth to pytensor on our models.

pip-installed pytensor warns that it "could not link to a BLAS installation" and then computes
dot products through NumPy's C API instead of calling a BLAS directly. This script times the
compiled neighbour-difference calls of our samplers with and without a BLAS (``blas__ldflags``
empty vs ``-lopenblas``, the latter with OpenBLAS's default threads and with one thread), each
configuration in its own subprocess with its own compile cache,
alternating, on two models: the 30x30 Ising segmentation posterior (elementwise and shifts, no dot
products) and an RBM marginal over 784 visible / 100 hidden units (matrix-vector products).

Writes docs/results/blas.{json,md}. Usage: python -m benchmarks.blas_check [--repeats N]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import benchmark_parser, write_results

CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np, pymc as pm, pytensor, pytensor.tensor as pt
from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.models import segmentation_model

def rbm(n_vis=784, n_hid=100, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.normal(scale=0.05, size=(n_vis, n_hid))
    b, c = rng.normal(scale=0.1, size=n_vis), rng.normal(scale=0.1, size=n_hid)
    with pm.Model() as m:
        v = pm.Bernoulli("v", logit_p=b, shape=n_vis)
        pm.Potential("hidden", pt.sum(pt.softplus(pt.as_tensor(c) + pt.dot(v, pt.as_tensor(W)))))
    return m, "v"

def per_call(step, x, n):
    step.differences.evaluate(x)
    t = time.perf_counter()
    for _ in range(n):
        step.differences.evaluate(x)
    return (time.perf_counter() - t) / n

out = {"blas_ldflags": pytensor.config.blas__ldflags}
for name, (model, var) in {"ising30": (segmentation_model(3), "x"), "rbm784x100": rbm()}.items():
    with model:
        gwg = GibbsWithGradients([model[var]], steps_per_draw=1)
        lb = LocallyBalanced([model[var]], differences="exact", steps_per_draw=1)
    x = np.asarray(model.initial_point()[var]).ravel().astype(np.int64)
    out[name] = {"gradient_call_us": 1e6 * per_call(gwg, x, 2000),
                 "exact_call_ms": 1e3 * per_call(lb, x, 10)}
print(json.dumps(out))
"""


def run_child(ldflags: str, compiledir: str, threads: str | None) -> dict:
    env = dict(os.environ)
    env["PYTENSOR_FLAGS"] = f"blas__ldflags={ldflags},compiledir={compiledir}"
    env.pop("OPENBLAS_NUM_THREADS", None)
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = threads
    res = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__, quick=None, repeats=3)
    args = parser.parse_args(argv)
    configs = {
        "no BLAS (pip default)": ("", None),
        "OpenBLAS, default threads": ("-lopenblas", None),
        "OpenBLAS, 1 thread": ("-lopenblas", "1"),
    }
    results: dict[str, list[dict]] = {k: [] for k in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for label, (flags, threads) in configs.items():
                cdir = str(Path(tmp) / ("blas" if flags else "noblas"))
                results[label].append(run_child(flags, cdir, threads))
                print(rep, label, results[label][-1], flush=True)

    import numpy as np

    rows = []
    for label, runs in results.items():
        for model in ("ising30", "rbm784x100"):
            rows.append(
                {
                    "config": label,
                    "model": model,
                    "gradient_call_us": float(
                        np.median([r[model]["gradient_call_us"] for r in runs])
                    ),
                    "exact_call_ms": float(np.median([r[model]["exact_call_ms"] for r in runs])),
                }
            )
    md = ["# pytensor with and without a BLAS", ""]
    md.append(
        f"Median of {args.repeats} alternating runs, each in a fresh process and compile cache."
    )
    md.append("")
    md.append(
        "| configuration | model | gradient differences call (us) | exact differences call (ms) |"
    )
    md.append("|---|---|---|---|")
    for r in rows:
        cells = [
            r["config"],
            r["model"],
            f"{r['gradient_call_us']:.1f}",
            f"{r['exact_call_ms']:.2f}",
        ]
        md.append("| " + " | ".join(cells) + " |")
    write_results("blas", {"rows": rows, "runs": results}, "\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
