"""Command line: ``python -m pymc_lbp mar NETWORK.uai [options] -o OUT.MAR`` and
``python -m pymc_lbp mar-batch NETWORK.uai... --out DIR [--scheduler ADDRESS | --workers N]
[mar's options]``.

``mar`` builds the PyMC model of a UAI network (:func:`pymc_lbp.models.uai.read_uai`), samples it
with one of the samplers in :data:`SAMPLERS` through ``pm.sample`` (PyMC's progress bar), writes
the per-variable marginals in the UAI ``MAR`` format and prints a short ArviZ-based summary. The
marginals are Rao-Blackwellised by default (each draw's full conditionals of every variable
given its Markov blanket, averaged: :mod:`pymc_lbp.models.uai.rao_blackwell`; ``--estimator
counts`` for plain frequencies; ``--mcse FILE`` for their Monte Carlo standard errors).
``--time-limit SECONDS`` samples until a budget is spent (:mod:`pymc_lbp.cli.timed`). With
``--method exact`` (or ``auto`` where the elimination fits) it writes the exact marginals
(bucket-tree elimination) instead.

Every chain starts from its own feasible state drawn at random
(:func:`~pymc_lbp.models.uai.random_feasible_states`: exact posterior samples where the network
is small enough, otherwise forward sampling or greedy repair per chain). After sampling the
chains are compared (:func:`chain_disagreement`): where zero factors split the states into
regions the sampler never leaves, chains that started in different regions disagree, and a
``warning: ...`` line on stderr names the variables (with ``--strict`` the exit code is 7). The
default sampler, ``block_gibbs``, draws blocks of all variables but a small cutset from their
exact conditional by variable elimination (:mod:`pymc_lbp.samplers.block.elimination`; one block,
independent exact draws, where the network fits), so its moves cross that determinism.

Every input is checked before any work (reading, compiling, sampling): the network and evidence
files must be readable files, the output must be writable (not a directory, not a name ending
with a path separator, its directory must exist, a probe open must succeed) and no output may be
an input or another output, ``--seed`` must be >= 0, the network must fit the memory available
(:data:`~pymc_lbp.cli.mar.BYTES_PER_STATE` per state, judged from its header before its tables
are read), the sampler must apply to the network, ``--strict`` needs two chains or more, and
with ``--kind BAYES`` every CPT row must sum to 1 (:meth:`UAINetwork.normalised_cpts`, the same
check for the exact and the sampled paths). Result files are written whole or not at all (a
temporary file, then ``os.replace``), and never from a run that Ctrl-C cut short
(:mod:`pymc_lbp.cli.interrupts`).

The module imports only the standard library and numpy at import time; PyMC, PyTensor, ArviZ and
the samplers are imported inside the functions that use them, so ``--help`` answers at once.

Exit codes (:data:`EXIT_CODES`):

=====  ======================================================================
0      success
1      sampling failed (PyMC raised a SamplingError; --time-limit ran out before a draw
       after tuning)
2      usage error (bad or missing arguments; argparse)
3      a file is missing or cannot be read or written
4      a file is malformed (UAIFormatError: the message names file, line, token)
5      the evidence is impossible (probability zero)
6      ``--exact`` is infeasible: the elimination table would be too large
7      ``--strict``: the chains disagree, the marginals are not certified
8      ``mar-batch``: some networks failed (their rows in ``DIR/summary.csv`` say why)
9      the network needs more memory than is available (refused before it is read)
130    interrupted (Ctrl-C): no result of the cut-short run is written
=====  ======================================================================

Every error is printed as one line ``pymc_lbp: error: ...`` on stderr, without a traceback.

``mar-batch`` (:mod:`pymc_lbp.cli.batch`, the optional extra ``pymc_lbp[dask]``) runs ``mar``
on many networks, one Dask task each (a local cluster of ``--workers`` processes on
127.0.0.1, its dashboard off unless ``--dashboard``, or ``--scheduler ADDRESS``), with
``NETWORK.uai.evid`` as the evidence where it is beside the network, and writes
``DIR/NETWORK.MAR`` and ``DIR/summary.csv`` + ``summary.md``; a failing network is a row with
its exit code and error, and the batch then exits with 8.

This module holds :func:`main`; the exit codes and the argument parser are in
:mod:`pymc_lbp.cli.parser`, the ``mar`` command's work in :mod:`pymc_lbp.cli.mar`, the
``--sampler`` names and factories in :mod:`pymc_lbp.cli.samplers` and the chains' agreement in
:mod:`pymc_lbp.cli.agreement`.
"""

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
