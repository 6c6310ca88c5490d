"""The command line's exit codes (:data:`EXIT_CODES`), its one-line error (:class:`CLIError`)
and its argument parser (:func:`build_parser`).

Used by :func:`pymc_lbp.cli.main` and :mod:`pymc_lbp.cli.mar`; the public names are importable
from :mod:`pymc_lbp.cli` too.
"""

from __future__ import annotations

import argparse

from pymc_lbp.cli.samplers import (
    DEFAULT_SAMPLER,
    RENAMED_SAMPLERS,
    SAMPLER_HELP,
    SAMPLERS,
)

EXIT_OK = 0
EXIT_SAMPLING = 1
EXIT_USAGE = 2
EXIT_FILE = 3
EXIT_FORMAT = 4
EXIT_IMPOSSIBLE = 5
EXIT_INFEASIBLE = 6
EXIT_DISAGREE = 7

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_SAMPLING: "sampling failed",
    EXIT_USAGE: "usage error (bad or missing arguments)",
    EXIT_FILE: "a file is missing or cannot be read or written",
    EXIT_FORMAT: "a file is malformed (the message names the file, line and token)",
    EXIT_IMPOSSIBLE: "the evidence is impossible (probability zero)",
    EXIT_INFEASIBLE: "--exact is infeasible (the elimination table would be too large)",
    EXIT_DISAGREE: "chains disagree: the marginals are not certified (--strict)",
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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


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
            "(--method). "
            "Evidence variables are fixed and written as 0/1 deltas."
        ),
        epilog=_sampler_epilog() + "\n\n" + _exit_code_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mar.add_argument("network", metavar="NETWORK.uai", help="the network file")
    mar.add_argument("-o", "--output", metavar="OUT.MAR", required=True, help="MAR file to write")
    mar.add_argument("--evidence", metavar="FILE", help="evidence file (.evid); default: none")
    mar.add_argument(
        "--sampler",
        choices=[*SAMPLERS, *RENAMED_SAMPLERS],
        default=DEFAULT_SAMPLER,
        metavar="NAME",
        help=f"one of {', '.join(SAMPLERS)} (default: {DEFAULT_SAMPLER}; see 'samplers' below)",
    )
    mar.add_argument("--draws", type=_positive_int, default=1000, help="draws per chain (1000)")
    mar.add_argument("--tune", type=_nonnegative_int, default=200, help="tuning draws (200)")
    mar.add_argument("--chains", type=_positive_int, default=2, help="chains (2)")
    mar.add_argument("--cores", type=_positive_int, default=1, help="parallel processes (1)")
    mar.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
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
    mar.add_argument(
        "--exact",
        action="store_true",
        help="the same as --method exact",
    )
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
    return parser
