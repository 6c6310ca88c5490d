"""Shared benchmark plumbing: run a step through pm.sample, measure, write JSON and markdown.

Conventions (docs/benchmarks.md):

* ESS is ArviZ's bulk ESS of the Hamming distance to a fixed random reference state, over the
  draws after tuning (DESIGN section 5).
* Seconds are the wall time of the whole ``pm.sample`` call (tuning and draws, all chains, one
  core), measured around it, so no work is left out.
* Work is counted in logp evaluations; a gradient evaluation of the relaxed logp counts as one
  more. PyMC's BinaryGibbsMetropolis makes 1 + (number of proposals) evaluations per sweep; its
  proposals are Bernoulli(transit_p) per site, so we use the expectation 1 + 0.8 D.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pymc as pm

from pymc_lbp.diagnostics import ess, hamming_trace, reference_state

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


@dataclass
class Run:
    """One sampler run and what it measured."""

    target: str
    sampler: str
    repeat: int
    seconds: float
    draws: int
    tune: int
    chains: int
    ess: float
    evals: float  # logp (+ gradient) evaluations over the whole run
    accept: float | None = None
    jump_distance: float | None = None

    @property
    def ess_per_second(self) -> float:
        return self.ess / self.seconds

    @property
    def ess_per_kilo_eval(self) -> float:
        return 1000.0 * self.ess / self.evals if self.evals else float("nan")


def run_step(
    model,
    names: list[str],
    make_step,
    *,
    target: str,
    sampler: str,
    repeat: int,
    draws: int,
    tune: int,
    chains: int,
    seed: int,
    gibbs_evals_per_draw: float | None = None,
) -> Run:
    """Sample ``model`` with ``make_step(value_vars)`` and measure ESS, time and work."""
    with model:
        step = make_step([model[n] for n in names])
        start = time.perf_counter()
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=1,
            step=[step],
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        seconds = time.perf_counter() - start
    e = ess(hamming_trace(idata, names, seed=12345))
    stats = getattr(idata, "sample_stats", None)
    if stats is not None and "logp_evals" in stats:
        evals_draws = float(stats["logp_evals"].sum() + stats["grad_evals"].sum())
        evals = evals_draws * (draws + tune) / draws  # tuning draws cost the same
        accept = float(stats["accept"].mean())
        jump = float(stats["jump_distance"].mean())
    else:
        evals = float(gibbs_evals_per_draw or 0.0) * (draws + tune) * chains
        accept = jump = None
    return Run(target, sampler, repeat, seconds, draws, tune, chains, e, evals, accept, jump)


def min_time(fn, n: int, rounds: int) -> float:
    """Seconds per unit of work: the fastest of ``rounds`` calls of ``fn``, each doing ``n``
    units (the minimum is the least disturbed by other load)."""
    best = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def timed_sample(model, step, draws: int, seed: int):
    """One chain of ``draws`` draws (no tuning) through ``pm.sample``; returns ``(idata,
    stamps)``, ``stamps[i]`` the seconds from the first step to the end of draw ``i``.

    The clock starts when PyMC makes the first step (after its own initial-point checks and
    compilation), and each draw is stamped by ``pm.sample``'s callback.
    """
    stamps = np.zeros(draws)
    start = [None]
    inner = step.step

    def timed_step(point):
        if start[0] is None:  # sampling starts now (pm.sample's own set-up is done)
            start[0] = time.perf_counter()
        return inner(point)

    def callback(trace, draw):
        stamps[draw.draw_idx] = time.perf_counter() - start[0]

    step.step = timed_step
    with model:
        idata = pm.sample(
            draws=draws,
            tune=0,
            chains=1,
            cores=1,
            step=[step],
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            callback=callback,
        )
    return idata, stamps


def summarize(runs: list[Run], baseline: str) -> list[dict]:
    """Median over repeats per (target, sampler), with ratios to ``baseline`` on the same target."""
    rows = []
    keys = sorted({(r.target, r.sampler) for r in runs}, key=lambda k: (k[0], k[1]))
    med = {}
    for key in keys:
        rs = [r for r in runs if (r.target, r.sampler) == key]
        med[key] = {
            "ess": float(np.median([r.ess for r in rs])),
            "seconds": float(np.median([r.seconds for r in rs])),
            "ess_per_second": float(np.median([r.ess_per_second for r in rs])),
            "ess_per_kilo_eval": float(np.median([r.ess_per_kilo_eval for r in rs])),
            "accept": None if rs[0].accept is None else float(np.median([r.accept for r in rs])),
            "jump_distance": None
            if rs[0].jump_distance is None
            else float(np.median([r.jump_distance for r in rs])),
            "repeats": len(rs),
        }
    for (target, sampler), m in med.items():
        base = med.get((target, baseline))
        row = {"target": target, "sampler": sampler, **m}
        if base:
            row["ess_per_second_ratio"] = m["ess_per_second"] / max(base["ess_per_second"], 1e-12)
            row["ess_per_eval_ratio"] = m["ess_per_kilo_eval"] / max(
                base["ess_per_kilo_eval"], 1e-12
            )
        rows.append(row)
    return rows


def _fmt(v, digits=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def markdown_table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A markdown table of ``rows`` with ``columns`` = [(key, header), ...]."""
    head = "| " + " | ".join(h for _, h in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(k)) for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def machine_info() -> dict:
    """Where a benchmark ran."""
    import os

    import pytensor

    return {
        "python": platform.python_version(),
        "pymc": pm.__version__,
        "pytensor": pytensor.__version__,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "blas_ldflags": pytensor.config.blas__ldflags,
        "date": time.strftime("%Y-%m-%d"),
    }


def hamming_ess(draws: np.ndarray, seed: int = 12345) -> float:
    """Bulk ESS of the Hamming distance to a fixed random reference state.

    ``draws`` is a ``(chain, draw, n_sites)`` array of binary states from any sampler (PyMC or
    not); the reference is :func:`pymc_lbp.diagnostics.reference_state` with ``seed``, the one
    :func:`run_step` uses for binary blocks.
    """
    draws = np.asarray(draws)
    reference = reference_state(draws.shape[-1], 2, seed)
    return ess((draws != reference).sum(axis=-1).astype(float))


def phase_seconds(stamps: dict[int, list[tuple[float, float]]], tune: int) -> tuple[float, float]:
    """Wall and CPU seconds of the recorded draws, summed over chains.

    ``stamps[chain]`` holds ``(perf_counter, process_time)`` taken by a ``pm.sample`` callback
    after every draw, tuning included; the sampling phase of a chain runs from its last tuning
    draw (or its first draw when ``tune == 0``) to its last draw.
    """
    wall = cpu = 0.0
    for st in stamps.values():
        first = st[tune - 1] if tune else st[0]
        wall += st[-1][0] - first[0]
        cpu += st[-1][1] - first[1]
    return wall, cpu


def load_info() -> str:
    """The 1/5/15-minute load averages, as a string (the machine is shared)."""
    import os

    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def write_results(
    name: str, payload: dict, markdown: str, results: Path = RESULTS
) -> tuple[Path, Path]:
    """Write ``<results>/<name>.json`` and ``.md`` (``docs/results`` by default)."""
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    json_path = results / f"{name}.json"
    md_path = results / f"{name}.md"

    def default(o):
        if isinstance(o, Run):
            return asdict(o)
        if isinstance(o, np.generic):
            return o.item()
        raise TypeError(type(o))

    json_path.write_text(json.dumps(payload, indent=2, default=default))
    md_path.write_text(markdown)
    return json_path, md_path


def cost_bars(
    names: list[str], rows: list[dict], keys: list[tuple[str, str]], title: str, path: Path
) -> None:
    """Grouped bars, log scale, of the microsecond columns ``keys`` = [(key, label), ...], one
    group per row (named by ``names``), saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.5, 4))
    width = 0.8 / len(keys)
    offset = (len(keys) - 1) / 2
    for i, (k, label) in enumerate(keys):
        x = np.arange(len(names)) + (i - offset) * width
        ax.bar(x, [r[k] for r in rows], width, label=label)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_yscale("log")
    ax.set_ylabel("microseconds")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
