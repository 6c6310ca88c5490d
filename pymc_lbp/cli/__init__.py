"""Command line: ``python -m pymc_lbp mar NETWORK.uai [options] -o OUT.MAR`` and
``python -m pymc_lbp mar-batch NETWORK.uai... --out DIR [--scheduler ADDRESS | --workers N]
[mar's options]``.

``mar`` builds the PyMC model of a UAI network (:func:`pymc_lbp.models.uai.read_uai`), samples it
with one of the samplers in :data:`SAMPLERS` through ``pm.sample`` (PyMC's progress bar), writes
the per-variable marginals in the UAI ``MAR`` format and prints a short ArviZ-based summary. The
marginals are Rao-Blackwellised by default (:mod:`pymc_lbp.models.uai.rao_blackwell`;
``--estimator counts`` for plain frequencies; ``--mcse FILE`` for their Monte Carlo standard
errors). ``--time-limit SECONDS`` samples until a budget is spent (:mod:`pymc_lbp.cli.timed`).
With ``--method exact`` (or ``auto`` where the elimination fits) it writes the exact marginals
(bucket-tree elimination) instead.

Every chain starts from its own random feasible state
(:func:`~pymc_lbp.models.uai.random_feasible_states`); after sampling the chains are compared
(:func:`chain_disagreement`): where zero factors split the states into regions the sampler never
leaves, chains that started in different regions disagree, and a ``warning: ...`` line on stderr
names the variables (with ``--strict`` the exit code is 7). The default sampler, ``block_gibbs``,
draws blocks of all variables but a small cutset from their exact conditional
(:mod:`pymc_lbp.samplers.block.elimination`), so its moves cross that determinism.

Every input is checked before any work (reading, compiling, sampling): the files, the outputs
(writable, none an input or another output), ``--seed``, the memory the network needs
(:data:`~pymc_lbp.cli.mar.BYTES_PER_STATE` per state, judged from its header), the sampler,
``--strict`` (two chains or more) and, with ``--kind BAYES``, that every CPT row sums to 1.
Result files are written whole or not at all, and never from a run that Ctrl-C cut short
(:mod:`pymc_lbp.cli.interrupts`). Every error is one line ``pymc_lbp: error: ...`` on stderr,
without a traceback, and exits with a code of :data:`EXIT_CODES`.

The package imports only the standard library and numpy at import time; PyMC, PyTensor, ArviZ,
Dask and the samplers are imported inside the functions that use them, so ``--help`` answers at
once.

``mar-batch`` (:mod:`pymc_lbp.cli.batch`, the optional extra ``pymc_lbp[dask]``) runs ``mar``
on many networks, one Dask task each, and writes ``DIR/NETWORK.MAR`` and ``DIR/summary.csv`` +
``summary.md``; a failing network is a row with its exit code and error.

This module holds :func:`main`; the exit codes and the argument parser are in
:mod:`pymc_lbp.cli.parser`, the ``mar`` command's work in :mod:`pymc_lbp.cli.mar`, the
``--sampler`` names and factories in :mod:`pymc_lbp.cli.samplers` and the chains' agreement in
:mod:`pymc_lbp.cli.agreement`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from pymc_lbp.cli.agreement import (
    chain_disagreement,
    disagreement_warning,  # noqa: F401 (re-exported)
)
from pymc_lbp.cli.mar import check_output, exit_code, run_mar  # noqa: F401 (check_output re-exported)
from pymc_lbp.cli.parser import (
    EXIT_CODES,
    EXIT_DISAGREE,  # noqa: F401 (re-exported)
    EXIT_FILE,  # noqa: F401 (re-exported)
    EXIT_FORMAT,  # noqa: F401 (re-exported)
    EXIT_IMPOSSIBLE,  # noqa: F401 (re-exported)
    EXIT_INFEASIBLE,  # noqa: F401 (re-exported)
    EXIT_INTERRUPTED,  # noqa: F401 (re-exported)
    EXIT_OK,  # noqa: F401 (re-exported)
    EXIT_SAMPLING,  # noqa: F401 (re-exported)
    EXIT_USAGE,  # noqa: F401 (re-exported)
    build_parser,
)
from pymc_lbp.cli.samplers import (
    DEFAULT_SAMPLER,  # noqa: F401 (re-exported)
    SAMPLER_HELP,
    SAMPLERS,
    SamplerNotApplicableError,
    check_sampler,
    default_steps_per_draw,
    grid_blocks,
    make_steps,
    steps_per_draw_for,
)

__all__ = [
    "EXIT_CODES",
    "SAMPLERS",
    "SAMPLER_HELP",
    "SamplerNotApplicableError",
    "build_parser",
    "chain_disagreement",
    "check_sampler",
    "default_steps_per_draw",
    "grid_blocks",
    "main",
    "make_steps",
    "steps_per_draw_for",
]


def main(argv: Sequence[str] | None = None, *, stdout: Any = None, stderr: Any = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).
    stdout, stderr : file-like, optional
        Where to print (default: the ``sys`` streams).

    Returns
    -------
    int
        The exit code (see :data:`EXIT_CODES`). Usage errors exit through ``SystemExit(2)``
        raised by argparse. Ctrl-C (SIGINT, or ``KeyboardInterrupt``) is
        :data:`~pymc_lbp.cli.parser.EXIT_INTERRUPTED` with one line on ``stderr``.
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    if args.command == "mar-batch":
        from pymc_lbp.cli.batch import run_batch  # Dask only here: --help stays instant

        return exit_code(lambda: run_batch(args, out, err), err)
    return run_mar(args, out, err)
