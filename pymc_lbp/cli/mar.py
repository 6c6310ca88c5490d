"""The work of the ``mar`` command: the checks of its files and options before any work, the
exact marginals, the sampling run (``--time-limit``: :func:`pymc_lbp.cli.timed.sample_until`)
and its summary, and the mapping of errors to exit codes (:data:`pymc_lbp.cli.parser.EXIT_CODES`).
Every result file is written whole or not at all (:func:`~pymc_lbp.files.write_text_atomically`),
only after a run that was not cut short (:mod:`pymc_lbp.cli.interrupts`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pymc_lbp.cli.agreement import chain_disagreement, disagreement_warning
from pymc_lbp.cli.interrupts import (
    Interrupted,
    deferred_interrupts,
    own_interrupts_end_chains,
    raising_interrupts,
)
from pymc_lbp.cli.parser import (
    EXIT_DISAGREE,
    EXIT_FILE,
    EXIT_FORMAT,
    EXIT_IMPOSSIBLE,
    EXIT_INFEASIBLE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SAMPLING,
    EXIT_TOO_LARGE,
    EXIT_USAGE,
    CLIError,
)
from pymc_lbp.cli.samplers import (
    SamplerNotApplicableError,
    check_sampler,
    make_steps,
    steps_per_draw_for,
)
from pymc_lbp.files import write_text_atomically

DEFAULT_DRAWS = 1000
"""``--draws`` without ``--time-limit``."""

BYTES_PER_STATE = 100
"""Memory a run needs per state of the network (the sum of its cardinalities), at least: the
peak memory of ``mar`` grows by a little less than this per state when it computes, normalises
and writes a network's exact marginals as text (measured in docs/uai.md, "Command line").
Sampling needs more, so a network refused by this estimate cannot run at all."""


# --------------------------------------------------------------------------- the work
def run_mar(args: argparse.Namespace, out: Any, err: Any) -> int:
    """The ``mar`` command on parsed arguments: its exit code, the library's errors translated
    (:func:`_errors_to_exit_codes`) and reported by :func:`exit_code`. ``main`` runs it, and so
    does each of ``mar-batch``'s tasks."""

    def run() -> int:
        with _errors_to_exit_codes(args):
            return _run_mar(args, out, err)

    return exit_code(run, err)


def exit_code(run: Callable[[], int], err: Any) -> int:
    """``run()``'s exit code; a :class:`CLIError` is its code with one line on ``err``, Ctrl-C
    (SIGINT, or ``KeyboardInterrupt``) :data:`~pymc_lbp.cli.parser.EXIT_INTERRUPTED`."""
    try:
        with raising_interrupts():
            return run()
    except CLIError as exc:
        print(f"pymc_lbp: error: {exc}", file=err)
        return exc.code
    except (KeyboardInterrupt, Interrupted) as exc:
        print(f"pymc_lbp: error: interrupted{f': {exc}' if str(exc) else ''}", file=err)
        return EXIT_INTERRUPTED


@contextlib.contextmanager
def _errors_to_exit_codes(args: argparse.Namespace) -> Iterator[None]:
    """Translate the library's exceptions into :class:`CLIError` with an exit code.

    Also notes when the command started (``args.started``, before the heavy imports), from
    which ``--time-limit`` counts."""
    if not hasattr(args, "started"):
        args.started = time.perf_counter() - _process_age()
    from pymc_lbp.models.uai import (
        ImpossibleEvidenceError,
        NetworkTooLargeError,
        TreewidthTooLargeError,
        UAIFormatError,
    )

    try:
        yield
    except UAIFormatError as err:
        raise CLIError(f"malformed file: {err}", EXIT_FORMAT) from err
    except ImpossibleEvidenceError as err:
        raise CLIError(f"impossible evidence: {err}", EXIT_IMPOSSIBLE) from err
    except TreewidthTooLargeError as err:
        raise CLIError(f"exact marginals infeasible: {err}", EXIT_INFEASIBLE) from err
    except NetworkTooLargeError as err:
        raise CLIError(
            f"network too large for this machine: {args.network}: variable {err.variable} has "
            f"{err.cardinality} states; the marginals of all {err.states} states need about "
            f"{_gib(err.states * BYTES_PER_STATE)} of memory ({BYTES_PER_STATE} bytes per "
            f"state), {_gib(available_memory() or 0)} available",
            EXIT_TOO_LARGE,
        ) from err
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        reason = err.strerror or str(err)
        raise CLIError(f"{where}{reason}", EXIT_FILE) from err


def available_memory() -> int | None:
    """Bytes of memory a run can still use: ``MemAvailable`` of ``/proc/meminfo`` (else the
    physical memory), less where a cgroup (v2) limit leaves less; None where neither is known."""
    try:
        meminfo = Path("/proc/meminfo").read_text()
        free = int(re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.MULTILINE)[1]) * 1024
    except (OSError, TypeError):
        try:
            free = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            return None
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            free = min(free, int(limit) - used)
    return max(free, 0)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


_COUNTED_START = False


def _process_age() -> float:
    """Seconds since this process started when this is the first command of a process run as
    ``python -m pymc_lbp`` (its start-up and imports count against ``--time-limit``), else 0:
    ``main`` called from Python, a second command in one process, a worker process (e.g.
    ``mar-batch``'s) whose ``__main__`` is inherited."""
    global _COUNTED_START
    import multiprocessing

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    first, _COUNTED_START = not _COUNTED_START, True
    if not first or getattr(spec, "name", None) != "pymc_lbp.__main__":
        return 0.0
    if multiprocessing.parent_process() is not None:
        return 0.0
    try:  # Linux: the start time in clock ticks after boot, and the seconds since boot
        start_ticks = float(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _check_readable(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CLIError(f"{what} {path}: no such file", EXIT_FILE)
    if not p.is_file():
        raise CLIError(f"{what} {path}: not a regular file", EXIT_FILE)
    return p


def check_output(path: str) -> Path:
    """Check, before any work, that the MAR file ``path`` can be written.

    Refuses a path that ends with a path separator (``newdir/`` names a directory, although
    ``Path`` would drop the separator and write a file ``newdir``), an existing directory, a
    missing parent directory, a parent that is not a directory, and any path a probe open
    (append mode, so an existing file is left as it is; a file the probe creates is removed
    again) refuses: no permission, a read-only file system, a name too long, ...

    Raises
    ------
    CLIError
        With :data:`EXIT_FILE` and the reason.
    """
    separators = tuple(sep for sep in (os.sep, os.altsep, "/") if sep)
    if path.endswith(separators):
        raise CLIError(
            f"output {path}: ends with a path separator (a directory, not a file name)", EXIT_FILE
        )
    p = Path(path)
    try:  # stat and open may refuse too, e.g. a name too long for the file system
        if p.is_dir():
            raise CLIError(f"output {path}: is a directory", EXIT_FILE)
        if not p.parent.exists():
            raise CLIError(f"output {path}: directory {p.parent} does not exist", EXIT_FILE)
        if not p.parent.is_dir():
            raise CLIError(f"output {path}: {p.parent} is not a directory", EXIT_FILE)
        existed = p.exists()
        with open(p, "a"):
            pass
        if not existed:
            with contextlib.suppress(OSError):
                p.unlink()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CLIError(f"output {path}: cannot be written: {reason}", EXIT_FILE) from exc
    return p


def check_distinct(
    outputs: Sequence[tuple[str, str | Path]], inputs: Sequence[tuple[str, str | Path]]
) -> None:
    """Check, before any work, that no output is an input or another output.

    Two paths are one file when they resolve to the same path (links followed; a file that does
    not exist yet), or when both exist and are one file (``os.path.samefile``: the same device
    and inode, e.g. a hard link).

    Parameters
    ----------
    outputs, inputs : sequence of (what, path)
        ``what`` names the path in the message, e.g. ``("-o", "out.MAR")``.

    Raises
    ------
    CLIError
        With :data:`EXIT_USAGE`, naming both.
    """
    known: dict[object, tuple[str, str | Path]] = {}
    for what, path in inputs:
        for key in _file_keys(path):
            known.setdefault(key, (what, path))
    for what, path in outputs:
        keys = _file_keys(path)
        clash = next((known[key] for key in keys if key in known), None)
        if clash is not None:
            raise CLIError(
                f"{what} {path} is the same file as {clash[0]} {clash[1]}: writing it would "
                "overwrite that; give another path",
                EXIT_USAGE,
            )
        known.update(dict.fromkeys(keys, (what, path)))


def _file_keys(path: str | Path) -> list[object]:
    """What tells a file: its resolved path, and its device and inode where it exists."""
    resolved = Path(path).resolve()
    keys: list[object] = [resolved]
    with contextlib.suppress(OSError):
        stat = resolved.stat()
        keys.append((stat.st_dev, stat.st_ino))
    return keys


@contextlib.contextmanager
def _quiet_pymc(quiet: bool) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("pymc", "pymc_lbp")]
    levels = [logger.level for logger in loggers]
    if quiet:
        for logger in loggers:
            logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _summary(idata: Any, model: Any, seconds: float) -> list[str]:
    """Short ArviZ-based summary: Hamming-statistic ESS, acceptance, time."""
    import numpy as np

    from pymc_lbp.diagnostics import ess, hamming_trace, reference_state
    from pymc_lbp.models.uai import uai_variable_map

    info = uai_variable_map(model)
    cards = np.concatenate([info.network.cards[info.members[n]] for n in info.free_names])
    reference = reference_state(cards.size, cards, seed=12345)
    trace = hamming_trace(idata, list(info.free_names), reference)
    n_chains, n_draws = trace.shape
    hamming_ess = ess(trace)
    lines = [
        f"sampled {n_chains} chain(s) x {n_draws} draws of {cards.size} free variables "
        f"in {seconds:.1f} s",
        f"ESS of the Hamming statistic (ArviZ bulk): {hamming_ess:.1f} "
        f"({hamming_ess / max(seconds, 1e-9):.1f} per second)",
    ]
    stats = getattr(idata, "sample_stats", None)
    if stats is not None and "accept" in stats:
        accept = float(np.asarray(stats["accept"]).mean())
        line = f"mean acceptance probability: {accept:.3f}"
        if "sites_changed" in stats:
            line += f"; mean sites changed per draw: {float(stats['sites_changed'].mean()):.2f}"
        lines.append(line)
    else:
        lines.append("mean acceptance probability: n/a (the sampler records none)")
    if n_chains > 1 and np.ptp(np.asarray(trace)) > 0:
        import arviz as az

        rhat = float(az.rhat(np.asarray(trace)))
        lines.append(f"R-hat of the Hamming statistic: {rhat:.3f}")
    return lines


def _note_unused_evidence(network_path: Path, network: Any, err: Any) -> None:
    """Say so when ``NETWORK.uai.evid`` holds evidence that was not asked for."""
    from pymc_lbp.models.uai import UAIFormatError, read_evidence

    sibling = Path(f"{network_path}.evid")
    if not sibling.is_file():
        return
    try:
        found = read_evidence(sibling, network)
    except (UAIFormatError, OSError):
        return
    if found:
        print(
            f"note: {sibling} holds evidence on {len(found)} variable(s) but no --evidence was "
            "given; computing the marginals without evidence",
            file=err,
        )


def _run_mar(args: argparse.Namespace, out: Any, err: Any) -> int:
    from pymc_lbp.models.uai import ImpossibleEvidenceError, read_evidence, read_network

    # every check before any work: files, output, layout, sampler
    network_path = _check_readable(args.network, "network file")
    evidence_path = _check_readable(args.evidence, "evidence file") if args.evidence else None
    outputs = [("-o", args.output), ("--mcse", args.mcse)]
    inputs = [("the network file", args.network), ("the evidence file", args.evidence)]
    check_distinct([o for o in outputs if o[1]], [i for i in inputs if i[1]])
    output = check_output(args.output)
    mcse = check_output(args.mcse) if args.mcse else None
    _check_time_limit(args)
    free = available_memory()
    network = read_network(
        network_path, max_states=None if free is None else free // BYTES_PER_STATE
    )
    evidence = read_evidence(evidence_path, network)
    kind = None if args.kind == "file" else args.kind
    try:  # BAYES (asked for, or the file's): CPTs checked and rescaled as read_uai does them,
        # so the exact and the sampled marginals have one target
        target = network.normalised_cpts() if (kind or network.kind) == "BAYES" else network
    except ValueError as exc:  # not CPT-structured, or CPT rows that do not sum to 1
        raise CLIError(f"--kind {args.kind}: {exc}", EXIT_USAGE) from exc
    if args.exact and args.method == "sample":
        raise CLIError("--exact is --method exact: not with --method sample", EXIT_USAGE)
    method = "exact" if args.exact else args.method
    if args.strict and method == "sample" and args.chains < 2:
        raise CLIError("--strict compares chains: it needs --chains 2 or more", EXIT_USAGE)
    if method != "exact":
        try:
            check_sampler(args.sampler, network, evidence)
        except SamplerNotApplicableError as exc:
            raise CLIError(f"--sampler {args.sampler}: {exc}", EXIT_USAGE) from exc
    if evidence_path is None:
        _note_unused_evidence(network_path, network, err)
    try:
        chosen, why = _choose_method(method, args, target, evidence)
        print(f"method: {chosen} ({why})", file=out)
        if chosen == "exact":
            if args.time_limit is not None:
                print("--time-limit not used: the exact marginals need no sampling", file=out)
            code = _exact(args, target, evidence, (output, mcse), out)
            if mcse is not None:
                print(f"exact marginals: Monte Carlo standard errors 0 -> {mcse}", file=out)
        else:
            if args.strict and args.chains < 2:
                raise CLIError("--strict compares chains: it needs --chains 2 or more", EXIT_USAGE)
            code = _sample(args, network, target, kind, evidence, (output, mcse), out, err)
        if method == "auto" and not args.quiet:  # what auto chose, beside the log line
            print(f"pymc_lbp mar: {chosen} marginals ({why})", file=err)
        return code
    except ImpossibleEvidenceError as exc:
        raise _impossible_evidence(exc, evidence_path, network, evidence) from exc


def _impossible_evidence(
    exc: Any, evidence_path: Path | None, network: Any, evidence: dict[int, int]
) -> CLIError:
    """The command line's words for an :class:`ImpossibleEvidenceError`: the library's where
    it was proven (it names the factor or the exact check), else what was tried and what the
    user can do (the library's advice, a start state, has no option here)."""
    where = f"{evidence_path}: " if evidence_path is not None else ""
    if exc.definitive:
        return CLIError(f"impossible evidence: {where}{exc}", EXIT_IMPOSSIBLE)
    if evidence:
        shown = ", ".join(f"x{v}={x}" for v, x in list(evidence.items())[:8])
        more = f" and {len(evidence) - 8} more" if len(evidence) > 8 else ""
        what = f"the evidence {shown}{more}"
        fix = "check the evidence for a value the others rule out"
    else:
        what, fix = "the network", "check the zeros of the factors"
    return CLIError(
        f"the evidence appears impossible: {where}no state of non-zero probability agrees with "
        f"{what} (forward sampling and greedy repair found none, and no single factor rules it "
        "out; the network is too wide for the exact check); "
        f"{fix}, or write a feasible state of every variable to {network.path}.MAP "
        "(UAI MAP format) for the chains to start from",
        EXIT_IMPOSSIBLE,
    )


def _check_time_limit(args: argparse.Namespace) -> None:
    """``--time-limit`` needs sampling, and parallel chains that all run at once."""
    if args.time_limit is None:
        return
    if args.exact or args.method == "exact":
        raise CLIError("--time-limit budgets sampling: not with --method exact", EXIT_USAGE)
    if 1 < args.cores < args.chains:
        raise CLIError(
            f"--time-limit with parallel chains runs them all at once: --cores {args.cores} "
            f"< --chains {args.chains} would leave chains that never start (give --cores "
            f"{args.chains}, or --cores 1 to run them one after the other, sharing the time)",
            EXIT_USAGE,
        )


def _write_mcse(path: Path, errors: list) -> None:
    """The MCSE file: the MAR layout (``N card e .. card e ..``) under the header ``MCSE``;
    an entry ArviZ cannot estimate (fewer than 4 draws per chain) is ``nan``."""
    parts = [str(len(errors))]
    for e in errors:
        parts.append(str(len(e)))
        parts += [format(float(x), ".6g") for x in e]
    write_text_atomically(path, "MCSE\n" + " ".join(parts) + "\n")


def _choose_method(method: str, args: argparse.Namespace, network: Any, evidence: dict):
    """``(method, why)``: ``--method auto`` is exact when the elimination's largest table fits
    ``--max-table-size``, sampling otherwise; the others are what was asked."""
    if method != "auto":
        flag = "--exact" if args.exact else f"--method {method}"
        return method, f"{flag} given"
    from pymc_lbp.factor_graph.elimination import elimination_plan
    from pymc_lbp.models.uai.exact import DEFAULT_MAX_TABLE_SIZE

    limit = args.max_table_size or DEFAULT_MAX_TABLE_SIZE
    largest = elimination_plan(network, evidence).max_table_size
    if largest <= limit:
        return "exact", f"auto: elimination's largest table {largest} <= {limit} entries"
    return "sample", f"auto: elimination needs a table of {largest} > {limit} entries"


def _exact(args: argparse.Namespace, network: Any, evidence: dict, files: tuple, out: Any) -> int:
    """The exact marginals written to ``files`` (the MAR file and, with ``--mcse``, MCSE zeros)."""
    from pymc_lbp.models.uai import exact_marginals
    from pymc_lbp.models.uai.exact import DEFAULT_MAX_TABLE_SIZE

    size = args.max_table_size or DEFAULT_MAX_TABLE_SIZE
    t0 = time.perf_counter()
    marginals = exact_marginals(network, evidence, max_table_size=size)
    _write_results(files, marginals, [[0.0] * len(m) for m in marginals])
    print(
        f"exact marginals of {network.name} ({network.n_vars} variables, "
        f"{len(evidence)} evidence) in {time.perf_counter() - t0:.2f} s -> {files[0]}",
        file=out,
    )
    return EXIT_OK


def _write_results(files: tuple[Path, Path | None], marginals: list, errors: list | None) -> None:
    """The MAR file and, with ``--mcse``, the MCSE file (``errors``): both are written before an
    interrupt (Ctrl-C) takes effect."""
    from pymc_lbp.models.uai import write_mar

    output, mcse = files
    with deferred_interrupts():
        write_mar(output, marginals)
        if mcse is not None:
            _write_mcse(mcse, errors)


def _check_complete(idata: Any, chains: int, draws: int) -> None:
    """Raise :class:`Interrupted` unless ``pm.sample`` made every draw of every chain: PyMC
    returns the draws made so far when a chain is interrupted (a ``KeyboardInterrupt`` that did
    not reach this process's handler, e.g. sent to a chain's process alone)."""
    made = idata.posterior.sizes["chain"], idata.posterior.sizes["draw"]
    if made != (chains, draws):
        raise Interrupted(
            f"sampling stopped after {made[1]} of {draws} draws ({made[0]} of {chains} "
            "chains): no marginals written"
        )


def _describe_starts(starts: Any, sources: list[str]) -> str:
    """The start line's ``start: ...`` text: how the chains' states were found."""
    distinct = len({tuple(row) for row in starts.tolist()})
    if len(sources) == 1:
        return sources[0]
    if len(set(sources)) == 1:
        how = f"{sources[0]} per chain"
    else:
        how = ", ".join(f"chain {c}: {src}" for c, src in enumerate(sources))
    return f"{how} ({distinct} distinct of {len(sources)})"


def _sample(
    args: argparse.Namespace,
    network: Any,
    target: Any,
    kind: str | None,
    evidence: dict,
    files: tuple[Path, Path | None],
    out: Any,
    err: Any,
) -> int:
    import numpy as np
    import pymc as pm

    from pymc_lbp.models.uai import (
        random_feasible_states,
        read_uai,
        uai_marginal_mcse,
        uai_marginals,
        uai_point_from_state,
        uai_variable_map,
        write_mar,
    )

    output, mcse = files
    rb = args.estimator == "rao-blackwell"
    started, time_limit = args.started, args.time_limit
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**31)
    # one random feasible start per chain (the target's own CPTs with --kind BAYES)
    starts, sources = random_feasible_states(target, evidence, args.chains, rng=seed)
    model = read_uai(network, evidence, kind=kind, start=starts[0], seed=seed)
    info = uai_variable_map(model)
    n_free = int(sum(info.members[n].size for n in info.free_names))
    if n_free == 0:
        _write_results(files, uai_marginals({}, model), [[0.0] * int(k) for k in network.cards])
        print(f"{network.name}: every variable is fixed; wrote the deltas -> {output}", file=out)
        return EXIT_OK
    initvals = [uai_point_from_state(state, model) for state in starts]
    steps_per_draw = steps_per_draw_for(args.sampler, n_free, args.steps_per_draw)
    with model, _quiet_pymc(args.quiet):
        try:
            steps = make_steps(args.sampler, [model[n] for n in info.free_names], steps_per_draw)
        except SamplerNotApplicableError as exc:
            raise CLIError(f"--sampler {args.sampler}: {exc}", EXIT_USAGE) from exc
        kwargs = dict(
            tune=args.tune,
            chains=args.chains,
            cores=args.cores,
            step=steps,
            initvals=initvals,
            random_seed=seed,
            progressbar=not args.quiet,
            compute_convergence_checks=False,
        )
        if time_limit is None:
            draws = args.draws or DEFAULT_DRAWS
            t0 = time.perf_counter()
            try:
                idata = pm.sample(draws=draws, **kwargs)
            except pm.exceptions.SamplingError as exc:
                raise CLIError(f"sampling failed: {exc}", EXIT_SAMPLING) from exc
            seconds = time.perf_counter() - t0
            _check_complete(idata, args.chains, draws)
            errors = uai_marginal_mcse(idata, model, rao_blackwellize=rb) if mcse else None
            _write_results(files, uai_marginals(idata, model, rao_blackwellize=rb), errors)
            budget_lines: list[str] = []
        else:
            from pymc_lbp.cli.timed import NoDrawsError, sample_until

            try:  # the watchdog's interrupts end chains, a user's Ctrl-C the run
                with own_interrupts_end_chains():
                    run = sample_until(pm, info, kwargs, args, started, time_limit, rb)
            except NoDrawsError as exc:  # no draw in time: the exact marginals where they fit
                chosen, why = _choose_method("auto", args, target, evidence)
                if chosen != "exact":
                    raise
                code = _exact(args, target, evidence, files, out)
                print(
                    f"pymc_lbp mar: --time-limit {time_limit:g} s: {exc.why}: exact marginals "
                    f"instead ({why}), written {time.perf_counter() - started:.2f} s after the "
                    "start",
                    file=err,
                )
                return code
            seconds = run.seconds
            with deferred_interrupts():  # the MAR file at once, then the MCSE file: both
                write_mar(output, run.recorder.marginals())
                written = time.perf_counter() - started
                idata = run.inference_data()
                if mcse is not None:
                    _write_mcse(mcse, uai_marginal_mcse(idata, model, rao_blackwellize=rb))
            budget_lines = run.report(written)
            print(budget_lines[-1], file=err)
    if args.sampler == "pymc_gibbs":
        spd = "one sweep"
    else:
        spd = ", ".join(str(s.steps_per_draw) for s in steps if hasattr(s, "steps_per_draw"))
    print(
        f"{network.name}: {args.sampler}, steps_per_draw={spd}, seed={seed}, "
        f"start: {_describe_starts(starts, sources)}",
        file=out,
    )
    for line in budget_lines[:-1]:
        print(line, file=out)
    for line in _summary(idata, model, seconds):
        print(line, file=out)
    print(f"marginals -> {output} (estimator: {args.estimator})", file=out)
    if mcse is not None:
        print(f"Monte Carlo standard errors (ArviZ mcse) -> {mcse}", file=out)
    disagree = chain_disagreement(idata, model)
    if disagree:
        print(disagreement_warning(disagree, args.chains, n_free, args.sampler), file=err)
        if args.strict:
            raise CLIError(
                f"--strict: the chains disagree on {len(disagree)} variable(s): the marginals "
                f"in {output} are not certified",
                EXIT_DISAGREE,
            )
    return EXIT_OK
