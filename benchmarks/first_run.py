"""A new user's first run: our step vs PyMC's default steps, cold and warm compile caches.

For each model of ``examples/gallery`` and each sampler ("ours": the gallery's pymc_lbp step next
to NUTS; "pymc": the steps ``pm.sample()`` assigns by default; "lbp_sample": ``pymc_lbp.sample``
with its default steps, the whole model in one compiled JAX program), a fresh Python process
builds the model, builds the discrete step(s) (timed: *construction*; for ``pymc_lbp.sample``
its ``build_time``, everything before the first draw: steps, starts, the program traced and
compiled) and runs a short ``pm.sample`` (``--tune`` + ``--draws`` draws, one chain, timed:
*sample*, which includes compiling PyMC's own NUTS functions), as a user's first cell would.
*Cold*: an empty pytensor compile directory, an empty numba cache and an empty JAX cache, as on
a new machine (every C module and XLA program compiled); *warm*: the same directories again, now
filled by the cold run (a second session on the same machine). Imports are timed apart and left
out (jax and BlackJAX imported with them for ``pymc_lbp.sample``).

Writes ``first_run.{json,md,png}``. Run: ``python -m benchmarks.first_run [--quick]
[--models coal_mining ...]``. ``--quick`` runs one model, warm only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import (
    ROOT,
    add_out,
    benchmark_parser,
    machine_info,
    markdown_table,
    pyplot,
    save_figure,
    write_results,
)
from examples.gallery import MODELS

SAMPLERS = ("ours", "pymc", "lbp_sample")

_CHILD = """
import gc, json, sys, time
t0 = time.perf_counter()
import importlib
import pymc as pm
from examples.gallery._gallery import pymc_default_steps
if sys.argv[2] == "lbp_sample":
    import blackjax, jax, pymc_lbp
imports = time.perf_counter() - t0
module = importlib.import_module("examples.gallery." + sys.argv[1])
model = module.build_model()
draws, tune = int(sys.argv[3]), int(sys.argv[4])
if sys.argv[2] == "lbp_sample":
    gc.collect()
    start = time.perf_counter()
    with model:
        idata = pymc_lbp.sample(draws=draws, tune=tune, chains=1, random_seed=1,
                                progressbar=False, compute_convergence_checks=False)
    construction = idata.posterior.attrs["build_time"]
    sample = time.perf_counter() - start - construction
else:
    start = time.perf_counter()
    if sys.argv[2] == "ours":
        with model:
            steps = [module.make_step(model)]
    else:
        steps = pymc_default_steps(model)
    gc.collect()
    construction = time.perf_counter() - start
    start = time.perf_counter()
    with model:
        pm.sample(draws=draws, tune=tune, chains=1, cores=1, step=steps, random_seed=1,
                  progressbar=False, compute_convergence_checks=False)
    sample = time.perf_counter() - start
print("RESULT", json.dumps({"imports_s": imports, "construction_s": construction,
                            "sample_s": sample}))
"""


def run_child(model: str, sampler: str, cache: Path, draws: int, tune: int) -> dict:
    """One first run in a fresh process with ``cache`` as its pytensor, numba and JAX caches."""
    env = dict(os.environ)
    flags = [f for f in env.get("PYTENSOR_FLAGS", "").split(",") if f and "compiledir" not in f]
    env["PYTENSOR_FLAGS"] = ",".join([*flags, f"compiledir={cache / 'pytensor'}"])
    env["NUMBA_CACHE_DIR"] = str(cache / "numba")
    env["PYMC_LBP_JAX_CACHE"] = str(cache / "jax")
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, model, sampler, str(draws), str(tune)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"{model}/{sampler} failed:\n{res.stderr[-3000:]}")
    out = json.loads(lines[-1][len("RESULT ") :])
    out["first_run_s"] = out["construction_s"] + out["sample_s"]
    return out


def measure(models, draws: int, tune: int, cold: bool) -> list[dict]:
    rows = []
    for model in models:
        for sampler in SAMPLERS:
            with tempfile.TemporaryDirectory(prefix="first_run_") as tmp:
                cache = Path(tmp)
                phases = ["cold", "warm"] if cold else ["warm"]
                if not cold:  # fill the caches first, untimed
                    run_child(model, sampler, cache, draws, tune)
                for phase in phases:
                    r = run_child(model, sampler, cache, draws, tune)
                    rows.append({"model": model, "sampler": sampler, "cache": phase, **r})
                    print(
                        f"{model:18s} {sampler:10s} {phase}: build {r['construction_s']:6.2f} s, "
                        f"first pm.sample {r['sample_s']:6.2f} s",
                        flush=True,
                    )
    return rows


def table(rows: list[dict]) -> list[dict]:
    """One row per (model, cache): the three side by side, ratios of first-run seconds."""
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        for phase in ("cold", "warm"):
            pair = {r["sampler"]: r for r in rows if r["model"] == model and r["cache"] == phase}
            if set(pair) != set(SAMPLERS):
                continue
            ours, pymc, lbp = pair["ours"], pair["pymc"], pair["lbp_sample"]
            out.append(
                {
                    "model": model,
                    "cache": phase,
                    "ours_build": ours["construction_s"],
                    "ours_total": ours["first_run_s"],
                    "pymc_build": pymc["construction_s"],
                    "pymc_total": pymc["first_run_s"],
                    "ratio": ours["first_run_s"] / pymc["first_run_s"],
                    "lbp_build": lbp["construction_s"],
                    "lbp_total": lbp["first_run_s"],
                    "lbp_ratio": lbp["first_run_s"] / pymc["first_run_s"],
                }
            )
    return out


COLUMNS = [
    ("model", "model"),
    ("cache", "caches"),
    ("ours_build", "ours: build s"),
    ("ours_total", "ours: build + first pm.sample s"),
    ("pymc_build", "PyMC default: build s"),
    ("pymc_total", "PyMC default: build + first pm.sample s"),
    ("ratio", "ours / PyMC"),
    ("lbp_build", "pymc_lbp.sample: build s"),
    ("lbp_total", "pymc_lbp.sample: build + sample s"),
    ("lbp_ratio", "pymc_lbp.sample / PyMC"),
]


def plot(summary: list[dict], path: Path) -> None:
    plt = pyplot()
    phases = [p for p in ("cold", "warm") if any(r["cache"] == p for r in summary)]
    fig, axes = plt.subplots(1, len(phases), figsize=(5.5 * len(phases), 3.6), squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=True):
        rs = [r for r in summary if r["cache"] == phase]
        y = range(len(rs))
        ax.barh([i + 0.27 for i in y], [r["ours_total"] for r in rs], 0.27, label="pymc_lbp step")
        ax.barh(list(y), [r["lbp_total"] for r in rs], 0.27, label="pymc_lbp.sample")
        ax.barh([i - 0.27 for i in y], [r["pymc_total"] for r in rs], 0.27, label="PyMC default")
        ax.set_yticks(list(y), [r["model"] for r in rs])
        ax.set_xlabel("seconds: build + first sample")
        ax.set_title(f"{phase} compile caches")
        ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> dict:
    parser = benchmark_parser(__doc__, quick="one model, warm caches only", draws=100, tune=100)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    add_out(parser)
    args = parser.parse_args(argv)
    models = args.models[:1] if args.quick else args.models
    rows = measure(models, args.draws, args.tune, cold=not args.quick)
    summary = table(rows)
    name = "first_run_quick" if args.quick else "first_run"
    payload = {"machine": machine_info(), "draws": args.draws, "tune": args.tune, "runs": rows,
               "rows": summary}  # fmt: skip
    md = markdown_table(summary, COLUMNS)
    write_results(name, payload, md, args.out)
    plot(summary, Path(args.out) / f"{name}.png")
    print(md)
    return payload


if __name__ == "__main__":
    main()
