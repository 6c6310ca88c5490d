"""Command line: ``python -m pymc_lbp mar NETWORK.uai [options] -o OUT.MAR``.

``mar`` builds the PyMC model of a UAI network (:func:`pymc_lbp.models.uai.read_uai`), samples it
with one of the samplers in :data:`SAMPLERS` through ``pm.sample`` (PyMC's progress bar), writes
the per-variable marginal frequencies in the UAI ``MAR`` format and prints a short ArviZ-based
summary. With ``--exact`` it writes the exact marginals (bucket-tree elimination) instead.

Every chain starts from its own feasible state drawn at random
(:func:`~pymc_lbp.models.uai.random_feasible_states`: exact posterior samples where the network
is small enough, otherwise forward sampling or greedy repair per chain). After sampling the
chains are compared (:func:`chain_disagreement`): where zero factors split the states into
regions the sampler never leaves, chains that started in different regions disagree, and a
``warning: ...`` line on stderr names the variables (with ``--strict`` the exit code is 7). The
default sampler, ``block_gibbs``, resamples clusters of variables from their exact conditional
(:func:`~pymc_lbp.models.uai.uai_clusters`: every deterministic factor inside one block), so
its moves cross that determinism.

Every input is checked before any work (reading, compiling, sampling): the network and evidence
files must be readable files, the output must be writable (not a directory, not a name ending
with a path separator, its directory must exist, a probe open must succeed), the sampler must
apply to the network, ``--strict`` needs two chains or more, and with
``--kind BAYES`` every CPT row must sum to 1 (:meth:`UAINetwork.normalised_cpts`, the same check
for the exact and the sampled paths).

The module imports only the standard library and numpy at import time; PyMC, PyTensor, ArviZ and
the samplers are imported inside the functions that use them, so ``--help`` answers at once.

Exit codes (:data:`EXIT_CODES`):

=====  ======================================================================
0      success
1      sampling failed (e.g. PyMC raised a SamplingError)
2      usage error (bad or missing arguments; argparse)
3      a file is missing or cannot be read or written
4      a file is malformed (UAIFormatError: the message names file, line, token)
5      the evidence is impossible (probability zero)
6      ``--exact`` is infeasible: the elimination table would be too large
7      ``--strict``: the chains disagree, the marginals are not certified
=====  ======================================================================

Every error is printed as one line ``pymc_lbp: error: ...`` on stderr, without a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

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

#: Joint states of a ``block_gibbs`` block (:func:`~pymc_lbp.models.uai.uai_clusters`; its
#: ``DEFAULT_MAX_STATES``, written out here so that importing the CLI stays light).
BLOCK_GIBBS_MAX_STATES = 1024
#: ``block_gibbs`` refuses a network with a deterministic factor of more joint states (a block
#: holds it whole, and an exact update enumerates every joint state of its block).
BLOCK_GIBBS_MAX_EXACT = 65536

#: :func:`chain_disagreement`: R-hat of a value's indicator above which the chains disagree.
DISAGREEMENT_RHAT = 1.05
#: :func:`chain_disagreement`: a chain never visits a value another chain spends this share in.
DISAGREEMENT_SHARE = 0.5

#: A sampler factory: ``factory(value_vars, steps_per_draw) -> step or list of steps``, called
#: inside the model context (a :func:`~pymc_lbp.models.uai.read_uai` model) with the model's free
#: (discrete) variables. ``steps_per_draw=None`` means the sampler's own sweep (only for the
#: samplers whose :data:`DEFAULT_STEPS_PER_DRAW` is ``"sweep"``). Every option the command line
#: means is passed explicitly, so a change of a step class's defaults does not change it.
SamplerFactory = Callable[[list, "int | None"], Any]


def _gibbs_with_gradients(vars: list, steps_per_draw: int | None) -> Any:
    from pymc_lbp.step_methods import GibbsWithGradients

    return GibbsWithGradients(vars, steps_per_draw=_explicit(steps_per_draw))


def _locally_balanced(vars: list, steps_per_draw: int | None) -> Any:
    from pymc_lbp.step_methods import LocallyBalanced

    return LocallyBalanced(
        vars, balancing="sqrt", differences="exact", steps_per_draw=_explicit(steps_per_draw)
    )


def _path_auxiliary(vars: list, steps_per_draw: int | None) -> Any:
    """PathAuxiliaryLBP with gradient differences (the PAS paper's sampler; exact on the
    multilinear binary UAI models) and the path length tuned to 0.574 acceptance."""
    from pymc_lbp.step_methods import PathAuxiliaryLBP

    return PathAuxiliaryLBP(
        vars, balancing="sqrt", differences="gradient", steps_per_draw=_explicit(steps_per_draw)
    )


def _self_balancing(vars: list, steps_per_draw: int | None) -> Any:
    """SelfBalancing (LSB1: learned mixture of balancing functions) with exact differences,
    learning during tuning only."""
    from pymc_lbp.step_methods import SelfBalancing

    return SelfBalancing(
        vars,
        balancing="lsb1",
        differences="exact",
        steps_per_draw=_explicit(steps_per_draw),
    )


def _neural_block(vars: list, steps_per_draw: int | None) -> Any:
    """NeuralBlock with the shipped ``grid-bn`` proposal on the 3 x 3 grid-BN motif blocks;
    ``steps_per_draw=None``: one sweep over its update units (blocks and uncovered sites)."""
    import pymc as pm

    from pymc_lbp.samplers.block.neural_proposal import load_proposal
    from pymc_lbp.step_methods.neural_block import NeuralBlock

    model = pm.modelcontext(None)
    network = getattr(getattr(model, "uai_info", None), "network", None)
    if network is None:
        raise SamplerNotApplicableError("neural_block needs a model built by read_uai")
    blocks = grid_blocks(network)
    return NeuralBlock(
        vars, blocks=blocks, proposal=load_proposal("grid-bn"), steps_per_draw=steps_per_draw
    )


def _block_gibbs(vars: list, steps_per_draw: int | None) -> Any:
    """NeuralBlock with ``proposal="exact"`` on the network's clusters
    (:func:`~pymc_lbp.models.uai.uai_clusters`: every deterministic factor inside one block,
    min-fill blocks of up to :data:`BLOCK_GIBBS_MAX_STATES` joint states): exact block Gibbs,
    whose moves cross determinism; ``steps_per_draw=None``: one update per block on average."""
    import pymc as pm

    from pymc_lbp.models.uai.clusters import uai_clusters
    from pymc_lbp.samplers.block.motifs.uai_blocks import uai_exact_blocks
    from pymc_lbp.step_methods.neural_block import NeuralBlock

    model = pm.modelcontext(None)
    info = getattr(model, "uai_info", None)
    if info is None:
        raise SamplerNotApplicableError("block_gibbs needs a model built by read_uai")
    clusters = uai_clusters(info.network, info.evidence, max_states=BLOCK_GIBBS_MAX_STATES)
    cards = info.network.cards
    largest = max(math.prod(int(cards[v]) for v in block) for block in clusters)
    return NeuralBlock(
        vars,
        blocks=uai_exact_blocks(info.network, clusters),
        proposal="exact",
        steps_per_draw=steps_per_draw,
        differences="auto",
        max_exact_states=max(largest, BLOCK_GIBBS_MAX_STATES),
        compiled="auto",
    )


def _pymc_gibbs(vars: list, steps_per_draw: int | None) -> list:
    """PyMC's own choice for these variables (what ``pm.sample()`` assigns with no ``step``):
    BinaryGibbsMetropolis for the Bernoulli ones, CategoricalGibbsMetropolis for the others; one
    draw is one sweep over all sites, so ``steps_per_draw`` is ignored."""
    import pymc as pm

    binary = [v for v in vars if _is_bernoulli(v)]
    other = [v for v in vars if not _is_bernoulli(v)]
    steps = []
    if binary:
        steps.append(pm.BinaryGibbsMetropolis(binary))
    if other:
        steps.append(pm.CategoricalGibbsMetropolis(other))
    return steps


def _explicit(steps_per_draw: int | None) -> int:
    if steps_per_draw is None:
        raise ValueError("this sampler needs an explicit steps_per_draw")
    return steps_per_draw


def _is_bernoulli(var: Any) -> bool:
    """Whether a random variable (or its value variable) is a Bernoulli."""
    import pymc as pm
    from pytensor.tensor.random.basic import BernoulliRV

    rv = pm.modelcontext(None).values_to_rvs.get(var, var)
    return rv.owner is not None and isinstance(rv.owner.op, BernoulliRV)


class SamplerNotApplicableError(ValueError):
    """The chosen sampler cannot sample this network (the message says why)."""


def grid_blocks(network: Any) -> Any:
    """The grid-BN motif blocks of ``network`` for ``neural_block``.

    Raises
    ------
    SamplerNotApplicableError
        The network is not a binary N x N grid Bayesian network with N >= 3 (the motif of the
        shipped ``grid-bn`` proposal).
    """
    from pymc_lbp.samplers.block.motifs.grid_bn import uai_grid_blocks

    try:
        return uai_grid_blocks(network)
    except ValueError as exc:
        raise SamplerNotApplicableError(
            f"the shipped grid-bn proposal applies to binary N x N grid Bayesian networks "
            f"(parents up and left, N >= 3); {exc}"
        ) from exc


#: The samplers of ``--sampler`` (and of ``benchmarks/uai_marginals.py``): name -> factory.
#: Adding one is one line here and one in :data:`SAMPLER_HELP`.
SAMPLERS: dict[str, SamplerFactory] = {
    "block_gibbs": _block_gibbs,
    "gibbs_with_gradients": _gibbs_with_gradients,
    "locally_balanced": _locally_balanced,
    "path_auxiliary_lbp": _path_auxiliary,
    "self_balancing": _self_balancing,
    "neural_block": _neural_block,
    "pymc_gibbs": _pymc_gibbs,
}
DEFAULT_SAMPLER = "block_gibbs"

#: Former ``--sampler`` names -> their names now (each a step class's ``name``); a former name
#: is accepted for one release, with a warning on stderr.
RENAMED_SAMPLERS: dict[str, str] = {"path_auxiliary": "path_auxiliary_lbp"}

#: One line per sampler for ``--help``.
SAMPLER_HELP: dict[str, str] = {
    "block_gibbs": "NeuralBlock, exact block Gibbs on clusters that keep zero factors whole",
    "gibbs_with_gradients": "GibbsWithGradients: gradient-informed single-site MH",
    "locally_balanced": "LocallyBalanced: sqrt balancing, exact neighbour differences",
    "path_auxiliary_lbp": "PathAuxiliaryLBP: several sites per step, path length tuned",
    "self_balancing": "SelfBalancing: balancing function learned while tuning",
    "neural_block": "NeuralBlock, shipped grid-bn proposal on 3 x 3 blocks (binary grid BNs only)",
    "pymc_gibbs": "PyMC's BinaryGibbsMetropolis/CategoricalGibbsMetropolis (one sweep a draw)",
}

#: Default ``--steps-per-draw`` of each sampler: ``"half"`` = half the number of free variables
#: (:func:`default_steps_per_draw`), ``"sweep"`` = the sampler's own sweep (None is passed).
DEFAULT_STEPS_PER_DRAW: dict[str, str] = {
    "block_gibbs": "sweep",
    "gibbs_with_gradients": "half",
    "locally_balanced": "half",
    "path_auxiliary_lbp": "half",
    "self_balancing": "half",
    "neural_block": "sweep",
    "pymc_gibbs": "sweep",
}


def check_sampler(name: str, network: Any, evidence: dict[int, int] | None = None) -> None:
    """Raise :class:`SamplerNotApplicableError` if sampler ``name`` cannot sample ``network``.

    Called before the model is built, so that an inapplicable choice costs nothing:
    ``neural_block`` needs a binary grid BN, ``block_gibbs`` deterministic factors (with the
    ``evidence`` substituted) of at most :data:`BLOCK_GIBBS_MAX_EXACT` joint states.
    """
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; choose from {sorted(SAMPLERS)}")
    if name == "neural_block":
        grid_blocks(network)
    if name == "block_gibbs":
        from pymc_lbp.models.uai.clusters import deterministic_scopes

        for scope in deterministic_scopes(network, evidence):
            size = math.prod(int(network.cards[v]) for v in scope)
            if size > BLOCK_GIBBS_MAX_EXACT:
                raise SamplerNotApplicableError(
                    f"{network.name}: the deterministic factor on {scope} has {size} joint "
                    f"states, more than the {BLOCK_GIBBS_MAX_EXACT} an exact block update may "
                    "enumerate; choose another --sampler"
                )


class CLIError(Exception):
    """An error the command line reports as one line, with its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def steps_per_draw_for(name: str, n_sites: int, requested: int | None) -> int | None:
    """``steps_per_draw`` passed to sampler ``name``: ``requested`` if given, else its default
    (see :data:`DEFAULT_STEPS_PER_DRAW`; None for the samplers whose draw is one sweep)."""
    if name == "pymc_gibbs":
        return None
    if requested is not None:
        return requested
    return default_steps_per_draw(n_sites) if DEFAULT_STEPS_PER_DRAW[name] == "half" else None


def default_steps_per_draw(n_sites: int) -> int:
    """Default MH steps per draw: half the number of free sites (at least 1).

    A single-site step of ``GibbsWithGradients`` costs one logp and one gradient evaluation, so
    ``n_sites / 2`` steps cost about as many evaluations as one Gibbs sweep.
    """
    return max(1, math.ceil(n_sites / 2))


def make_steps(name: str, vars: list, steps_per_draw: int | None) -> list:
    """The steps of sampler ``name`` for ``vars`` (inside the model context), as a list."""
    try:
        factory = SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; choose from {sorted(SAMPLERS)}") from None
    steps = factory(vars, steps_per_draw)
    return list(steps) if isinstance(steps, list | tuple) else [steps]


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
            "Sample a UAI network with pm.sample and write the per-variable marginal "
            "frequencies in the UAI MAR format (or, with --exact, the exact marginals). "
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
        "--exact",
        action="store_true",
        help="write exact marginals (variable elimination) instead of sampling",
    )
    mar.add_argument(
        "--max-table-size",
        type=_positive_int,
        default=None,
        help="--exact: largest elimination table allowed, in entries (default 2^27, ~1 GiB)",
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


# --------------------------------------------------------------------------- the work
@contextlib.contextmanager
def _errors_to_exit_codes(args: argparse.Namespace) -> Iterator[None]:
    """Translate the library's exceptions into :class:`CLIError` with an exit code."""
    from pymc_lbp.models.uai import (
        ImpossibleEvidenceError,
        TreewidthTooLargeError,
        UAIFormatError,
    )

    try:
        yield
    except CLIError:
        raise
    except UAIFormatError as err:
        raise CLIError(f"malformed file: {err}", EXIT_FORMAT) from err
    except ImpossibleEvidenceError as err:
        raise CLIError(f"impossible evidence: {err}", EXIT_IMPOSSIBLE) from err
    except TreewidthTooLargeError as err:
        raise CLIError(f"exact marginals infeasible: {err}", EXIT_INFEASIBLE) from err
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        reason = err.strerror or str(err)
        raise CLIError(f"{where}{reason}", EXIT_FILE) from err


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
    p = Path(path)
    try:
        _probe_output(p, path)
    except OSError as exc:  # e.g. a name too long for the file system, even to stat it
        reason = exc.strerror or str(exc)
        raise CLIError(f"output {path}: cannot be written: {reason}", EXIT_FILE) from exc
    return p


def _probe_output(p: Path, path: str) -> None:
    separators = tuple(sep for sep in (os.sep, os.altsep, "/") if sep)
    if path.endswith(separators):
        raise CLIError(
            f"output {path}: ends with a path separator (a directory, not a file name)", EXIT_FILE
        )
    if p.is_dir():
        raise CLIError(f"output {path}: is a directory", EXIT_FILE)
    parent = p.parent
    if not parent.exists():
        raise CLIError(f"output {path}: directory {parent} does not exist", EXIT_FILE)
    if not parent.is_dir():
        raise CLIError(f"output {path}: {parent} is not a directory", EXIT_FILE)
    existed = p.exists()
    with open(p, "a"):
        pass
    if not existed:
        with contextlib.suppress(OSError):
            p.unlink()


def _effective_network(network: Any, kind: str | None) -> Any:
    """The network the target is computed from: with the BAYES layout (asked for, or declared
    by the file with ``--kind file``) its CPTs are checked and rescaled exactly as
    :func:`~pymc_lbp.models.uai.read_uai` does, so ``--exact`` and sampling agree."""
    if (kind or network.kind) != "BAYES":
        return network
    return network.normalised_cpts()


@contextlib.contextmanager
def _quiet_pymc(quiet: bool) -> Iterator[None]:
    logger = logging.getLogger("pymc")
    level = logger.level
    if quiet:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
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
        if "jump_distance" in stats:
            line += f"; mean sites changed per draw: {float(stats['jump_distance'].mean()):.2f}"
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
    output = check_output(args.output)
    network = read_network(network_path)
    evidence = read_evidence(evidence_path, network)
    kind = None if args.kind == "file" else args.kind
    try:
        target = _effective_network(network, kind)
    except ValueError as exc:  # not CPT-structured, or CPT rows that do not sum to 1
        raise CLIError(f"--kind {args.kind}: {exc}", EXIT_USAGE) from exc
    if args.strict and not args.exact and args.chains < 2:
        raise CLIError("--strict compares chains: it needs --chains 2 or more", EXIT_USAGE)
    if not args.exact:
        try:
            check_sampler(args.sampler, network, evidence)
        except SamplerNotApplicableError as exc:
            raise CLIError(f"--sampler {args.sampler}: {exc}", EXIT_USAGE) from exc
    if evidence_path is None:
        _note_unused_evidence(network_path, network, err)
    try:
        if args.exact:
            return _exact(args, target, evidence, output, out)
        return _sample(args, network, target, kind, evidence, output, out, err)
    except ImpossibleEvidenceError as exc:
        where = f"{evidence_path}: " if evidence_path is not None else ""
        raise CLIError(f"impossible evidence: {where}{exc}", EXIT_IMPOSSIBLE) from exc


def _exact(args: argparse.Namespace, network: Any, evidence: dict, output: Path, out: Any) -> int:
    from pymc_lbp.models.uai import exact_marginals, write_mar
    from pymc_lbp.models.uai.exact import DEFAULT_MAX_TABLE_SIZE

    size = args.max_table_size or DEFAULT_MAX_TABLE_SIZE
    t0 = time.perf_counter()
    marginals = exact_marginals(network, evidence, max_table_size=size)
    write_mar(output, marginals)
    print(
        f"exact marginals of {network.name} ({network.n_vars} variables, "
        f"{len(evidence)} evidence) in {time.perf_counter() - t0:.2f} s -> {output}",
        file=out,
    )
    return EXIT_OK


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


def chain_disagreement(
    idata: Any,
    model: Any = None,
    *,
    rhat_threshold: float = DISAGREEMENT_RHAT,
    share: float = DISAGREEMENT_SHARE,
) -> dict[int, str]:
    """The network variables on which the chains disagree beyond sampling noise.

    For every free variable and value, the indicator series ``x_i == k`` of every chain is
    compared: the chains disagree on the variable when, for some value, ArviZ's R-hat of the
    indicator (``method="identity"``: the classic Gelman-Rubin statistic of whole chains, which
    compares the chains' frequencies with the noise within them; the split and rank-normalised
    variants also react to trends within a chain) exceeds ``rhat_threshold`` or is undefined
    while the value is visited (chains that each stay at one value, different ones), or when
    one chain never visits a value that another chain spends at least ``share`` of its draws
    in. Chains that started in different regions of a network split by zero factors, under a
    sampler that never leaves its region, disagree in this way.

    Parameters
    ----------
    idata : arviz.InferenceData
        With a posterior group of two or more chains (one chain: nothing to compare, ``{}``).
    model : pymc.Model, optional
        A model built by :func:`~pymc_lbp.models.uai.read_uai` (default: the one on the context
        stack).
    rhat_threshold : float
    share : float

    Returns
    -------
    dict of int to str
        Network variable index -> what shows the disagreement (the worst value's R-hat and the
        range of its per-chain frequencies), in increasing variable order.
    """
    import warnings

    import arviz as az
    import numpy as np
    import xarray as xr

    from pymc_lbp.models.uai import uai_variable_map

    info = uai_variable_map(model)
    found: dict[int, tuple[float, str]] = {}
    for name in info.free_names:
        values = np.asarray(idata.posterior[name])  # (chain, draw, members)
        if values.shape[0] < 2:
            return {}
        members = info.members[name]
        card = int(info.network.cards[members[0]])
        for k in range(1 if card == 2 else 0, card):  # a binary variable: its value 1 suffices
            ind = (values == k).astype(np.float64)
            freq = ind.mean(axis=1)  # (chain, members)
            varies = ind.min(axis=(0, 1)) < ind.max(axis=(0, 1))
            with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                data = xr.Dataset({"ind": (("chain", "draw", "member"), ind)})
                rhat = np.asarray(az.rhat(data, method="identity")["ind"], dtype=np.float64)
            never = (freq.min(axis=0) == 0) & (freq.max(axis=0) >= share)
            bad = varies & (~np.isfinite(rhat) | (rhat > rhat_threshold) | never)
            for i in np.flatnonzero(bad).tolist():
                v = int(members[i])
                r = float(rhat[i])
                how = f"R-hat {r:.2f}" if np.isfinite(r) else "every chain stays at one value"
                lo, hi = freq[:, i].min(), freq[:, i].max()
                text = f"x{v}={k}: {how}, chain frequencies {lo:.2f}-{hi:.2f}"
                score = r if np.isfinite(r) else np.inf
                if v not in found or score > found[v][0]:
                    found[v] = (score, text)
    return {v: found[v][1] for v in sorted(found)}


def _disagreement_warning(
    disagree: dict[int, str], n_chains: int, n_free: int, sampler: str
) -> str:
    """The one ``warning: ...`` line: the variables (the first five), what to try."""
    shown = "; ".join(list(disagree.values())[:5])
    more = f"; and {len(disagree) - 5} more" if len(disagree) > 5 else ""
    advice = "more draws" if sampler == "block_gibbs" else "--sampler block_gibbs or more draws"
    return (
        f"warning: the {n_chains} chains disagree on {len(disagree)} of {n_free} free "
        f"variables ({shown}{more}): started in distinct random feasible states, they either "
        "did not mix between the regions they started in or have not converged yet, so the MAR "
        f"file may be wrong; try {advice}"
    )


def _sample(
    args: argparse.Namespace,
    network: Any,
    target: Any,
    kind: str | None,
    evidence: dict,
    output: Path,
    out: Any,
    err: Any,
) -> int:
    import numpy as np
    import pymc as pm

    from pymc_lbp.models.uai import (
        random_feasible_states,
        read_uai,
        uai_marginals,
        uai_point_from_state,
        uai_variable_map,
        write_mar,
    )

    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**31)
    # one random feasible start per chain (the target's own CPTs with --kind BAYES)
    starts, sources = random_feasible_states(target, evidence, args.chains, rng=seed)
    model = read_uai(network, evidence, kind=kind, start=starts[0], seed=seed)
    info = uai_variable_map(model)
    n_free = int(sum(info.members[n].size for n in info.free_names))
    if n_free == 0:
        write_mar(output, uai_marginals({}, model))
        print(f"{network.name}: every variable is fixed; wrote the deltas -> {output}", file=out)
        return EXIT_OK
    initvals = [uai_point_from_state(state, model) for state in starts]
    steps_per_draw = steps_per_draw_for(args.sampler, n_free, args.steps_per_draw)
    with model, _quiet_pymc(args.quiet):
        try:
            steps = make_steps(args.sampler, [model[n] for n in info.free_names], steps_per_draw)
        except SamplerNotApplicableError as exc:
            raise CLIError(f"--sampler {args.sampler}: {exc}", EXIT_USAGE) from exc
        t0 = time.perf_counter()
        try:
            idata = pm.sample(
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                cores=args.cores,
                step=steps,
                initvals=initvals,
                random_seed=seed,
                progressbar=not args.quiet,
                compute_convergence_checks=False,
            )
        except pm.exceptions.SamplingError as exc:
            raise CLIError(f"sampling failed: {exc}", EXIT_SAMPLING) from exc
        seconds = time.perf_counter() - t0
    write_mar(output, uai_marginals(idata, model))
    if args.sampler == "pymc_gibbs":
        spd = "one sweep"
    else:
        spd = ", ".join(str(s.steps_per_draw) for s in steps if hasattr(s, "steps_per_draw"))
    print(
        f"{network.name}: {args.sampler}, steps_per_draw={spd}, seed={seed}, "
        f"start: {_describe_starts(starts, sources)}",
        file=out,
    )
    for line in _summary(idata, model, seconds):
        print(line, file=out)
    print(f"marginals -> {output}", file=out)
    disagree = chain_disagreement(idata, model)
    if disagree:
        print(_disagreement_warning(disagree, args.chains, n_free, args.sampler), file=err)
        if args.strict:
            raise CLIError(
                f"--strict: the chains disagree on {len(disagree)} variable(s): the marginals "
                f"in {output} are not certified",
                EXIT_DISAGREE,
            )
    return EXIT_OK


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
        raised by argparse.
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    if getattr(args, "sampler", None) in RENAMED_SAMPLERS:
        new = RENAMED_SAMPLERS[args.sampler]
        print(f"warning: --sampler {args.sampler} is now {new}", file=err)
        args.sampler = new
    try:
        with _errors_to_exit_codes(args):
            if args.command == "mar":
                return _run_mar(args, out, err)
    except CLIError as exc:
        print(f"pymc_lbp: error: {exc}", file=err)
        return exc.code
    raise AssertionError(f"unhandled command {args.command!r}")  # pragma: no cover
