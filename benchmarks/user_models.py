"""The gallery models as PyMC users write them: pymc_lbp vs PyMC's default step assignment.

For each model of ``examples/gallery`` (the same model-building functions), sample with our step
for the discrete variables next to NUTS, and with the steps ``pm.sample()`` assigns by default,
``--repeats`` times with different seeds, and record

* construction time of the discrete step(s),
* wall time of ``pm.sample`` (tuning and draws, chains one after another on one core),
* min bulk ESS/s over the named continuous parameters (every element), and the bulk ESS/s of
  the model's discrete summary (switch point, mean assignment, occupied sites, total abundance,
  model size, time in state 1),
* accuracy: the largest |z| over the key quantities, z = (estimate - reference) / MCSE, against
  the exact (or marginalised) reference of each model,

then medians over repeats into ``docs/results/user_models.{json,md,png}``.

Run: ``python -m benchmarks.user_models [--quick] [--repeats 3] [--models coal_mining ...]``.
"""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from benchmarks.common import (
    RESULTS,
    benchmark_parser,
    machine_info,
    markdown_table,
    pyplot,
    save_figure,
    write_results,
)
from examples.gallery import MODELS
from examples.gallery._gallery import evaluate, sample

SAMPLERS = ("ours", "pymc")


def summarize(results: list[dict]) -> list[dict]:
    """Median over repeats per (model, sampler), ratios ours / PyMC."""
    rows = []
    for name in dict.fromkeys(r["model"] for r in results):
        med = {}
        for sampler in SAMPLERS:
            rs = [r for r in results if r["model"] == name and r["sampler"] == sampler]
            if not rs:
                continue
            med[sampler] = {
                "model": name,
                "sampler": rs[0]["step"],
                "repeats": len(rs),
                "construction_s": float(np.median([r["construction_seconds"] for r in rs])),
                "sample_s": float(np.median([r["sample_seconds"] for r in rs])),
                "ess_s_continuous": float(
                    np.median([r["min_ess_continuous"] / r["sample_seconds"] for r in rs])
                ),
                "ess_s_discrete": float(
                    np.median([r["ess_discrete"] / r["sample_seconds"] for r in rs])
                ),
                "max_abs_z": float(np.median([r["max_abs_z"] for r in rs])),
                "worst_abs_z": float(np.max([r["max_abs_z"] for r in rs])),
                "max_rhat": float(np.max([r["max_rhat"] for r in rs])),
            }
        if "ours" in med and "pymc" in med:
            for key in ("ess_s_continuous", "ess_s_discrete"):
                med["ours"][key + "_ratio"] = med["ours"][key] / max(med["pymc"][key], 1e-12)
        rows.extend(med.values())
    return rows


def step_label(module, sampler: str) -> str:
    if sampler == "pymc":
        from examples.gallery._gallery import pymc_default_steps

        return "PyMC " + "+".join(
            type(s).__name__ for s in pymc_default_steps(module.build_model())
        )
    model = module.build_model()
    with model:
        return type(module.make_step(model)).__name__


def plot(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    names = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    x = np.arange(len(names))
    for k, (key, title) in enumerate(
        (
            ("ess_s_continuous", "min bulk ESS/s, continuous"),
            ("ess_s_discrete", "bulk ESS/s, discrete summary"),
            ("max_abs_z", "max |z| vs reference (median)"),
        )
    ):
        ax = axes[k]
        for j, (sampler, label) in enumerate((("ours", "pymc_lbp"), ("pymc", "PyMC default"))):
            vals = [
                next((r[key] for r in rows if r["model"] == n and r["_s"] == sampler), np.nan)
                for n in names
            ]
            ax.bar(x + (j - 0.5) * 0.38, vals, width=0.38, label=label)
        if key != "max_abs_z":
            ax.set_yscale("log")
        else:
            ax.axhline(3, color="k", ls="--", lw=1)
        ax.set_xticks(x, names, rotation=30, ha="right")
        ax.set_title(title)
    axes[0].legend()
    save_figure(fig, path)


def finish(results, references, args, start) -> None:
    """Summarise and write JSON + markdown + plot (after every model: a crash keeps the rest)."""
    rows = summarize(results)
    for r in rows:
        r["_s"] = "ours" if not r["sampler"].startswith("PyMC") else "pymc"
    table = markdown_table(
        rows,
        [
            ("model", "model"),
            ("sampler", "discrete step"),
            ("construction_s", "build s"),
            ("sample_s", "sample s"),
            ("ess_s_continuous", "min ESS/s cont."),
            ("ess_s_continuous_ratio", "ratio"),
            ("ess_s_discrete", "ESS/s discrete"),
            ("ess_s_discrete_ratio", "ratio"),
            ("max_abs_z", "max abs z (median)"),
            ("worst_abs_z", "max abs z (worst)"),
            ("max_rhat", "max R-hat"),
        ],
    )
    settings = {
        "draws": args.draws,
        "tune": args.tune,
        "chains": args.chains,
        "repeats": args.repeats,
        "cores": 1,
        "total_seconds": time.perf_counter() - start,
    }
    md = (
        "# Gallery models: pymc_lbp vs PyMC's default steps\n\n"
        f"{args.chains} chains x ({args.tune} tune + {args.draws} draws), one core, "
        f"medians over {args.repeats} repeat(s); ratios are ours / PyMC. z = (estimate - "
        "reference) / MCSE over each model's key quantities "
        "(examples/gallery, docs/gallery.md).\n\n"
        f"{table}\n\nMachine: {json.dumps(machine_info())}\n"
    )
    for r in rows:
        r.pop("_s")
    payload = {
        "settings": settings,
        "machine": machine_info(),
        "references": references,
        "summary": rows,
        "runs": results,
    }
    write_results(args.name, payload, md)
    for r in rows:
        r["_s"] = "ours" if not r["sampler"].startswith("PyMC") else "pymc"
    plot(rows, RESULTS / f"{args.name}.png")
    print(md)


def main(argv: list[str] | None = None) -> None:
    parser = benchmark_parser(
        __doc__, quick="1 repeat, 300 + 300 draws", repeats=3, draws=500, tune=500, chains=2
    )
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--name", default="user_models")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.draws, args.tune = 1, 300, 300
    results, references = [], {}
    start = time.perf_counter()
    for name in args.models:
        module = importlib.import_module(f"examples.gallery.{name}")
        t0 = time.perf_counter()
        ref = module.reference()
        references[name] = {**asdict(ref), "seconds": time.perf_counter() - t0}
        labels = {s: step_label(module, s) for s in SAMPLERS}
        for repeat in range(args.repeats):
            for sampler in SAMPLERS:
                idata, construction, seconds = sample(
                    module,
                    sampler,
                    draws=args.draws,
                    tune=args.tune,
                    chains=args.chains,
                    seed=1000 * repeat + 17,
                )
                res = evaluate(module, sampler, idata, construction, seconds, ref)
                results.append({**asdict(res), "step": labels[sampler], "repeat": repeat})
                print(
                    f"{name:18s} {labels[sampler]:42s} rep {repeat}: build "
                    f"{construction:5.1f} s, sample {seconds:6.1f} s, ESS/s cont "
                    f"{res.ess_per_second_continuous:7.2f} disc {res.ess_per_second_discrete:7.2f}"
                    f", max|z| {res.max_abs_z:5.2f}",
                    flush=True,
                )
        finish(results, references, args, start)
    finish(results, references, args, start)


if __name__ == "__main__":
    main()
