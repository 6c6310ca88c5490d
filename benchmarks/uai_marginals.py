"""Marginal error vs wall time on UAI networks: our samplers and PyMC's Gibbs, same run.

For every network and sampler (default: every one of :data:`pymc_lbp.cli.SAMPLERS`, the
command line's default ``block_gibbs`` first; ``pymc_gibbs`` is what ``pm.sample()`` assigns),
one ``pm.sample`` call runs ``--chains`` chains one after the other (``cores=1``) from the
model's feasible start state (``read_uai``; the same for every sampler) with ``--tune`` tuning
draws (default 0; they count in the budget, unrecorded) until each chain has used
``budget / chains`` seconds. A callback records every draw and its ``perf_counter`` time. At ~40
log-spaced checkpoints ``t``, and at exactly 10, 30 and 60 s when the budget reaches them, the
draws of all chains made within ``t / chains`` chain seconds are pooled and the marginals
estimated twice: Rao-Blackwellised (RB: the average full conditional of every free variable
given its Markov blanket, :class:`~pymc_lbp.models.uai.rao_blackwell.FullConditionals`, what
``mar`` writes by default; the headline) and by counting. Error = mean absolute difference over
the free variables and categories from the reference (shipped ``.MAR``; exact elimination for
generated grids); x = total seconds of all chains. Step construction is timed apart, not in the
budget. A sampler that does not apply (:func:`pymc_lbp.cli.check_sampler`) or fails is listed.

Our samplers' ``steps_per_draw`` comes from a pilot, so that a chain records about
``--draws-per-chain`` draws (thinning only); PyMC's Gibbs records one sweep per draw. Models
use ``kind="MARKOV"`` (``mar``'s default).

Networks (default): every ``NETWORKS/**/NAME.uai`` with ``NAME.uai.MAR`` beside it (and
``NAME.uai.evid`` when present), the UAI'08 grid BNs 50-12-5 and 75-16-5 with evidence among
them; also: generated 12x12 grid BNs with 50/75/90 % deterministic nodes (``grid-50-12`` ...,
:func:`pymc_lbp.models.uai.grid_bn`, evidence sink = 1).

Writes ``--out``/uai_marginals.{json,md,png} (``--quick``: uai_marginals_quick.*), the JSON and
table after every run.

Usage: python -m benchmarks.uai_marginals [--quick] [--budget S] [--samplers NAME ...]
       [--networks NAME ...] [--chains N] [--tune N] [--seed S] [--data DIR] [--out DIR]
       [--tag SUFFIX] [--replot | --merge TAG ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pymc as pm

from benchmarks.common import add_out, benchmark_parser, machine_info, pyplot, write_results
from pymc_lbp.cli import SAMPLERS, SamplerNotApplicableError, check_sampler, make_steps
from pymc_lbp.cli.samplers import DEFAULT_SAMPLER
from pymc_lbp.models.uai import (
    NETWORKS,
    UAINetwork,
    exact_marginals,
    read_evidence,
    read_mar,
    read_network,
    read_uai,
    uai_variable_map,
)
from pymc_lbp.models.uai.generate import grid_bn
from pymc_lbp.models.uai.model import target_network
from pymc_lbp.models.uai.rao_blackwell import FullConditionals

DATA = NETWORKS
#: name -> grid_bn(n, deterministic_fraction, seed); not in the default networks
GENERATED = {
    "grid-50-12": (12, 0.50, 1),
    "grid-75-12": (12, 0.75, 1),
    "grid-90-12": (12, 0.90, 1),
}
DEFAULT_SAMPLERS = [DEFAULT_SAMPLER, *(s for s in SAMPLERS if s != DEFAULT_SAMPLER)]
QUICK_SAMPLERS = [DEFAULT_SAMPLER, "gibbs_with_gradients", "pymc_gibbs"]
QUICK_NETWORKS = ["DBN_11.small", "50-12-5"]
MARKS = (10.0, 30.0, 60.0)  # seconds at which the table reports the errors
MARK_SLACK = 0.03  # a run that ends within 3 % below a mark reports its end there
GOAL = 0.02  # issue #27: default sampler, Rao-Blackwellised, 60 s
MAX_DRAWS = 200_000  # per chain (the trace is preallocated) ...
MAX_ENTRIES = 10_000_000  # ... and at most this many values (draws x free variables)
MAX_SWEEPS_PER_DRAW = 1000  # thinning: a draw is at most this many sweeps' worth of steps


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
    """One sampler on one network: the error curves (both estimators) and what it cost."""

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
    error: list[float] = field(default_factory=list)  # mean abs error, Rao-Blackwellised
    max_error: list[float] = field(default_factory=list)
    count_error: list[float] = field(default_factory=list)  # mean abs error, counts
    count_max_error: list[float] = field(default_factory=list)
    accept: float | None = None
    estimate_seconds: float = 0.0  # computing both estimators at every checkpoint

    @property
    def final_error(self) -> float:
        """The Rao-Blackwellised error at the end of the run."""
        return self.error[-1] if self.error else float("nan")


def shipped_networks(data: Path) -> dict[str, Path]:
    """Every ``NAME.uai`` under ``data`` with a ``NAME.uai.MAR`` beside it, by NAME."""
    paths = sorted(data.rglob("*.uai"))
    return {p.name[: -len(".uai")]: p for p in paths if Path(f"{p}.MAR").is_file()}


def load_targets(names: list[str], data: Path) -> list[Target]:
    """The shipped and generated networks named in ``names``, with their references."""
    shipped = shipped_networks(data)
    targets = []
    for name in names:
        if name in shipped:
            path = shipped[name]
            network = read_network(path)
            evid = Path(f"{path}.evid")
            evidence = read_evidence(evid if evid.is_file() else None, network)
            reference, source = read_mar(Path(f"{path}.MAR")), "shipped .MAR"
        elif name in GENERATED:
            n, frac, seed = GENERATED[name]
            network, evidence = grid_bn(n, frac, seed)
            reference, source = exact_marginals(network, evidence), "exact elimination"
        else:
            raise SystemExit(f"unknown network {name!r}; choose from {[*shipped, *GENERATED]}")
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


def checkpoints(times: list[np.ndarray], marks: tuple[float, ...] = MARKS, n: int = 40):
    """Per-chain seconds at which to estimate: ``n`` log-spaced, plus every total-seconds mark
    the chains reach (within :data:`MARK_SLACK`; a mark just past the end is the end)."""
    chains = len(times)
    t_end = min(float(t[-1]) for t in times)
    t_start = max(float(t[0]) for t in times)
    grid = np.geomspace(t_start, t_end, n) if t_end > t_start else np.array([t_end])
    extra = [min(m / chains, t_end) for m in marks if m / chains <= t_end * (1 + MARK_SLACK)]
    return np.unique(np.concatenate([grid, extra]))


def estimator_curves(
    plan: FullConditionals,
    states: list[np.ndarray],
    times: list[np.ndarray],
    reference: np.ndarray,
    grid: np.ndarray,
) -> dict[str, list[float]]:
    """Mean and max absolute marginal error of both estimators at every checkpoint: the
    lists ``seconds`` (total), ``error``, ``max_error`` (RB), ``count_error``, ``count_max_error``.

    ``states[c]`` is chain c's (draws, n_vars) full network states, ``times[c]`` its
    cumulative seconds per draw, ``reference`` the (free, kmax) reference in ``plan.free``
    order (zero-padded), ``grid`` the per-chain checkpoint seconds. The full conditionals are
    computed once per draw, in chunks, and summed cumulatively, so each checkpoint costs one
    addition.
    """
    n_chk, shape = len(grid), (plan.free.size, plan.kmax)
    sums = {"error": np.zeros((n_chk, *shape)), "count_error": np.zeros((n_chk, *shape))}
    totals = np.zeros(n_chk)
    ks = np.arange(plan.kmax)
    chunk = 4 * plan.draws_per_chunk()
    for st, tc in zip(states, times, strict=True):
        upto = np.searchsorted(tc, grid * (1 + 1e-12), side="right")  # draws by checkpoint
        totals += upto
        running = {key: np.zeros(shape) for key in sums}
        for lo in range(0, len(st), chunk):
            hi = min(len(st), lo + chunk)
            rb = plan.probabilities(st[lo:hi])
            counts = (st[lo:hi, plan.free][..., None] == ks).astype(np.float64)
            parts = {"error": rb, "count_error": counts}
            here = np.flatnonzero((upto > lo) & (upto <= hi))
            for key, part in parts.items():
                part = np.cumsum(part, axis=0)
                sums[key][here] += running[key] + part[upto[here] - lo - 1]
                running[key] += part[-1]
    valid = ks[None, :] < plan.free_cards[:, None]
    keys = ["seconds", "error", "max_error", "count_error", "count_max_error"]
    out: dict[str, list[float]] = {key: [] for key in keys}
    for j in np.flatnonzero(totals):
        out["seconds"].append(float(grid[j] * len(states)))
        for key, total in sums.items():
            err = np.abs(total[j] / totals[j] - reference)[valid]
            out[key].append(float(err.mean()))
            out[key.replace("error", "max_error")].append(float(err.max()))
    return out


def run_one(target: Target, sampler: str, args: argparse.Namespace) -> Run:
    """Sample ``target`` with ``sampler`` for ``args.budget`` seconds (all ``args.chains``
    chains, ``args.tune``, ``args.draws_per_chain``, ``args.seed``) and measure."""
    chains, seed, draws_per_chain = args.chains, args.seed, args.draws_per_chain
    check_sampler(sampler, target.network, target.evidence)
    model = read_uai(target.network, target.evidence, kind="MARKOV", seed=seed)
    info = uai_variable_map(model)
    names = list(info.free_names)
    sites = np.concatenate([info.members[n] for n in names])
    chain_budget = args.budget / chains
    with model:
        t0 = time.perf_counter()
        steps = make_steps(sampler, [model[n] for n in names], 1)
        compile_seconds = time.perf_counter() - t0
        point = model.initial_point()
        spd = None
        tunable = [s for s in steps if hasattr(s, "steps_per_draw")]
        if tunable:  # pilots: one step per draw, then thin to ~draws_per_chain draws
            per_step, _ = _time_draws(steps, point, 50)
            for _ in range(2):  # a thinned draw shares one call's overhead: time it again
                spd = round(chain_budget / draws_per_chain / per_step)
                spd = int(np.clip(spd, 1, MAX_SWEEPS_PER_DRAW * sites.size))
                for s in tunable:
                    s.steps_per_draw = spd
                per_draw, _ = _time_draws(steps, point, 5)
                per_step = per_draw / spd
        else:
            per_draw, _ = _time_draws(steps, point, 5)
        # as many draws as the trace may hold: the callback ends each chain on time (a pilot
        # of single steps overestimates a thinned draw's cost, the per-call overhead included)
        n_draws = int(min(MAX_DRAWS, MAX_ENTRIES // sites.size))
        starts: list[float | None] = [None] * chains
        stamps: list[list[float]] = [[] for _ in range(chains)]
        values: list[list[np.ndarray]] = [[] for _ in range(chains)]

        def callback(trace, draw) -> None:
            c, now = draw.chain, time.perf_counter()
            if starts[c] is None:
                starts[c] = now
            if not draw.tuning:
                stamps[c].append(now)
                values[c].append(np.concatenate([np.ravel(draw.point[n]) for n in names]))
            if now - starts[c] + per_draw >= chain_budget:
                raise KeyboardInterrupt

        wall0, cpu0 = time.perf_counter(), time.process_time()
        opts = dict(tune=args.tune, chains=chains, cores=1, step=steps, random_seed=seed)
        opts |= dict(progressbar=False, compute_convergence_checks=False, callback=callback)
        opts |= dict(return_inferencedata=False, discard_tuned_samples=False)
        trace = pm.sample(n_draws, **opts)
    cpu_fraction = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    network, fixed = target_network(info)
    plan = FullConditionals.from_network(network, fixed)
    base = np.maximum(info.fixed_values, 0)
    times, states = [], []
    for c in range(chains):
        if not stamps[c]:
            raise RuntimeError(f"chain {c} recorded no draw within the budget (tuning?)")
        dt = np.diff(np.asarray(stamps[c]))
        first = float(np.median(dt)) if dt.size else per_draw
        times.append(np.asarray(stamps[c]) - starts[c] + first)
        st = np.tile(base, (len(values[c]), 1))
        st[:, sites] = np.asarray(values[c], dtype=np.int64)
        states.append(st)
    reference = np.zeros((plan.free.size, plan.kmax))
    for i, v in enumerate(plan.free.tolist()):
        reference[i, : plan.free_cards[i]] = target.reference[v]
    t0 = time.perf_counter()
    grid = checkpoints(times, (*MARKS, args.budget))
    curves = estimator_curves(plan, states, times, reference, grid)
    estimate_seconds = time.perf_counter() - t0
    accept = None
    if "accept" in trace.stat_names:
        accept = float(np.mean(trace.get_sampler_stats("accept", combine=True)))
    total = sum(float(t[-1]) for t in times)
    per_draw = total / sum(len(s) for s in states)
    # per update: per draw / steps per draw, or / sites for a sweep (it updates every site)
    cost = (compile_seconds, per_draw, per_draw / (spd or sites.size), cpu_fraction)
    head = (target.name, sampler, int(sites.size), spd, *cost, [len(s) for s in states])
    return Run(*head, **curves, accept=accept, estimate_seconds=estimate_seconds)


def error_at(run: Run, seconds: float, estimator: str = "rb") -> float:
    """Error at the checkpoint nearest ``seconds`` within :data:`MARK_SLACK` (every mark the
    run reached is a checkpoint; a run that ends just short reports its end; else nan)."""
    errors = run.error if estimator == "rb" else run.count_error
    gap = np.abs(np.log(np.asarray(run.seconds) / seconds))  # the checkpoint nearest the mark
    ok = gap <= np.log1p(MARK_SLACK) + 1e-9
    return errors[int(np.argmin(np.where(ok, gap, np.inf)))] if ok.any() else float("nan")


def _fmt(x: float) -> str:
    return "-" if np.isnan(x) else f"{x:.4f}"


def markdown(
    runs: list[Run], skipped: list[dict], targets: list[Target], args: argparse.Namespace
) -> str:
    """Headline table (default sampler vs PyMC's Gibbs at the last mark, goal), then every
    run's errors at 10/30/60 s (both estimators), its cost, and the runs not made."""
    info = machine_info()
    marks = sorted({m for m in MARKS if m <= args.budget} | {args.budget})
    last = marks[-1]
    by_key = {(r.network, r.sampler): r for r in runs}
    n_free = {r.network: r.n_free for r in runs}
    lines = [
        "# UAI networks: mean absolute marginal error vs wall time",
        "",
        f"Budget {args.budget:g} s per (network, sampler), {args.chains} chains one after the "
        f"other on one core, {args.tune} tuning draws, from the feasible start state; error = "
        "mean |estimated - reference| over free variables and categories (reference: shipped "
        "`.MAR`, or exact elimination for generated grids). RB = Rao-Blackwellised (average "
        "full conditional; what `mar` writes by default), counts = fraction of draws. One run "
        f"per cell (seed {args.seed}): differences below ~0.005 are noise. Machine: "
        f"{info['cpus']} CPUs, pymc {info['pymc']}, {info['date']}.",
        "",
        f"Default sampler `{DEFAULT_SAMPLER}` vs PyMC's Gibbs after {last:g} s; goal (issue "
        f"#27): default sampler, RB, <= {GOAL} at 60 s.",
        "",
        f"| network | free vars | evidence | {DEFAULT_SAMPLER} RB | {DEFAULT_SAMPLER} counts "
        "| pymc_gibbs RB | pymc_gibbs counts | goal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in targets:
        cells = []
        for s in (DEFAULT_SAMPLER, "pymc_gibbs"):
            r = by_key.get((t.name, s))
            cells += [_fmt(error_at(r, last, e)) if r else "-" for e in ("rb", "counts")]
        d = by_key.get((t.name, DEFAULT_SAMPLER))
        at60 = float("nan") if d is None or args.budget < 60 else error_at(d, 60.0)
        goal = "-" if np.isnan(at60) else ("met" if at60 <= GOAL else "not met")
        row = [t.name, n_free.get(t.name, "-"), len(t.evidence), *cells, goal]
        lines.append("| " + " | ".join(map(str, row)) + " |")
    head = [f"RB {m:g} s" for m in marks] + [f"counts {m:g} s" for m in marks]
    lines += [
        "",
        "Every run: error after each mark (RB, then counts).",
        "",
        "| network | sampler | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]
    for r in runs:
        cells = [_fmt(error_at(r, m, e)) for e in ("rb", "counts") for m in marks]
        lines.append(f"| {r.network} | {r.sampler} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Per run: ms/site update = ms/draw / steps per draw (ours; block samplers: per block "
        "update) or / free variables (PyMC's Gibbs: a draw is a sweep); CPU share = CPU time / "
        "wall time while sampling (below 1: the run waited for a core); compile s = step "
        "construction, estimate s = both estimators at every checkpoint (neither in the "
        "budget); final max error = largest |error| (RB) at the end.",
        "",
        "| network | sampler | steps/draw | draws/chain | ms/draw | ms/site update | CPU share "
        "| compile s | estimate s | accept | final max error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        acc = "-" if r.accept is None else f"{r.accept:.3f}"
        spd = "sweep" if r.steps_per_draw is None else str(r.steps_per_draw)
        max_err = r.max_error[-1] if r.max_error else float("nan")
        lines.append(
            f"| {r.network} | {r.sampler} | {spd} | {min(r.draws_per_chain)} | "
            f"{1e3 * r.seconds_per_draw:.2f} | {1e3 * r.seconds_per_update:.3f} | "
            f"{r.cpu_fraction:.2f} | {r.compile_seconds:.1f} | {r.estimate_seconds:.1f} | "
            f"{acc} | {max_err:.3f} |"
        )
    if skipped:
        lines += ["", "Not run:", ""]
        lines += [f"* {s['network']} / {s['sampler']}: {s['reason']}" for s in skipped]
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], targets: list[Target], path: Path) -> None:
    """Error vs seconds, one panel per network, one colour per sampler (log-log): RB solid,
    counts dashed; the goal as a dotted line."""
    import matplotlib.ticker

    plt = pyplot()
    n = len(targets)
    cols, rows = min(4, n), (n + 3) // 4
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    samplers = list(dict.fromkeys(r.sampler for r in runs))
    colors = {s: f"C{i}" for i, s in enumerate(samplers)}
    low = min((min(r.error + r.count_error) for r in runs if r.error), default=0.01)
    ylim = (min(0.005, 0.8 * low), 0.6)  # one scale for all panels: plateaus look flat
    for ax, t in zip(axes.flat, targets, strict=False):
        for r in runs:
            if r.network == t.name and r.seconds:
                ax.plot(r.seconds, r.error, color=colors[r.sampler], label=r.sampler)
                ax.plot(r.seconds, r.count_error, color=colors[r.sampler], ls="--", lw=0.8)
        ax.axhline(GOAL, color="k", ls=":", lw=0.8)
        ax.set(xscale="log", yscale="log", ylim=ylim, xlabel="seconds (all chains)")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.2g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{t.name} ({len(t.evidence)} evidence)", fontsize=10)
        ax.set_ylabel("mean |marginal error|")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    handles = [plt.Line2D([], [], color=colors[s], label=s) for s in samplers]
    handles += [plt.Line2D([], [], color="k", ls="--", lw=0.8, label="(dashed: counts)")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark (see the module docstring); returns the JSON payload."""
    parser = benchmark_parser(__doc__, quick="smoke run (2 small networks, 3 samplers, 3 s)")
    parser.add_argument("--budget", type=float, default=None, help="seconds per run (60)")
    parser.add_argument("--samplers", nargs="+", default=None, choices=SAMPLERS)
    parser.add_argument("--networks", nargs="+", default=None, help="default: every shipped")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--tune", type=int, default=0, help="tuning draws per chain (0)")
    parser.add_argument("--draws-per-chain", type=int, default=1000, help="thinning target")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=DATA, help="the UAI networks' folder")
    parser.add_argument("--tag", default="", help="suffix of the output file names")
    parser.add_argument(
        "--replot", action="store_true", help="only redraw the PNG from the JSON of a past run"
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        metavar="TAG",
        help="only combine past runs' JSON (these tags, in --out) into this --tag's JSON, table "
        "and plot; a later tag's (network, sampler) replaces an earlier one's",
    )
    add_out(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.networks = args.networks or QUICK_NETWORKS
        args.samplers = args.samplers or QUICK_SAMPLERS
        args.budget = args.budget or 3.0
        args.draws_per_chain = 200
    args.budget = args.budget or 60.0
    args.samplers = args.samplers or DEFAULT_SAMPLERS
    args.networks = args.networks or list(shipped_networks(args.data))
    name = ("uai_marginals_quick" if args.quick else "uai_marginals") + args.tag
    if args.merge:
        return merge(name, args)
    if args.replot:
        payload = json.loads((args.out / f"{name}.json").read_text())
        runs = [Run(**r) for r in payload["runs"]]
        networks = list(dict.fromkeys(r.network for r in runs))
        plot(runs, load_targets(networks, Path(payload["args"]["data"])), args.out / f"{name}.png")
        return payload

    logging.getLogger("pymc").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="(?s).*return_inferencedata")
    targets = load_targets(args.networks, args.data)
    runs: list[Run] = []
    skipped: list[dict] = []
    for target in targets:
        for sampler in args.samplers:
            t0 = time.perf_counter()
            try:
                run = run_one(target, sampler, args)
            except Exception as exc:  # noqa: BLE001 (one failure must not end a long run)
                if not isinstance(exc, SamplerNotApplicableError):
                    traceback.print_exc()
                reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                skipped.append({"network": target.name, "sampler": sampler, "reason": reason})
                print(f"{target.name:>12} {sampler:>21}: not run ({reason})", flush=True)
                continue
            runs.append(run)
            end, counts = run.seconds[-1:] or [0.0], run.count_error[-1:] or [float("nan")]
            print(
                f"{target.name:>12} {sampler:>21}: error RB {run.final_error:.4f}, counts "
                f"{counts[0]:.4f} after {end[0]:.1f} s ({min(run.draws_per_chain)} draws/chain, "
                f"compile {run.compile_seconds:.1f} s, total {time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
            _save(name, runs, skipped, targets, args)
    payload, md = _save(name, runs, skipped, targets, args)
    plot(runs, targets, args.out / f"{name}.png")
    print(md)
    return payload


def merge(name: str, args: argparse.Namespace) -> dict:
    """Combine the runs of ``uai_marginals<tag>.json`` for each tag in ``args.merge`` (later
    tags replace earlier ones' (network, sampler) runs) into ``name``'s JSON, table and plot,
    networks in their first run's order; the first tag's budget, chains and seed head the
    table (runs made with others are not merged)."""
    runs: dict[tuple[str, str], Run] = {}
    skipped: dict[tuple[str, str], dict] = {}
    first = None
    for tag in args.merge:
        payload = json.loads((args.out / f"uai_marginals{tag}.json").read_text())
        first = first or payload["args"]
        for key in ("budget", "chains", "seed"):
            if payload["args"][key] != first[key]:
                raise ValueError(f"tag {tag!r}: {key} {payload['args'][key]} != {first[key]}")
        for r in (Run(**d) for d in payload["runs"]):
            runs[r.network, r.sampler] = r
            skipped.pop((r.network, r.sampler), None)
        for sk in payload.get("skipped", []):
            if (sk["network"], sk["sampler"]) not in runs:
                skipped[sk["network"], sk["sampler"]] = sk
    for key in ("budget", "chains", "tune", "seed", "draws_per_chain"):
        setattr(args, key, first[key])
    args.samplers = list(dict.fromkeys(s for _, s in runs))
    args.networks = list(dict.fromkeys(n for n, _ in runs))
    targets = load_targets(args.networks, args.data)
    ordered = [runs[t.name, s] for t in targets for s in args.samplers if (t.name, s) in runs]
    payload, _ = _save(name, ordered, list(skipped.values()), targets, args)
    plot(ordered, targets, args.out / f"{name}.png")
    return payload


def _save(name: str, runs: list[Run], skipped: list[dict], targets: list[Target], args) -> tuple:
    """Write ``args.out/<name>.{json,md}`` (after every run); return the payload and table."""
    payload = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine_info(),
        "references": {t.name: t.reference_source for t in targets},
        "runs": [asdict(r) for r in runs],
        "skipped": skipped,
    }
    md = markdown(runs, skipped, targets, args)
    write_results(name, payload, md, args.out)
    return payload, md


if __name__ == "__main__":
    main()
