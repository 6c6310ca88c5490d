"""The command line's exit codes (:data:`EXIT_CODES`), its one-line error (:class:`CLIError`)
and its argument parser (:func:`build_parser`).

Used by :func:`pymc_lbp.cli.main` and :mod:`pymc_lbp.cli.mar`; the public names are importable
from :mod:`pymc_lbp.cli` too.
"""

from __future__ import annotations

import argparse
import math
import textwrap

from pymc_lbp.cli.samplers import DEFAULT_SAMPLER, SAMPLER_HELP, SAMPLERS

EXIT_OK = 0
EXIT_SAMPLING = 1
EXIT_USAGE = 2
EXIT_FILE = 3
EXIT_FORMAT = 4
EXIT_IMPOSSIBLE = 5
EXIT_INFEASIBLE = 6
EXIT_DISAGREE = 7
EXIT_BATCH_FAILED = 8
EXIT_TOO_LARGE = 9
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_SAMPLING: "sampling failed (or --time-limit ran out before a draw after tuning)",
    EXIT_USAGE: "usage error (bad or missing arguments)",
    EXIT_FILE: "a file is missing or cannot be read or written",
    EXIT_FORMAT: "a file is malformed (the message names the file, line and token)",
    EXIT_IMPOSSIBLE: "the evidence is impossible (probability zero)",
    EXIT_INFEASIBLE: "--exact is infeasible (the elimination table would be too large)",
    EXIT_DISAGREE: "chains disagree: the marginals are not certified (--strict)",
    EXIT_BATCH_FAILED: "mar-batch: some networks failed (their rows in DIR/summary.csv say why)",
    EXIT_TOO_LARGE: "the network needs more memory than is available (refused before reading it)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C): no result of the cut-short run is written",
}


class CLIError(Exception):
    """An error the command line reports as one line, with its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- argument parsing
def _exit_code_epilog() -> str:
    lines = ["exit codes:"]
    lines += [f"  {code}  {text}" for code, text in EXIT_CODES.items()]
    return "\n".join(lines)


def _sampler_epilog() -> str:
    width = max(map(len, SAMPLER_HELP))
    lines = ["samplers:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in SAMPLER_HELP.items()]
    return "\n".join(lines)


def _int_at_least(minimum: int, name: str):
    """An argparse type: an integer of at least ``minimum`` (``name`` says what it must be)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {name}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_nonnegative_int = _int_at_least(0, "an integer >= 0")


def _path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("the path is empty")
    return text


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text}")
    return value


ESTIMATORS = ("rao-blackwell", "counts")
"""``mar --estimator``: averaged full conditionals (Rao-Blackwellised) or frequencies."""

METHODS = ("auto", "exact", "sample")
"""``mar --method``: exact where elimination fits, else sampling; always exact; always sampled."""


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m pymc_lbp`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m pymc_lbp",
        description="pymc_lbp command line: sample UAI networks with PyMC.",
        epilog=_exit_code_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    mar = sub.add_parser(
        "mar",
        help="marginals of a UAI network (sampled, or exact) written as a MAR file",
        description=(
            "Write the per-variable marginals of a UAI network in the UAI MAR format: exact "
            "(variable elimination) where its tables fit, else sampled with pm.sample "
            "(--method). Evidence variables are fixed and written as 0/1 deltas."
        ),
        epilog=_sampler_epilog() + "\n\n" + _exit_code_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mar.add_argument("network", metavar="NETWORK.uai", type=_path, help="the network file")
    mar.add_argument(
        "-o", "--output", metavar="OUT.MAR", type=_path, required=True, help="MAR file to write"
    )
    mar.add_argument(
        "--evidence", metavar="FILE", type=_path, help="evidence file (.evid); default: none"
    )
    mar.add_argument(
        "--sampler",
        choices=list(SAMPLERS),
        default=DEFAULT_SAMPLER,
        metavar="NAME",
        help=f"one of {', '.join(SAMPLERS)} (default: {DEFAULT_SAMPLER}; see 'samplers' below)",
    )
    mar.add_argument(
        "--draws",
        type=_positive_int,
        default=None,
        help="draws per chain (default 1000); with --time-limit the most draws a chain makes "
        "(default: as many as fit 128 MiB of trace per chain, at most 10^6)",
    )
    mar.add_argument(
        "--time-limit",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="sample until SECONDS after the start of the command (reading and compiling "
        "included), then write the marginals of every draw made (anytime, as in the UAI "
        "competitions); chains run one after the other share the time, parallel chains "
        "(--cores > 1) run all at once and need --cores >= --chains",
    )
    mar.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="rao-blackwell",
        help="marginals from the draws: rao-blackwell (default: every draw adds each free "
        "variable's full conditional given its Markov blanket) or counts (the fraction of "
        "draws in each value)",
    )
    mar.add_argument(
        "--mcse",
        metavar="FILE",
        type=_path,
        default=None,
        help="also write the Monte Carlo standard error of every marginal entry (ArviZ's "
        "mcse of the per-draw values) to FILE, laid out as the MAR file under the header MCSE",
    )
    mar.add_argument("--tune", type=_nonnegative_int, default=200, help="tuning draws (200)")
    mar.add_argument("--chains", type=_positive_int, default=2, help="chains (2)")
    mar.add_argument("--cores", type=_positive_int, default=1, help="parallel processes (1)")
    mar.add_argument(
        "--seed", type=_nonnegative_int, default=None, help="random seed >= 0 (default: random)"
    )
    mar.add_argument(
        "--steps-per-draw",
        type=_positive_int,
        default=None,
        help="MH steps per recorded draw (default: half the number of free variables; "
        "block_gibbs and neural_block: one sweep of their blocks; ignored by pymc_gibbs, whose "
        "draw is one sweep)",
    )
    mar.add_argument(
        "--kind",
        choices=("MARKOV", "BAYES", "file"),
        default="MARKOV",
        help="model layout: MARKOV (default; factor potentials, fastest to sample), BAYES "
        "(CPTs; needs a CPT-structured file whose rows sum to 1, checked for --exact too) or as "
        "the file declares; the target is the same",
    )
    mar.add_argument(
        "--method",
        choices=METHODS,
        default="auto",
        help="auto (default): exact marginals (variable elimination) when the elimination's "
        "largest table fits --max-table-size, sampling otherwise; exact: elimination or exit "
        "code 6; sample: always sample. The run says which it used and why",
    )
    mar.add_argument("--exact", action="store_true", help="the same as --method exact")
    mar.add_argument(
        "--max-table-size",
        type=_positive_int,
        default=None,
        help="largest elimination table allowed (--method auto or exact), in entries "
        "(default 2^27, ~1 GiB)",
    )
    mar.add_argument(
        "--strict",
        action="store_true",
        help="exit with code 7 when the chains disagree (the marginals are not certified); "
        "needs --chains 2 or more",
    )
    mar.add_argument(
        "--quiet", action="store_true", help="no progress bar and no PyMC log messages"
    )
    _add_mar_batch(sub, mar)
    return parser


BATCH_OWN = frozenset({"network", "output", "evidence", "seed", "mcse", "help"})
"""``mar``'s arguments that ``mar-batch`` does not forward: it sets them per network
(``--mcse``: a flag of its own, ``DIR/NETWORK.MCSE`` for each network)."""


def _add_mar_batch(sub: argparse._SubParsersAction, mar: argparse.ArgumentParser) -> None:
    """The ``mar-batch`` subparser: its own options, then every ``mar`` option but
    :data:`BATCH_OWN`, shared with ``mar`` (the same argparse actions, as ``parents=`` shares
    them), so an option added to ``mar`` is listed, checked and forwarded by ``mar-batch`` too.
    The shared actions are in ``args.forward_actions`` (see :mod:`pymc_lbp.cli.batch`)."""
    batch = sub.add_parser(
        "mar-batch",
        help="marginals of many UAI networks, one mar run per network on a Dask cluster",
        description=textwrap.fill(
            "Run 'mar' on every NETWORK.uai as one task on Dask (a local cluster of --workers "
            "processes, or the cluster behind --scheduler), with NETWORK.uai.evid as the "
            "evidence when it is beside the network; write DIR/NETWORK.MAR, DIR/NETWORK.log "
            "and DIR/summary.csv + summary.md (method, seconds, draws, mean and max absolute "
            "marginal error vs NETWORK.uai.MAR when present, exit code, error). A failing "
            "network is a row, not the end of the batch. Needs the dask extra: "
            "pip install 'pymc_lbp[dask]'.",
            width=88,
        ),
        epilog=(
            "exit codes:\n"
            f"  {EXIT_OK}  every network succeeded\n"
            f"  {EXIT_USAGE}  usage error (bad or missing arguments, two networks of one name, a "
            "result file that is an input)\n"
            f"  {EXIT_FILE}  DIR cannot be written, the dask extra (or bokeh for --dashboard) is "
            "missing, or the scheduler cannot be reached\n"
            f"  {EXIT_BATCH_FAILED}  {EXIT_CODES[EXIT_BATCH_FAILED]}\n"
            f"  {EXIT_INTERRUPTED}  interrupted (Ctrl-C): the networks that finished have their "
            "results and rows, the others a row that says so\n\n"
            "a network's own row has mar's exit code (see 'mar --help')"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    batch.add_argument(
        "networks", metavar="NETWORK.uai", type=_path, nargs="+", help="the network files"
    )
    batch.add_argument(
        "--out", metavar="DIR", type=_path, required=True, help="directory of the results (created)"
    )
    where = batch.add_mutually_exclusive_group()
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a running Dask scheduler (tcp://host:port); its workers must see the files "
        "under the same paths and should run one thread each",
    )
    where.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="worker processes of the local cluster, one thread each (default: one per "
        "network, at most the number of CPUs)",
    )
    batch.add_argument(
        "--dashboard",
        action="store_true",
        help="open the local cluster's Dask dashboard on 127.0.0.1, on a port the system "
        "chooses, and print its address on stderr (default: no dashboard; it needs bokeh; not "
        "with --scheduler, whose cluster has its own)",
    )
    batch.add_argument(
        "--seed",
        type=_nonnegative_int,
        default=None,
        help="base seed: network i gets the i-th seed of numpy's SeedSequence(SEED).spawn, "
        "so every network has its own reproducible seed (default: random)",
    )
    batch.add_argument(
        "--mcse",
        action="store_true",
        help="also write each network's Monte Carlo standard errors to DIR/NETWORK.MCSE "
        "(mar's --mcse FILE, per network)",
    )
    shared = batch.add_argument_group("mar's options, passed to every network's run")
    forwarded = []
    for action in mar._actions:  # argparse's own parents= reads the same private list
        if action.dest not in BATCH_OWN:
            shared._add_action(action)
            forwarded.append(action)
    batch.set_defaults(forward_actions=tuple(forwarded))
