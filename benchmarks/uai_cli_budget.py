"""The command line under issue #27's goal: ``mar --method sample`` within a time budget.

Each shipped network with a ``NAME.uai.MAR`` (evidence from ``NAME.uai.evid`` when present) is
run through ``python -m pymc_lbp mar NAME.uai -o OUT --method sample --time-limit T --cores C
--seed S`` in a fresh process, the way a user runs it: the budget pays the start-up, the block
choice, the tuning draws and the sampling of the default sampler's chains (one per core). The
written marginals are compared with the shipped ones: mean and max |error| over the free
variables' entries (``pymc_lbp.cli.batch``'s measure, as ``mar-batch`` reports it), with the
wall seconds, the exit code and whether the run warned that its chains disagree.

Writes docs/results/uai_cli_budget.{json,md} (or ``--out``).

Usage: python -m benchmarks.uai_cli_budget [--quick] [--budget 60] [--cores 2] [--seed 1]
       [--networks NAME ...] [--out DIR]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    ROOT,
    add_out,
    benchmark_parser,
    compact_cell,
    load_info,
    machine_info,
    markdown_table,
    write_results,
)
from benchmarks.uai_marginals import shipped_networks
from pymc_lbp.cli.batch import _marginal_errors
from pymc_lbp.models.uai import NETWORKS

GOAL = 0.02  # issue #27: mean |marginal error| at 60 s on 2 cores, default sampler
QUICK_NETWORKS = ("BN_0", "DBN_11.small")

COLUMNS = [
    ("network", "network"),
    ("error", "mean abs error"),
    ("max_error", "max abs error"),
    ("goal", f"<= {GOAL}"),
    ("seconds", "wall s"),
    ("exit_code", "exit code"),
    ("chains_disagree", "chains disagree"),
]


def run_network(path: Path, *, budget: float, cores: int, seed: int) -> dict:
    """One ``mar`` run on ``path`` in a fresh process; its errors against the shipped MAR."""
    evid = Path(f"{path}.evid")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.MAR"
        cmd = [sys.executable, "-m", "pymc_lbp", "mar", str(path), "-o", str(out)]
        cmd += ["--method", "sample", "--time-limit", str(budget), "--cores", str(cores)]
        cmd += ["--seed", str(seed)]
        if evid.is_file():
            cmd += ["--evidence", str(evid)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        seconds = time.perf_counter() - t0
        res = {"network": path.name[: -len(".uai")], "seconds": seconds}
        res["exit_code"] = proc.returncode
        res["chains_disagree"] = "disagree" in proc.stderr
        if proc.returncode != 0 or not out.is_file():
            res["error_text"] = proc.stderr.strip().splitlines()[-1:] or [""]
            return res
        mean, largest = _marginal_errors(
            out, Path(f"{path}.MAR"), path, evid if evid.is_file() else None
        )
    res.update(error=mean, max_error=largest, goal="met" if mean <= GOAL else "not met")
    return res


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the payload written to JSON."""
    parser = benchmark_parser(__doc__, quick="two small networks, 10 s each")
    parser.add_argument("--budget", type=float, help="seconds per network (60; --quick 10)")
    parser.add_argument("--cores", type=int, default=2, help="mar --cores (2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--networks", nargs="*", help="default: every shipped network")
    parser.add_argument("--data", type=Path, default=NETWORKS)
    add_out(parser)
    args = parser.parse_args(argv)
    budget = args.budget if args.budget is not None else (10.0 if args.quick else 60.0)
    shipped = shipped_networks(args.data)
    names = args.networks or (list(QUICK_NETWORKS) if args.quick else list(shipped))
    unknown = [n for n in names if n not in shipped]
    if unknown:
        raise SystemExit(f"unknown networks {unknown}; choose from {list(shipped)}")
    load_before = load_info()
    rows = []
    for name in names:
        res = run_network(shipped[name], budget=budget, cores=args.cores, seed=args.seed)
        rows.append(res)
        print(
            f"{name:14s} error {res.get('error', float('nan')):.4f} in {res['seconds']:.1f} s "
            f"(exit {res['exit_code']}{', chains disagree' if res['chains_disagree'] else ''})",
            flush=True,
        )
    info = {**machine_info(), "load_before": load_before, "load_after": load_info()}
    met = sum(r.get("goal") == "met" for r in rows)
    md = "\n".join(
        [
            "# `mar --method sample` within a time budget (benchmarks/uai_cli_budget.py)\n",
            f"`python -m pymc_lbp mar NET.uai -o OUT --method sample --time-limit {budget:g} "
            f"--cores {args.cores} --seed {args.seed}` (the default sampler), one fresh process "
            f"per network; error = mean |written - shipped MAR| over the free variables' "
            f"entries. Machine: {info['cpus']} CPUs, pymc {info['pymc']}, {info['date']}; "
            f"load before/after {info['load_before']} / {info['load_after']}.\n",
            markdown_table(rows, COLUMNS, cell=lambda v: "-" if v is None else compact_cell(v)),
            f"\n{met} of {len(rows)} networks within {GOAL}.\n",
        ]
    )
    payload = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "budget": budget,
        "machine": info,
        "rows": rows,
    }
    name = "uai_cli_budget_quick" if args.quick else "uai_cli_budget"
    write_results(name, payload, md, results=args.out)
    print(md)
    return payload


if __name__ == "__main__":
    main()
