"""What SelfBalancing's learning costs, and what it gives, on the gallery models.

For each model of ``examples/gallery`` with binary or categorical latents (the hidden Markov
model, the Gaussian mixture, occupancy, spike-and-slab), in one run on one core:

1. **Per-step cost** of ``SelfBalancing()`` (defaults: LSB1, 30 particles) on the model's
   discrete variables: microseconds per tuning step (chain and particles moved, their proposals
   evaluated in one compiled batch, one Adam update) and per sampling step (the frozen chain's
   compiled kernel), the first draw of each (compilation included), next to the compiled kernel
   of ``LocallyBalanced()`` and to one site update of PyMC's default discrete step.
2. **pm.sample** with ``SelfBalancing()`` for the discrete variables (NUTS for the rest, as
   ``pm.sample`` assigns) against PyMC's default steps, as ``benchmarks/user_models.py`` does:
   ESS/s of the model's discrete summary and of its continuous parameters, and accuracy (the
   largest |z| against the model's exact or marginalised reference).

NumPyro has no learned balancing function, and the gallery models have no NumPyro versions;
the baseline here is PyMC's, and NumPyro's compiled Gibbs is compared in ``vs_numpyro.py``.

Run: ``python -m benchmarks.self_balancing_cost [--quick] [--repeats 2]``; writes
``docs/results/self_balancing_cost.{json,md,png}``.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import numpy as np

from benchmarks.common import (
    add_out,
    benchmark_parser,
    cost_bars,
    gallery_run,
    machine_info,
    markdown_table,
    write_results,
)
from examples.gallery._gallery import pymc_default_steps
from pymc_lbp import LocallyBalanced, SelfBalancing

MODELS = ("hidden_markov", "gaussian_mixture", "occupancy", "spike_and_slab")
SHOWN = ("model", "sampler", "sample_seconds", "ess_s_discrete", "max_abs_z")


def discrete_vars(model) -> list:
    return [v for v in model.free_RVs if v.type.dtype.startswith(("int", "uint", "bool"))]


def _per_step_us(step, q, n_draws: int, min_seconds: float) -> tuple[float, float, object]:
    """(seconds of the first draw, microseconds per MH step over the next draws, q): at least
    ``n_draws`` draws and ``min_seconds`` of them (single draws of small blocks are noisy)."""
    start = time.perf_counter()
    q, stats = step.astep(q)
    first = time.perf_counter() - start
    start = time.perf_counter()
    done = 0
    while done < n_draws or time.perf_counter() - start < min_seconds:
        q, stats = step.astep(q)
        done += 1
    per_draw = (time.perf_counter() - start) / done
    return first, per_draw / max(stats[0]["mh_steps"], 1) * 1e6, q


def step_costs(module, n_draws: int, min_seconds: float = 1.0) -> dict:
    """Per-step costs of SelfBalancing (tuning, frozen), LocallyBalanced and PyMC's default."""
    from pymc.blocking import DictToArrayBijection

    model = module.build_model()
    disc = discrete_vars(model)
    point = model.initial_point()
    out: dict = {"model": module.NAME}
    with model:
        start = time.perf_counter()
        sb = SelfBalancing(disc)
        out["sb_construction_s"] = time.perf_counter() - start
    q = DictToArrayBijection.map({v.name: point[v.name] for v in sb.vars})
    out["sites"] = int(sb.layout.n_sites)
    out["slots"] = int(sb.layout.n_slots)
    out["differences"] = sb.differences_kind
    out["sb_first_tune_draw_s"], out["sb_tune_us"], q = _per_step_us(sb, q, n_draws, min_seconds)
    sb.stop_tuning()
    out["sb_first_frozen_draw_s"], out["sb_frozen_us"], q = _per_step_us(
        sb, q, n_draws, min_seconds
    )
    out["tune_over_frozen"] = out["sb_tune_us"] / out["sb_frozen_us"]
    with model:
        lb = LocallyBalanced(disc, steps_per_draw=sb.steps_per_draw)
    lb.stop_tuning()
    q = DictToArrayBijection.map({v.name: point[v.name] for v in lb.vars})
    _, out["lb_us"], _ = _per_step_us(lb, q, n_draws, min_seconds)
    # PyMC's default discrete step(s): seconds per draw over the sites they update
    steps = pymc_default_steps(model)
    sites = sum(int(np.prod(point[v.name].shape)) or 1 for s in steps for v in s.vars)
    p = dict(point)
    for s in steps:
        p, _ = s.step(p)
    start = time.perf_counter()
    done = 0
    while done < n_draws or time.perf_counter() - start < min_seconds:
        for s in steps:
            p, _ = s.step(p)
        done += 1
    out["pymc_us_per_site"] = (time.perf_counter() - start) / done / sites * 1e6
    out["pymc_steps"] = ", ".join(type(s).__name__ for s in steps)
    return out


def sampling(module, sampler: str, draws: int, tune: int, seed: int, reference) -> dict:
    """pm.sample with SelfBalancing (``sampler="sb"``) or PyMC's default steps."""

    def make_step(model):
        return SelfBalancing(discrete_vars(model))

    return gallery_run(
        module,
        sampler,
        make_step if sampler == "sb" else None,
        draws=draws,
        tune=tune,
        seed=seed,
        reference=reference,
    )


def plot(costs: list[dict], path: Path) -> None:
    keys = [
        ("sb_tune_us", "SelfBalancing, tuning step"),
        ("sb_frozen_us", "SelfBalancing, frozen step"),
        ("lb_us", "LocallyBalanced step"),
        ("pymc_us_per_site", "PyMC default, one site"),
    ]
    cost_bars([c["model"] for c in costs], costs, keys, "Cost of one step (one core)", path)


def main(argv: list[str] | None = None) -> None:
    parser = benchmark_parser(__doc__, quick="few draws (smoke test)", repeats=1)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    add_out(parser, default=None)
    args = parser.parse_args(argv)
    draws, tune, n_draws = (60, 40, 2) if args.quick else (500, 300, 5)
    min_seconds = 0.1 if args.quick else 2.0
    start = time.time()
    costs, runs = [], []
    for name in args.models:
        module = importlib.import_module(f"examples.gallery.{name}")
        costs.append(step_costs(module, n_draws, min_seconds))
        print(costs[-1], flush=True)
        reference = module.reference()
        for r in range(args.repeats):
            for sampler in ("sb", "pymc"):
                runs.append(sampling(module, sampler, draws, tune, 100 + r, reference))
                print({k: runs[-1][k] for k in SHOWN}, flush=True)
    summary = []
    for name in args.models:
        mod_name = importlib.import_module(f"examples.gallery.{name}").NAME
        row = {"model": mod_name}
        for sampler in ("sb", "pymc"):
            mine = [r for r in runs if r["model"] == mod_name and r["sampler"] == sampler]
            for key in ("ess_s_discrete", "ess_s_continuous", "sample_seconds", "max_abs_z"):
                row[f"{sampler}_{key}"] = float(np.median([r[key] for r in mine]))
        row["ratio_discrete"] = row["sb_ess_s_discrete"] / row["pymc_ess_s_discrete"]
        row["ratio_continuous"] = row["sb_ess_s_continuous"] / row["pymc_ess_s_continuous"]
        summary.append(row)
    md = [
        "# SelfBalancing: cost of a step, and pm.sample against PyMC's default",
        "",
        f"{draws} draws + {tune} tuning, 2 chains one after the other, {args.repeats} repeat(s);"
        f" {time.time() - start:.0f} s in all.",
        "",
        markdown_table(
            costs,
            [
                ("model", "model"),
                ("sites", "sites"),
                ("slots", "slots"),
                ("differences", "differences"),
                ("sb_tune_us", "SB tuning step (us)"),
                ("sb_frozen_us", "SB frozen step (us)"),
                ("tune_over_frozen", "tuning / frozen"),
                ("lb_us", "LB step (us)"),
                ("pymc_us_per_site", "PyMC per site (us)"),
                ("sb_construction_s", "SB built (s)"),
                ("sb_first_tune_draw_s", "first tuning draw (s)"),
                ("sb_first_frozen_draw_s", "first frozen draw (s)"),
            ],
        ),
        "",
        markdown_table(
            summary,
            [
                ("model", "model"),
                ("sb_ess_s_discrete", "SB ESS/s discrete"),
                ("pymc_ess_s_discrete", "PyMC ESS/s discrete"),
                ("ratio_discrete", "ratio"),
                ("sb_ess_s_continuous", "SB ESS/s continuous"),
                ("pymc_ess_s_continuous", "PyMC ESS/s continuous"),
                ("ratio_continuous", "ratio"),
                ("sb_sample_seconds", "SB s"),
                ("pymc_sample_seconds", "PyMC s"),
                ("sb_max_abs_z", "SB max abs z"),
                ("pymc_max_abs_z", "PyMC max abs z"),
            ],
        ),
        "",
    ]
    payload = {"machine": machine_info(), "costs": costs, "runs": runs, "summary": summary}
    kwargs = {"results": args.out} if args.out else {}
    json_path, md_path = write_results("self_balancing_cost", payload, "\n".join(md), **kwargs)
    plot(costs, md_path.with_suffix(".png"))
    print("\n".join(md))


if __name__ == "__main__":
    main()
