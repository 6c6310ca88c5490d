"""The shared library of the benchmarks: run a step through pm.sample, measure, write results.

Every benchmark script imports its plumbing from here (``from benchmarks.common import ...``):
paths (``ROOT``, ``RESULTS``), the argument parser with the conventional ``--quick``,
``--repeats`` and ``--out`` options, timing (``run_step``, ``timed_sample``, ``min_time``,
``chain_seconds``, ``phase_seconds``, ``draw_stamper``), ESS (``ess``, ``hamming_ess``), the
markdown table and the writers of JSON, markdown and plots (``write_results``, ``pyplot``,
``save_figure``, ``cost_bars``).

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

import argparse
import json
import platform
import sys
import time
import types
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pymc as pm

from pymc_lbp.diagnostics import ess, hamming_trace, reference_state

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (benchmarks run from it: ``python -m benchmarks.NAME``)."""
RESULTS = ROOT / "docs" / "results"
"""Where the benchmarks write their results by default."""
FIXED_BALANCING = ("sqrt", "barker", "min", "max")
"""The fixed balancing functions of ``LocallyBalanced``, in the LSB paper's order."""


def description(doc: str | None) -> str:
    """A script's one-line description: the first paragraph of its docstring, on one line."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def benchmark_parser(
    doc: str | None,
    *,
    quick: str | None = "smoke run",
    repeats: int | None = None,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
) -> argparse.ArgumentParser:
    """The argument parser of a benchmark, described by its module docstring ``doc``.

    With the conventional options: ``--quick`` (a smoke run; ``quick`` is its help, ``None``
    leaves it out) and, each when its default is given, ``--repeats N``, and ``pm.sample``'s
    ``--draws N``, ``--tune N`` and ``--chains N``, in this order.
    """
    main = getattr(sys.modules.get("__main__"), "__spec__", None)  # run with python -m?
    prog = f"python -m {main.name}" if main and main.name.startswith("benchmarks.") else None
    parser = argparse.ArgumentParser(prog=prog, description=description(doc))
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    if repeats is not None:
        parser.add_argument(
            "--repeats",
            type=int,
            default=repeats,
            help=f"how many times every run is repeated (default {repeats})",
        )
    for name, default, what in (
        ("draws", draws, "recorded draws per chain"),
        ("tune", tune, "tuning draws per chain"),
        ("chains", chains, "chains, run one after the other"),
    ):
        if default is not None:
            parser.add_argument(
                f"--{name}", type=int, default=default, help=f"{what} (default {default})"
            )
    return parser


def add_out(parser: argparse.ArgumentParser, default: Path | None = RESULTS) -> None:
    """The conventional ``--out DIR`` option: the results folder (``docs/results`` by default)."""
    parser.add_argument("--out", type=Path, default=default, help="results folder")


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
        jump = float(stats["sites_changed"].mean())
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


def timed_sample(model, step, draws: int, seed: int, *, tune: int = 0, **kwargs):
    """One chain of ``tune + draws`` draws through ``pm.sample``; returns ``(idata, stamps)``,
    ``stamps[i]`` the seconds from the first step to the end of draw ``i`` (tuning draws first).

    ``step`` is a step or a list of steps (the clock is the first one's). The clock starts when
    PyMC makes the first step (after its own initial-point checks and compilation), and each
    draw is stamped by ``pm.sample``'s callback. ``kwargs`` go to ``pm.sample``.
    """
    steps = list(step) if isinstance(step, list | tuple) else [step]
    stamps = np.zeros(tune + draws)
    start = [None]
    first = steps[0]
    inner = first.step

    def timed_step(point):
        if start[0] is None:  # sampling starts now (pm.sample's own set-up is done)
            start[0] = time.perf_counter()
        return inner(point)

    def callback(trace, draw):
        stamps[draw.draw_idx] = time.perf_counter() - start[0]

    first.step = timed_step
    with model:
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=1,
            cores=1,
            step=steps,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            callback=callback,
            **kwargs,
        )
    return idata, stamps


def at_times(stamps: np.ndarray, values: np.ndarray, checkpoints) -> list:
    """``values`` at the last draw stamped at or before each checkpoint (None before the first)."""
    out = []
    for t in checkpoints:
        k = int(np.searchsorted(stamps, t, side="right")) - 1
        out.append(float(values[k]) if k >= 0 else None)
    return out


def draw_stamper(step, tune: int):
    """A ``pm.sample`` callback that stamps every draw (``perf_counter``) per chain and, for a
    ``SelfBalancing`` step, keeps its learned parameters at the first draw after tuning.

    Returns ``(callback, stamps, learned)``: ``stamps[chain]`` the list of stamps,
    ``learned[chain]`` the parameters as a list.
    """
    stamps: dict[int, list[float]] = {}
    learned: dict[int, list[float]] = {}

    def callback(trace, draw):
        stamps.setdefault(draw.chain, []).append(time.perf_counter())
        if hasattr(step, "lsb_params") and draw.draw_idx == tune:
            learned[draw.chain] = step.lsb_params.tolist()

    return callback, stamps, learned


def chain_seconds(stamps: dict[int, list[float]], tune: int) -> tuple[list[float], list[float]]:
    """``(tuning, sampling)`` seconds of every chain from per-draw ``perf_counter`` stamps.

    The sampling phase of a chain runs from its last tuning draw (its first draw when
    ``tune == 0``) to its last draw; the tuning phase from its first draw to its last tuning
    draw (0 without tuning).
    """
    tuning, sampling = [], []
    for c in sorted(stamps):
        st = np.array(stamps[c])
        sampling.append(float(st[-1] - st[tune - 1]) if tune else float(st[-1] - st[0]))
        tuning.append(float(st[tune - 1] - st[0]) if tune else 0.0)
    return tuning, sampling


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
            "sites_changed": None
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


def format_cell(v, digits: int = 2) -> str:
    """A table cell: floats with ``digits`` decimals, None as "-", anything else as ``str``."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def fmt(x: float | None, digits: int = 3) -> str:
    """Compact number formatting: ``digits`` significant digits, exponent notation when large
    or small, "-" for None and non-finite numbers."""
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 1000 or abs(x) < 10 ** -(digits - 1):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def compact_cell(v) -> str:
    """A table cell: numbers (not bools) through :func:`fmt`, anything else as ``str``."""
    return fmt(v) if isinstance(v, float | int) and not isinstance(v, bool) else str(v)


def markdown_table(rows: list[dict], columns: list[tuple[str, str]], cell=format_cell) -> str:
    """A markdown table of ``rows`` with ``columns`` = [(key, header), ...]; ``cell`` formats
    each value (:func:`format_cell`, or :func:`compact_cell` for significant digits)."""
    head = "| " + " | ".join(h for _, h in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(cell(r.get(k)) for k, _ in columns) + " |" for r in rows]
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
    name: str, payload: dict, markdown: str, results: Path = RESULTS, *, indent: int = 2
) -> tuple[Path, Path]:
    """Write ``<results>/<name>.json`` (indented by ``indent``) and ``.md`` (``docs/results``
    by default), making the folder."""
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

    json_path.write_text(json.dumps(payload, indent=indent, default=default))
    md_path.write_text(markdown)
    return json_path, md_path


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (plots go to files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path, dpi: int = 110) -> None:
    """Lay ``fig`` out tightly, save it to ``path`` and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


def cost_bars(
    names: list[str], rows: list[dict], keys: list[tuple[str, str]], title: str, path: Path
) -> None:
    """Grouped bars, log scale, of the microsecond columns ``keys`` = [(key, label), ...], one
    group per row (named by ``names``), saved to ``path``."""
    plt = pyplot()
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
    save_figure(fig, path, dpi=120)


def gallery_run(
    module, label: str, make_step=None, *, draws: int, tune: int, seed: int, reference
) -> dict:
    """``pm.sample`` of a gallery model (``examples/gallery``, 2 chains) and its evaluation as
    a row: our step ``make_step(model)`` for the discrete variables, or PyMC's default steps
    when ``make_step`` is None; ``label`` names the sampler in the row. NUTS takes the rest."""
    from examples.gallery._gallery import evaluate, sample

    if make_step is None:
        idata, construction, seconds = sample(
            module, "pymc", draws=draws, tune=tune, chains=2, seed=seed
        )
    else:
        mod = types.SimpleNamespace(**{k: getattr(module, k) for k in dir(module)})
        mod.make_step = make_step
        idata, construction, seconds = sample(
            mod, "ours", draws=draws, tune=tune, chains=2, seed=seed
        )
    res = evaluate(module, label, idata, construction, seconds, reference)
    row = asdict(res)
    row["ess_s_discrete"] = res.ess_per_second_discrete
    row["ess_s_continuous"] = res.ess_per_second_continuous
    return row


def self_balancing_step(x, parametrization: str, *, thin: int, particles: int, lr: float):
    """``SelfBalancing`` as the LSB paper runs it: first-order differences, ``particles``
    particles, Adam at ``lr``, one learning update per step of the chain."""
    from pymc_lbp import SelfBalancing

    return SelfBalancing(
        [x],
        family=parametrization,
        differences="gradient",
        n_particles=particles,
        learning_rate=lr,
        steps_per_draw=thin,
        learning_steps=thin,  # the paper: one update per step of the chain
    )


def lsb_step(name: str, x, *, learned, thin: int, particles: int, lr: float):
    """The LSB paper's samplers by name: a fixed balancing function (:data:`FIXED_BALANCING`,
    ``LocallyBalanced`` with first-order differences), a learned one (a name in ``learned``,
    :func:`self_balancing_step`), else PyMC's ``BinaryGibbsMetropolis``."""
    from pymc_lbp import LocallyBalanced

    if name in FIXED_BALANCING:
        return LocallyBalanced([x], balancing=name, differences="gradient", steps_per_draw=thin)
    if name in learned:
        return self_balancing_step(x, name, thin=thin, particles=particles, lr=lr)
    return pm.BinaryGibbsMetropolis([x])


def lsb1_weights(learned: dict[int, list[float]]) -> dict[str, float]:
    """LSB1's mixture weights of the base balancing functions, mean over chains (3 decimals)."""
    from pymc_lbp.samplers.self_balancing.parametrizations import BASE_FUNCTIONS, MixtureBalancing

    w = np.mean([MixtureBalancing().weights(np.array(p)) for p in learned.values()], 0)
    return dict(zip(BASE_FUNCTIONS, w.round(3).tolist(), strict=True))
