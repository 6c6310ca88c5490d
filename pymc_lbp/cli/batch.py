"""The ``mar-batch`` command: ``mar`` on many UAI networks, one Dask task per network.

Each task runs the ``mar`` command itself (:func:`pymc_lbp.cli.mar.run_mar`, its stdout and
stderr captured for ``DIR/NET.log``), so every ``mar`` option passes through unchanged
(:func:`mar_argv`); per network it adds the evidence (``NET.uai.evid`` when it is beside the
network), a seed (:func:`network_seeds`) and ``--quiet``.

The cluster is a local one of ``--workers`` processes with one thread each
(:func:`start_local_cluster`; two workers compiling at once share pytensor's compiledir, which
pytensor locks), or the cluster behind ``--scheduler ADDRESS``. A failing network (a malformed
file, impossible evidence, a crash) is a row of the summary with its exit code and error, never
the end of the batch; the batch exits with :data:`EXIT_BATCH_FAILED` when any row failed.
Dask is imported only inside :func:`run_batch`, so ``--help`` stays instant; without it the
command exits with :data:`EXIT_FILE` and names ``pip install 'pymc_lbp[dask]'``.

The runs write their results into a folder of their own inside ``DIR``; they are moved into
``DIR`` with the logs and the summary once every run has finished, or, on Ctrl-C, the runs that
finished (the others get a row that says so, and lose a previous batch's results); nothing
is new when none had finished.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import math
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pymc_lbp.cli.interrupts import Interrupted, deferred_interrupts, ignored_interrupts
from pymc_lbp.cli.mar import check_distinct, check_output, run_mar
from pymc_lbp.cli.parser import (
    EXIT_BATCH_FAILED,
    EXIT_FILE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SAMPLING,
    EXIT_USAGE,
    CLIError,
    build_parser,
)
from pymc_lbp.files import write_text_atomically

ENV_FOR_WORKERS = ("PYTENSOR_FLAGS", "OPENBLAS_NUM_THREADS")
"""Environment variables the local workers get as the parent has them."""

COLUMNS = (
    "network",
    "method",
    "seconds",
    "chains",
    "draws",
    "seed",
    "mean_error",
    "max_error",
    "exit_code",
    "error",
)
"""The columns of ``summary.csv`` and ``summary.md``, one row per network."""

_NO_DASK = "mar-batch needs Dask: pip install 'pymc_lbp[dask]' (or 'dask[distributed]')"


def network_name(path: str | Path) -> str:
    """``NET`` of ``NET.uai`` (the file name without ``.uai``): the name of its results."""
    name = Path(path).name
    return name[: -len(".uai")] if name.lower().endswith(".uai") else name


def network_seeds(seed: int | None, n: int) -> list[int | None]:
    """One distinct, reproducible seed per network from ``seed`` (numpy's
    ``SeedSequence(seed).spawn(n)``, first 32-bit word of each child); ``None`` for each when
    ``seed`` is ``None`` (then every run draws its own)."""
    if seed is None:
        return [None] * n
    import numpy as np

    return [int(child.generate_state(1)[0]) for child in np.random.SeedSequence(seed).spawn(n)]


def mar_argv(args: argparse.Namespace) -> list[str]:
    """The ``mar`` options of a parsed ``mar-batch`` command line, as ``mar``'s argv.

    Every shared option whose value is not its default is written with its long name, and
    ``--quiet`` is always added; the result is parsed back as ``mar`` to check that it gives the
    same values (an option this cannot forward fails loudly, not silently).
    """
    argv: list[str] = []
    for action in args.forward_actions:
        value = getattr(args, action.dest)
        if action.dest == "quiet" or value == action.default:
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    argv.append("--quiet")
    back = build_parser().parse_args(["mar", "NET.uai", "-o", "NET.MAR", *argv])
    for action in args.forward_actions:
        if action.dest != "quiet" and getattr(back, action.dest) != getattr(args, action.dest):
            raise AssertionError(f"mar-batch cannot forward {action.option_strings[-1]}")
    return argv


# --------------------------------------------------------------------------- one network
def _last_error(err_text: str) -> str:
    lines = [ln for ln in err_text.splitlines() if ln.startswith("pymc_lbp: error: ")]
    return lines[-1][len("pymc_lbp: error: ") :] if lines else ""


def _marginal_errors(
    output: Path, reference: Path, network: Path, evidence: Path | None
) -> tuple[float, float]:
    """Mean and max |marginal error| of ``output`` against ``reference`` over the free
    variables' entries (evidence variables are deltas in both, as in the benchmark)."""
    import numpy as np

    from pymc_lbp.models.uai import read_evidence, read_mar, read_network

    got, ref = read_mar(output), read_mar(reference)
    if len(got) != len(ref) or any(g.shape != r.shape for g, r in zip(got, ref, strict=False)):
        raise ValueError(f"{reference} does not have the network's variables and cardinalities")
    fixed = read_evidence(evidence, read_network(network)) if evidence else {}
    diffs = [np.abs(g - r) for v, (g, r) in enumerate(zip(got, ref, strict=True)) if v not in fixed]
    if not diffs:
        return 0.0, 0.0
    flat = np.concatenate(diffs)
    return float(flat.mean()), float(flat.max())


def _import_mar() -> None:
    """Import what ``mar`` imports (PyMC, via the UAI models), so a run's seconds leave it out."""
    import pymc_lbp.models.uai  # noqa: F401


def run_network(
    network: str,
    output: str,
    mar_options: Sequence[str],
    seed: int | None = None,
    env: dict[str, str] | None = None,
    mcse: str | None = None,
) -> dict[str, Any]:
    """One network's ``mar`` run (a Dask task): its summary row and its captured output.

    Parameters
    ----------
    network, output : str
        The network file and the MAR file to write (absolute paths on the worker).
    mar_options : sequence of str
        ``mar``'s options (:func:`mar_argv`).
    seed : int, optional
        The network's seed (:func:`network_seeds`).
    env : dict, optional
        Environment variables to set where the worker lacks them, before pytensor is imported.
    mcse : str, optional
        Where ``mar --mcse`` writes the network's Monte Carlo standard errors.

    Returns
    -------
    dict
        The row (:data:`COLUMNS`) and ``log``: the run's stdout and stderr.
    """
    if "pytensor" not in sys.modules:
        for key, value in (env or {}).items():
            os.environ.setdefault(key, value)
    evidence = Path(f"{network}.evid")
    evidence_path = evidence if evidence.is_file() else None
    argv = ["mar", network, "-o", output, *mar_options]
    if evidence_path is not None:
        argv += ["--evidence", str(evidence)]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if mcse is not None:
        argv += ["--mcse", mcse]
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            _import_mar()
            t0 = time.perf_counter()
            code = run_mar(build_parser().parse_args(argv), out, err)
        error = _last_error(err.getvalue()) if code else ""
    except SystemExit as exc:  # argparse: mar_argv's check makes this unreachable
        code, error = int(exc.code or EXIT_USAGE), f"mar refused its options: {argv}"
    except Exception as exc:  # a crash is this network's row, not the batch's end
        code, error = EXIT_SAMPLING, f"crashed: {type(exc).__name__}: {exc}"
    row = _row(network_name(network), code, error.replace("\n", " "))
    text = out.getvalue()
    method = re.search(r"^method: (\w+)", text, re.MULTILINE)
    sampled = re.search(r"sampled (\d+) chain\(s\) x (\d+) draws", text)
    row.update(
        method=method.group(1) if method else "",
        seconds=round(time.perf_counter() - t0, 3),
        chains=int(sampled.group(1)) if sampled else "",
        draws=int(sampled.group(2)) if sampled else "",
        seed="" if seed is None else seed,
    )
    reference = Path(f"{network}.MAR")
    if code == EXIT_OK and reference.is_file():
        try:
            mean, worst = _marginal_errors(Path(output), reference, Path(network), evidence_path)
            row.update(mean_error=mean, max_error=worst)
        except (ValueError, OSError) as exc:
            row["error"] = f"no error vs {reference.name}: {exc}"
    row["log"] = text + err.getvalue()
    return row


# --------------------------------------------------------------------------- the cluster
def start_local_cluster(n_workers: int, dashboard: bool = False) -> Any:
    """A :class:`distributed.LocalCluster` of ``n_workers`` processes, one thread each, whose
    workers get the parent's :data:`ENV_FOR_WORKERS` (Dask would set OPENBLAS_NUM_THREADS=1
    otherwise) and may start processes themselves (``mar --cores``).

    Everything listens on 127.0.0.1: the scheduler, the workers and the scheduler's HTTP server
    (on a port the system chooses: another cluster may hold Dask's 8787), which serves the
    dashboard only when ``dashboard`` is true. The worker processes ignore SIGINT
    (:func:`~pymc_lbp.cli.interrupts.ignored_interrupts`): Ctrl-C is the command's, which
    closes the cluster."""
    import logging

    import dask
    from distributed import LocalCluster

    env = {key: os.environ[key] for key in ENV_FOR_WORKERS if key in os.environ}
    pre_spawn = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **env}
    before = dict(os.environ)  # the nanny writes its pre-spawn variables into ours
    try:
        with (
            ignored_interrupts(),
            dask.config.set(
                {
                    "distributed.worker.daemon": False,
                    "distributed.nanny.pre-spawn-environ": pre_spawn,
                }
            ),
        ):
            return LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",
                scheduler_kwargs={"dashboard": dashboard},
                silence_logs=logging.ERROR,
                env=env,
            )
    finally:
        os.environ.clear()
        os.environ.update(before)


@contextlib.contextmanager
def _client(args: argparse.Namespace, n_networks: int) -> Iterator[tuple[Any, str]]:
    """A Dask client on ``--scheduler`` or on a new local cluster, and words for where."""
    from distributed import Client

    if args.scheduler:
        try:
            client = Client(args.scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise CLIError(
                f"scheduler {args.scheduler} cannot be reached: {exc}", EXIT_FILE
            ) from exc
        with client:
            yield client, f"the cluster at {args.scheduler}"
        return
    n = args.workers or max(1, min(n_networks, os.cpu_count() or 1))
    with start_local_cluster(n, dashboard=args.dashboard) as cluster, Client(cluster) as client:
        yield client, f"{n} local worker(s)"


def _finished(futures: list[Any], err: Any, quiet: bool) -> Iterator[Any]:
    """The futures as they finish, with a progress bar on ``err`` unless ``quiet``."""
    from distributed import as_completed

    if quiet:
        yield from as_completed(futures)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = ("mar-batch", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=err)) as bar:
        task = bar.add_task("networks", total=len(futures))
        for future in as_completed(futures):
            yield future
            bar.advance(task)


# --------------------------------------------------------------------------- the summary
def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def write_summary(rows: list[dict[str, Any]], out_dir: Path) -> str:
    """Write ``summary.csv`` and ``summary.md`` in ``out_dir`` (each whole or not at all);
    return the markdown table."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    writer.writerows([_cell(row[c]) for c in COLUMNS] for row in rows)
    write_text_atomically(out_dir / "summary.csv", buffer.getvalue())
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [_cell(row[c]).replace("|", "\\|") for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    write_text_atomically(out_dir / "summary.md", table)
    return table


RESULTS = (".MAR", ".MCSE", ".log")
"""The files ``mar-batch`` writes per network (``DIR/NET.MAR``, ...)."""


def _check_files(networks: list[Path], names: list[str], out_dir: Path) -> None:
    """No result file or summary is one of the inputs: the networks, their evidence and
    reference marginals beside them (:func:`~pymc_lbp.cli.mar.check_distinct`)."""
    inputs: list[tuple[str, Path]] = []
    for path in networks:
        inputs.append(("the network file", path))
        for suffix, what in ((".evid", "the evidence file"), (".MAR", "the reference file")):
            if Path(f"{path}{suffix}").is_file():
                inputs.append((what, Path(f"{path}{suffix}")))
    outputs = [("the summary", out_dir / f"summary.{ext}") for ext in ("csv", "md")]
    outputs += [("the result file", out_dir / f"{n}{s}") for n in names for s in RESULTS]
    check_distinct(outputs, inputs)


def _row(name: str, code: int, error: str) -> dict[str, Any]:
    """A network's row with these cells, the others empty (as a run that gave no row has it)."""
    return dict.fromkeys(COLUMNS, "") | {
        "network": name,
        "exit_code": code,
        "error": error,
        "log": "",
    }


def _commit(rows: list[dict[str, Any]], ran: set[str], staging: Path, out_dir: Path) -> str:
    """Move the results of every network in ``ran`` (those whose run gave their row) from
    ``staging`` into ``out_dir``; a file no such run wrote is removed there (no previous batch's
    result beside this batch's row); write every network's log and the summary; return the
    markdown table."""
    for row in rows:
        name = row["network"]
        for suffix in RESULTS[:2]:
            staged, final = staging / f"{name}{suffix}", out_dir / f"{name}{suffix}"
            if name in ran and staged.exists():
                os.replace(staged, final)
            else:
                final.unlink(missing_ok=True)
        log = row.pop("log").replace(str(staging), str(out_dir))
        write_text_atomically(out_dir / f"{name}.log", log)
    return write_summary(rows, out_dir)


def _check_dashboard(args: argparse.Namespace) -> None:
    """``--dashboard`` is the local cluster's, and Dask draws it with bokeh."""
    if not args.dashboard:
        return
    if args.scheduler:
        raise CLIError(
            "--dashboard opens the local cluster's dashboard: the cluster at --scheduler has "
            "its own",
            EXIT_USAGE,
        )
    from distributed.versions import BOKEH_REQUIREMENT

    try:
        import distributed.dashboard.scheduler  # noqa: F401 (what Dask imports for it)
    except ImportError as exc:
        raise CLIError(
            f"--dashboard needs bokeh: pip install '{BOKEH_REQUIREMENT}' ({exc})", EXIT_FILE
        ) from exc


def _prepare_out_dir(path: str) -> Path:
    out_dir = Path(path)
    if out_dir.exists() and not out_dir.is_dir():
        raise CLIError(f"--out {path}: not a directory", EXIT_FILE)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(
            f"--out {path}: cannot be created: {exc.strerror or exc}", EXIT_FILE
        ) from exc
    check_output(str(out_dir / "summary.csv"))
    return out_dir.resolve()


def run_batch(args: argparse.Namespace, out: Any, err: Any) -> int:
    """The ``mar-batch`` command: check, run every network on Dask, write the summary.

    Returns
    -------
    int
        :data:`EXIT_OK` when every network succeeded, :data:`EXIT_BATCH_FAILED` otherwise.

    Raises
    ------
    CLIError
        Before any task: two networks of one name, a result file that is an input,
        ``--dashboard`` with ``--scheduler`` (:data:`EXIT_USAGE`); an unusable ``--out``, a
        missing Dask (or bokeh for ``--dashboard``) or an unreachable scheduler
        (:data:`EXIT_FILE`).
    Interrupted
        Ctrl-C: after the results of the runs that finished, and the summary, are written.
    """
    networks = [Path(p).resolve() for p in args.networks]
    names = [network_name(p) for p in networks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CLIError(
            f"two networks named {', '.join(twice)}: their results would clash", EXIT_USAGE
        )
    _check_files(networks, names, Path(args.out).resolve())
    options = mar_argv(args)
    seeds = network_seeds(args.seed, len(networks))
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        raise CLIError(f"{_NO_DASK} ({exc})", EXIT_FILE) from exc
    _check_dashboard(args)
    out_dir = _prepare_out_dir(args.out)
    env = {key: os.environ[key] for key in ENV_FOR_WORKERS if key in os.environ}
    t0 = time.perf_counter()
    rows: dict[str, dict[str, Any]] = {}
    ran: set[str] = set()  # the networks whose row is their run's
    batch = uuid.uuid4().hex  # Dask keys: a key already on the scheduler is not run again
    staging = out_dir / f".mar-batch-{batch}"  # the runs' results, until they are all in
    staging.mkdir()
    interrupted = False
    try:
        try:
            with _client(args, len(networks)) as (client, where):
                if args.dashboard:
                    print(f"mar-batch: Dask dashboard at {client.dashboard_link}", file=err)
                futures = {}
                for path, name, seed in zip(networks, names, seeds, strict=True):
                    future = client.submit(
                        run_network,
                        str(path),
                        str(staging / f"{name}.MAR"),
                        options,
                        seed,
                        env,
                        str(staging / f"{name}.MCSE") if args.mcse else None,
                        key=f"mar-{name}-{batch}",
                    )
                    futures[future] = name
                for future in _finished(list(futures), err, args.quiet):
                    name = futures[future]
                    try:
                        rows[name] = future.result()
                        ran.add(name)
                    except Exception as exc:  # the worker died (KilledWorker) or the task was lost
                        rows[name] = _row(
                            name, EXIT_SAMPLING, f"task failed: {type(exc).__name__}: {exc}"
                        )
        except (KeyboardInterrupt, Interrupted):
            if not rows:
                raise  # nothing finished: nothing new in DIR
            interrupted = True
        ordered = [
            rows.get(name) or _row(name, EXIT_INTERRUPTED, "interrupted before it finished")
            for name in names
        ]
        with deferred_interrupts():
            table = _commit(ordered, ran, staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(table, file=out, end="")
    failed = [row for row in ordered if row["exit_code"] != EXIT_OK]
    seconds = time.perf_counter() - t0
    line = f"mar-batch: {len(ordered) - len(failed)} of {len(ordered)} networks succeeded"
    if failed:
        line += " (failed: " + ", ".join(f"{r['network']}: exit {r['exit_code']}" for r in failed)
        line += f"; exit code {EXIT_INTERRUPTED if interrupted else EXIT_BATCH_FAILED})"
    print(f"{line} in {seconds:.1f} s on {where} -> {out_dir / 'summary.csv'}", file=out)
    if interrupted:
        raise Interrupted(
            f"{len(rows)} of {len(names)} networks finished; their results and the summary "
            f"are in {out_dir}"
        )
    return EXIT_BATCH_FAILED if failed else EXIT_OK
