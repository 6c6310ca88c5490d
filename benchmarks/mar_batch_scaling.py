"""Wall time of ``mar-batch`` on 1 and 2 Dask workers: the same networks, the same options.

Runs ``python -m pymc_lbp mar-batch NETWORKS --out DIR --workers W`` as a subprocess, first
with ``W = 1`` (the networks one after the other) and then with ``W = 2``, each ``--repeats``
times, with the same ``mar`` options: ``--method sample`` (always sample), ``--sampler``
(default: the command line's default), ``--seed 1 --quiet`` and either ``--draws N`` (default;
fixed work per network, so the ratio measures how much of the work runs in parallel) or
``--time-limit T`` (each network samples for T seconds after its command started, so the
sampling part scales by construction and only start-up and overheads can spoil the ratio).
Wall time is the whole command (interpreter, imports, the local cluster's start and stop,
every network's reading, compiling and sampling, the summaries). Reports both walls, their
ratio (issue #27's goal: 2 workers <= 0.65x 1 worker) and the per-network seconds that
``summary.csv`` records (summed: the serial work) and its failures.

Networks (default): every ``NETWORKS/**/NAME.uai`` with ``NAME.uai.MAR`` beside it, as
``benchmarks.uai_marginals`` uses them (``NAME.uai.evid`` is read by ``mar-batch`` itself).
``--quick``: two tiny networks (DBN_11.small, CSP_12), 20 draws, 10 tuning.

Writes ``--out``/mar_batch_scaling.{json,md} (``--quick``: mar_batch_scaling_quick.*).

Usage: python -m benchmarks.mar_batch_scaling [--quick] [--networks NAME ...] [--draws N |
       --time-limit T] [--tune N] [--sampler NAME] [--repeats N] [--data DIR] [--out DIR]
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, add_out, benchmark_parser, machine_info, write_results
from pymc_lbp.models.uai import NETWORKS

DATA = NETWORKS
QUICK_NETWORKS = ["DBN_11.small", "CSP_12"]
GOAL = 0.65  # issue #27: wall on 2 workers <= 0.65x wall on 1 worker
WORKERS = (1, 2)


def shipped_networks(data: Path) -> dict[str, Path]:
    """Every ``NAME.uai`` under ``data`` with a ``NAME.uai.MAR`` beside it, by NAME."""
    paths = sorted(Path(data).rglob("*.uai"))
    return {p.name[: -len(".uai")]: p for p in paths if Path(f"{p}.MAR").is_file()}


def mar_options(args) -> list[str]:
    """The ``mar`` options every run passes (the same for 1 and 2 workers)."""
    opts = ["--method", "sample", "--seed", str(args.seed), "--quiet"]
    if args.sampler:
        opts += ["--sampler", args.sampler]
    if args.tune is not None:
        opts += ["--tune", str(args.tune)]
    if args.time_limit is not None:
        return [*opts, "--time-limit", f"{args.time_limit:g}"]
    return [*opts, "--draws", str(args.draws)]


def run_batch(paths: list[Path], workers: int, options: list[str], out: Path) -> dict:
    """One ``mar-batch`` command with ``workers`` local workers; its wall time and summary.

    Parameters
    ----------
    paths : list of Path
        The network files.
    workers : int
        ``--workers``.
    options : list of str
        ``mar``'s options (:func:`mar_options`).
    out : Path
        ``--out`` (created by the command).

    Returns
    -------
    dict
        ``workers``, ``wall`` (seconds), ``exit_code``, ``rows`` (``summary.csv``'s rows:
        network, method, seconds, exit_code, error), ``network_seconds`` (their sum) and
        ``failed`` (networks whose exit code is not 0).
    """
    cmd = [sys.executable, "-m", "pymc_lbp", "mar-batch", *map(str, paths)]
    cmd += ["--out", str(out), "--workers", str(workers), *options]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    summary = out / "summary.csv"
    rows = []
    if summary.is_file():
        with open(summary, newline="") as fh:
            keep = ("network", "method", "seconds", "exit_code", "error")
            rows = [{k: row.get(k, "") for k in keep} for row in csv.DictReader(fh)]
    if proc.returncode != 0 and not rows:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"mar-batch failed ({proc.returncode}): " + "\n".join(tail))
    seconds = [float(r["seconds"]) for r in rows if r["seconds"] not in ("", None)]
    return {
        "workers": workers,
        "wall": wall,
        "exit_code": proc.returncode,
        "rows": rows,
        "network_seconds": sum(seconds),
        "failed": [r["network"] for r in rows if str(r["exit_code"]) != "0"],
    }


def markdown(payload: dict) -> str:
    """The results table: per repeat, both walls and their ratio; then per-network seconds."""
    info, args = payload["machine"], payload["args"]
    how = (
        f"--time-limit {args['time_limit']:g}"
        if args["time_limit"] is not None
        else f"--draws {args['draws']}"
    )
    lines = [
        "# mar-batch: wall time on 1 and 2 Dask workers",
        "",
        "`python -m pymc_lbp mar-batch NETWORKS --out DIR --workers W "
        f"{' '.join(payload['options'])}` on {len(payload['networks'])} networks "
        f"({', '.join(payload['networks'])}), {how}; "
        "wall = the whole command (start-up, local cluster, every network, summaries). Goal "
        f"(issue #27): 2 workers <= {GOAL}x 1 worker. Machine: {info['cpus']} CPUs, "
        f"pymc {info['pymc']}, {info['date']}.",
        "",
        "| repeat | wall, 1 worker (s) | wall, 2 workers (s) | ratio | goal | network s, 1 / 2 "
        "workers | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, rep in enumerate(payload["repeats"]):
        one, two = rep["1"], rep["2"]
        ratio = two["wall"] / one["wall"]
        failed = sorted(set(one["failed"]) | set(two["failed"]))
        lines.append(
            f"| {i} | {one['wall']:.1f} | {two['wall']:.1f} | {ratio:.2f} | "
            f"{'met' if ratio <= GOAL else 'not met'} | {one['network_seconds']:.1f} / "
            f"{two['network_seconds']:.1f} | {', '.join(failed) or '-'} |"
        )
    lines += [
        "",
        "network s = the sum of `summary.csv`'s per-network seconds (on 2 workers the networks "
        "share the 2 cores, so the sum can exceed the wall; above the 1-worker sum it shows "
        "contention).",
        "",
        "| network | method | s, 1 worker | s, 2 workers |",
        "|---|---|---|---|",
    ]
    last = payload["repeats"][-1]
    by_net = {r["network"]: r for r in last["2"]["rows"]}
    for row in last["1"]["rows"]:
        other = by_net.get(row["network"], {})
        lines.append(
            f"| {row['network']} | {row['method']} | {row['seconds']} | "
            f"{other.get('seconds', '-')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark (see the module docstring); returns the JSON payload."""
    parser = benchmark_parser(__doc__, quick="two tiny networks, 20 draws", repeats=1)
    parser.add_argument("--networks", nargs="+", default=None, help="default: every shipped")
    work = parser.add_mutually_exclusive_group()
    work.add_argument("--draws", type=int, default=500, help="draws per chain (500)")
    work.add_argument("--time-limit", type=float, default=None, help="seconds per network")
    parser.add_argument("--tune", type=int, default=None, help="tuning draws (mar's default)")
    parser.add_argument("--sampler", default=None, help="mar's --sampler (its default)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=DATA, help="the UAI networks' folder")
    add_out(parser)
    args = parser.parse_args(argv)
    shipped = shipped_networks(args.data)
    if args.quick:
        args.networks = args.networks or QUICK_NETWORKS
        args.draws, args.tune, args.time_limit = 20, 10, None
    args.networks = args.networks or list(shipped)
    unknown = [n for n in args.networks if n not in shipped and not Path(n).is_file()]
    if unknown:
        raise SystemExit(f"unknown networks {unknown}; choose from {list(shipped)} or give files")
    paths = [shipped.get(n, Path(n)) for n in args.networks]
    options = mar_options(args)
    repeats = []
    with tempfile.TemporaryDirectory(prefix="mar_batch_scaling_") as tmp:
        for r in range(args.repeats):
            rep = {}
            for w in WORKERS:
                rep[str(w)] = run_batch(paths, w, options, Path(tmp) / f"r{r}w{w}")
                print(
                    f"repeat {r}, {w} worker(s): wall {rep[str(w)]['wall']:.1f} s, network "
                    f"seconds {rep[str(w)]['network_seconds']:.1f}, failed "
                    f"{rep[str(w)]['failed'] or '-'}",
                    flush=True,
                )
            repeats.append(rep)
    payload = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine_info(),
        "networks": [Path(p).name[: -len(".uai")] for p in paths],
        "options": options,
        "repeats": repeats,
        "ratio": [rep["2"]["wall"] / rep["1"]["wall"] for rep in repeats],
        "goal": GOAL,
    }
    md = markdown(payload)
    name = "mar_batch_scaling_quick" if args.quick else "mar_batch_scaling"
    write_results(name, payload, md, args.out)
    print(md)
    return payload


if __name__ == "__main__":
    main()
