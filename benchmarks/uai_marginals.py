"""Marginal error vs wall time on UAI networks: our samplers and PyMC's Gibbs, same run.

For every network and sampler (names from :data:`pymc_lbp.cli.SAMPLERS`, default
``gibbs_with_gradients``, ``locally_balanced`` (exact differences) and ``pymc_gibbs``, PyMC's own
BinaryGibbsMetropolis/CategoricalGibbsMetropolis, i.e. what ``pm.sample()`` assigns), one
``pm.sample`` call runs ``--chains`` chains one after the other (``cores=1``) from the model's
feasible start state (``read_uai``: the ``.MAP`` file, forward sampling or repair; the same
start for every sampler), with no tuning and no burn-in discarded, until each chain has used
``budget / chains`` seconds. A ``pm.sample`` callback records every draw and a
``perf_counter`` timestamp; the time of a draw is the interval since the previous one (the first
draw of a chain is charged the chain's median interval). At ~40 log-spaced checkpoints ``t`` the
draws of every chain made within ``t / chains`` chain seconds are pooled, and the mean absolute
marginal error over the free variables and their categories is taken against the reference
(the shipped ``.MAR``, or exact elimination for generated grids); the x axis is the total
seconds of all chains (``t``). Compilation is timed separately and not included.

Our samplers' ``steps_per_draw`` is set from a pilot so that a chain records about
``--draws-per-chain`` draws (thinning only: every MH step is run); PyMC's Gibbs records one sweep
per draw. Models are built with ``kind="MARKOV"`` (factor potentials; the fastest layout).

Networks: Grids_12, DBN_11, CSP_12, Pedigree_11 (+evidence), BN_0 (+evidence), the UAI'08
grid BNs 50-12-5 and 75-16-5 (+evidence), and generated 12x12 grid BNs with 50/75/90 %
deterministic nodes (:func:`pymc_lbp.models.uai.grid_bn`, evidence sink = 1).

Writes docs/results/uai_marginals.{json,md,png} (``--quick``: uai_marginals_quick.*).

Usage: python -m benchmarks.uai_marginals [--quick] [--budget S] [--samplers NAME ...]
       [--networks NAME ...] [--chains N] [--seed S] [--data DIR] [--tag SUFFIX] [--replot]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pymc as pm

from benchmarks.common import (
    RESULTS,
    ROOT,
    benchmark_parser,
    machine_info,
    pyplot,
    write_results,
)
from pymc_lbp.cli import SAMPLERS, make_steps
from pymc_lbp.models.uai import (
    UAINetwork,
    exact_marginals,
    read_evidence,
    read_mar,
    read_network,
    read_uai,
    uai_variable_map,
)
from pymc_lbp.models.uai.generate import grid_bn

DATA = ROOT / "data" / "uai"

#: name -> network file (relative to the data folder); ``<file>.evid`` is used when present.
SHIPPED = {
    "Grids_12": "uai2014_mar/Grids_12.uai",
    "DBN_11": "uai2014_mar/DBN_11.uai",
    "CSP_12": "uai2014_mar/CSP_12.uai",
    "Pedigree_11": "uai2014_mar/Pedigree_11.uai",
    "BN_0": "uai2006_bn/BN_0.uai",
    "50-12-5": "uai2008_grid_bn/50-12-5.uai",
    "75-16-5": "uai2008_grid_bn/75-16-5.uai",
}
#: name -> grid_bn(n, deterministic_fraction, seed)
GENERATED = {
    "grid-50-12": (12, 0.50, 1),
    "grid-75-12": (12, 0.75, 1),
    "grid-90-12": (12, 0.90, 1),
}
DEFAULT_SAMPLERS = ["gibbs_with_gradients", "locally_balanced", "pymc_gibbs"]
MAX_DRAWS = 20000  # per chain (the trace is preallocated)


@dataclass
class Target:
    """A network, its evidence and reference marginals."""

    name: str
    network: UAINetwork
    evidence: dict[int, int]
    reference: list[np.ndarray]
    reference_source: str


@dataclass
class Run:
    """One sampler on one network: the error curve and what it cost."""

    network: str
    sampler: str
    n_free: int
    steps_per_draw: int | None
    compile_seconds: float
    seconds_per_draw: float
    seconds_per_update: float  # one MH step (ours) or one site of a Gibbs sweep, in the run
    cpu_fraction: float  # process CPU time / wall time while sampling (< 1: a shared machine)
    draws_per_chain: list[int]
    seconds: list[float] = field(default_factory=list)  # checkpoints: total chain seconds
    error: list[float] = field(default_factory=list)  # mean abs marginal error there
    max_error: list[float] = field(default_factory=list)
    accept: float | None = None

    @property
    def final_error(self) -> float:
        return self.error[-1] if self.error else float("nan")


def load_targets(names: list[str], data: Path) -> list[Target]:
    """The shipped and generated networks named in ``names``, with their references."""
    targets = []
    for name in names:
        if name in SHIPPED:
            path = data / SHIPPED[name]
            network = read_network(path)
            evid = Path(f"{path}.evid")
            evidence = read_evidence(evid if evid.is_file() else None, network)
            reference, source = read_mar(Path(f"{path}.MAR")), "shipped .MAR"
        elif name in GENERATED:
            n, frac, seed = GENERATED[name]
            network, evidence = grid_bn(n, frac, seed)
            reference, source = exact_marginals(network, evidence), "exact elimination"
        else:
            raise SystemExit(f"unknown network {name!r}; choose from {[*SHIPPED, *GENERATED]}")
        targets.append(Target(name, network, evidence, reference, source))
    return targets


def _time_draws(steps: list, point: dict, n: int) -> tuple[float, dict]:
    """Seconds per call of every step in turn (one 'draw'), over ``n`` calls after a warm-up."""
    for step in steps:
        point, _ = step.step(point)
    t0 = time.perf_counter()
    for _ in range(n):
        for step in steps:
            point, _ = step.step(point)
    return (time.perf_counter() - t0) / n, point


def _error_curve(
    draws: list[np.ndarray],
    times: list[np.ndarray],
    cards: np.ndarray,
    reference: np.ndarray,
    n_checkpoints: int = 40,
) -> tuple[list[float], list[float], list[float]]:
    """Mean and max absolute marginal error at log-spaced total-time checkpoints.

    ``draws[c]`` is chain c's (draws, n_free) array, ``times[c]`` its cumulative seconds per
    draw, ``reference`` the (n_free, K) exact marginals (zero-padded), ``cards`` the sites'
    cardinalities.
    """
    n_chains = len(draws)
    k_max = reference.shape[1]
    valid = np.arange(k_max)[None, :] < cards[:, None]
    onehots = [np.stack([d == k for k in range(k_max)], axis=-1).cumsum(axis=0) for d in draws]
    t_end = min(float(t[-1]) for t in times)
    t_start = max(float(t[0]) for t in times)
    grid = np.geomspace(t_start, t_end, n_checkpoints) if t_end > t_start else np.array([t_end])
    secs, mean_err, max_err = [], [], []
    for t in grid:
        counts = np.zeros(reference.shape)
        total = 0
        for oh, tc in zip(onehots, times, strict=True):
            n = int(np.searchsorted(tc, t * (1 + 1e-12), side="right"))
            if n:
                counts += oh[n - 1]
                total += n
        if not total:
            continue
        err = np.abs(counts / total - reference)[valid]
        secs.append(float(t * n_chains))
        mean_err.append(float(err.mean()))
        max_err.append(float(err.max()))
    return secs, mean_err, max_err


def run_one(
    target: Target,
    sampler: str,
    *,
    budget: float,
    chains: int,
    draws_per_chain: int,
    seed: int,
) -> Run:
    """Sample ``target`` with ``sampler`` for ``budget`` seconds (all chains) and measure."""
    model = read_uai(target.network, target.evidence, kind="MARKOV", seed=seed)
    info = uai_variable_map(model)
    names = list(info.free_names)
    sites = np.concatenate([info.members[n] for n in names])
    cards = target.network.cards[sites]
    chain_budget = budget / chains
    with model:
        t0 = time.perf_counter()
        steps = make_steps(sampler, [model[n] for n in names], 1)
        compile_seconds = time.perf_counter() - t0
        point = model.initial_point()
        spd = None
        tunable = [s for s in steps if hasattr(s, "steps_per_draw")]
        if tunable:  # pilot: one MH step per draw, then thin to ~draws_per_chain draws
            per_step, _ = _time_draws(steps, point, 20)
            spd = int(np.clip(round(chain_budget / draws_per_chain / per_step), 1, sites.size))
            for s in tunable:
                s.steps_per_draw = spd
            per_draw = per_step * spd
        else:
            per_draw, _ = _time_draws(steps, point, 3)
        n_draws = int(min(MAX_DRAWS, max(20, 3 * chain_budget / per_draw + 10)))
        stamps: list[list[float]] = [[] for _ in range(chains)]
        values: list[list[np.ndarray]] = [[] for _ in range(chains)]

        def callback(trace, draw) -> None:
            c = draw.chain
            stamps[c].append(time.perf_counter())
            values[c].append(np.concatenate([np.ravel(draw.point[n]) for n in names]))
            if stamps[c][-1] - stamps[c][0] + per_draw >= chain_budget:
                raise KeyboardInterrupt

        wall0, cpu0 = time.perf_counter(), time.process_time()
        trace = pm.sample(
            draws=n_draws,
            tune=0,
            chains=chains,
            cores=1,
            step=steps,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            return_inferencedata=False,
            discard_tuned_samples=False,
            callback=callback,
        )
    cpu_fraction = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    times, draws = [], []
    for c in range(chains):
        dt = np.diff(np.asarray(stamps[c]))
        first = float(np.median(dt)) if dt.size else per_draw
        times.append(np.cumsum(np.concatenate([[first], dt])))
        draws.append(np.asarray(values[c], dtype=np.int64))
    k_max = int(cards.max())
    reference = np.zeros((sites.size, k_max))
    for i, v in enumerate(sites.tolist()):
        reference[i, : cards[i]] = target.reference[v]
    secs, err, max_err = _error_curve(draws, times, cards, reference)
    accept = None
    if "accept" in trace.stat_names:
        accept = float(np.mean(trace.get_sampler_stats("accept", combine=True)))
    total = sum(float(t[-1]) for t in times)
    return Run(
        target.name,
        sampler,
        int(sites.size),
        spd,
        compile_seconds,
        total / sum(len(d) for d in draws),
        total / sum(len(d) for d in draws) / (spd or sites.size),  # a sweep updates every site
        cpu_fraction,
        [len(d) for d in draws],
        secs,
        err,
        max_err,
        accept,
    )


def _error_at(run: Run, seconds: float) -> float:
    """Error at the last checkpoint at or before ``seconds`` (nan if none)."""
    idx = np.searchsorted(np.asarray(run.seconds), seconds * (1 + 1e-9), side="right") - 1
    return run.error[idx] if idx >= 0 else float("nan")


def markdown(runs: list[Run], targets: list[Target], args: argparse.Namespace) -> str:
    """The results table: error at a quarter of the budget and at the end, per sampler."""
    info = machine_info()
    samplers = list(dict.fromkeys(r.sampler for r in runs))
    lines = [
        "# UAI networks: mean absolute marginal error vs wall time",
        "",
        f"Budget {args.budget:g} s per (network, sampler), {args.chains} chains run one after "
        f"the other on one core, from the feasible start state, no burn-in discarded; error = "
        "mean |estimated - reference| over free variables and categories (reference: shipped "
        "`.MAR`, or exact elimination for generated grids). One run per cell (seed "
        f"{args.seed}): differences below ~0.005 are noise. "
        f"Machine: {info['cpus']} CPUs (shared), pymc {info['pymc']}, {info['date']}.",
        "",
        "| network | free vars | evidence | " + " | ".join(samplers) + " |",
        "|---|---|---|" + "---|" * len(samplers),
    ]
    by_key = {(r.network, r.sampler): r for r in runs}
    quarter = args.budget / 4
    for t in targets:
        n_free = next((r.n_free for r in runs if r.network == t.name), 0)
        cells = []
        for s in samplers:
            r = by_key.get((t.name, s))
            cells.append(
                "-" if r is None else f"{_error_at(r, quarter):.4f} → **{r.final_error:.4f}**"
            )
        lines.append(f"| {t.name} | {n_free} | {len(t.evidence)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Cells: error after {quarter:g} s → after the whole budget ({args.budget:g} s).",
        "",
        "Per run: ms/site update = ms per draw / steps per draw (ours; one MH step proposes one "
        "site) or / free variables (PyMC's Gibbs: a draw is a sweep); CPU share = process CPU "
        "time / wall time while sampling (below 1: the shared machine made the run wait for a "
        "core); compile s = step construction (not in the budget); final max error = largest "
        "|error| over entries at the end.",
        "",
        "| network | sampler | steps/draw | draws/chain | ms/draw | ms/site update | CPU share "
        "| compile s | accept | final max error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        acc = "-" if r.accept is None else f"{r.accept:.3f}"
        spd = "sweep" if r.steps_per_draw is None else str(r.steps_per_draw)
        max_err = r.max_error[-1] if r.max_error else float("nan")
        lines.append(
            f"| {r.network} | {r.sampler} | {spd} | {min(r.draws_per_chain)} | "
            f"{1e3 * r.seconds_per_draw:.2f} | {1e3 * r.seconds_per_update:.3f} | "
            f"{r.cpu_fraction:.2f} | {r.compile_seconds:.1f} | {acc} | {max_err:.3f} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], targets: list[Target], path: Path) -> None:
    """Error vs seconds, one panel per network, one line per sampler (log-log)."""
    import matplotlib.ticker

    plt = pyplot()
    n = len(targets)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    samplers = list(dict.fromkeys(r.sampler for r in runs))
    colors = {s: f"C{i}" for i, s in enumerate(samplers)}
    low = min((min(r.error) for r in runs if r.error), default=0.01)
    ylim = (min(0.01, 0.8 * low), 0.6)  # one scale for all panels: plateaus look flat
    for ax, t in zip(axes.flat, targets, strict=False):
        for r in runs:
            if r.network == t.name and r.seconds:
                ax.plot(r.seconds, r.error, color=colors[r.sampler], label=r.sampler)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(*ylim)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.2g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{t.name} ({len(t.evidence)} evidence)", fontsize=10)
        ax.set_xlabel("seconds (all chains)")
        ax.set_ylabel("mean |marginal error|")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(samplers), fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = benchmark_parser(__doc__, quick="smoke run (< 1 min)")
    parser.add_argument("--budget", type=float, default=None, help="seconds per run (9)")
    parser.add_argument("--samplers", nargs="+", default=DEFAULT_SAMPLERS, choices=SAMPLERS)
    parser.add_argument("--networks", nargs="+", default=[*SHIPPED, *GENERATED])
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--draws-per-chain", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=DATA, help="the UAI data folder (data/uai)")
    parser.add_argument("--tag", default="", help="suffix of the output file names")
    parser.add_argument(
        "--replot", action="store_true", help="only redraw the PNG from the JSON of a past run"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.networks = ["DBN_11", "50-12-5"]
        args.budget = args.budget or 2.0
        args.draws_per_chain = 200
    args.budget = args.budget or 9.0
    name = ("uai_marginals_quick" if args.quick else "uai_marginals") + args.tag
    if args.replot:
        payload = json.loads((RESULTS / f"{name}.json").read_text())
        runs = [Run(**r) for r in payload["runs"]]
        networks = list(dict.fromkeys(r.network for r in runs))
        plot(runs, load_targets(networks, Path(payload["args"]["data"])), RESULTS / f"{name}.png")
        return

    logging.getLogger("pymc").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="(?s).*return_inferencedata")
    targets = load_targets(args.networks, args.data)
    runs = []
    for target in targets:
        for sampler in args.samplers:
            t0 = time.perf_counter()
            run = run_one(
                target,
                sampler,
                budget=args.budget,
                chains=args.chains,
                draws_per_chain=args.draws_per_chain,
                seed=args.seed,
            )
            runs.append(run)
            print(
                f"{target.name:>12} {sampler:>21}: error {run.final_error:.4f} after "
                f"{run.seconds[-1] if run.seconds else 0:.1f} s ({min(run.draws_per_chain)} "
                f"draws/chain, compile {run.compile_seconds:.1f} s, total "
                f"{time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
    md = markdown(runs, targets, args)
    payload = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine_info(),
        "references": {t.name: t.reference_source for t in targets},
        "runs": [asdict(r) for r in runs],
    }
    write_results(name, payload, md)
    plot(runs, targets, RESULTS / f"{name}.png")
    print(md)


if __name__ == "__main__":
    main()
