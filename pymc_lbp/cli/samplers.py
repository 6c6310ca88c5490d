"""The samplers of ``python -m pymc_lbp mar --sampler NAME``: name -> factory, help, defaults.

A factory builds the steps for a :func:`~pymc_lbp.models.uai.read_uai` model's free variables;
:func:`check_sampler` refuses an inapplicable choice before any work. Imports only the standard
library at import time (the samplers are imported inside the factories).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "BLOCK_GIBBS_MAX_TABLE_SIZE",
    "DEFAULT_SAMPLER",
    "DEFAULT_STEPS_PER_DRAW",
    "RENAMED_SAMPLERS",
    "SAMPLERS",
    "SAMPLER_HELP",
    "SamplerFactory",
    "SamplerNotApplicableError",
    "check_sampler",
    "default_steps_per_draw",
    "grid_blocks",
    "make_steps",
    "steps_per_draw_for",
]

#: Largest elimination table of a ``block_gibbs`` block
#: (:data:`pymc_lbp.samplers.block.elimination.DEFAULT_MAX_TABLE_SIZE`, written out here so that
#: importing the CLI stays light).
BLOCK_GIBBS_MAX_TABLE_SIZE = 2**16

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
    """:class:`~pymc_lbp.BlockGibbs` on elimination blocks of the network
    (:mod:`pymc_lbp.samplers.block.elimination`: every free variable but a small cutset, drawn
    whole by bucket elimination within :data:`BLOCK_GIBBS_MAX_TABLE_SIZE` table entries; one
    block, independent exact draws, when the network fits): exact block Gibbs, whose moves cross
    determinism; ``steps_per_draw=None``: one update per block on average."""
    from pymc_lbp.step_methods.block_gibbs import BlockGibbs

    return BlockGibbs(
        vars,
        blocks="elimination",
        max_table_size=BLOCK_GIBBS_MAX_TABLE_SIZE,
        steps_per_draw=steps_per_draw,
        differences="auto",
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
    "block_gibbs": "BlockGibbs: exact block Gibbs, blocks drawn whole by variable elimination",
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
    ``neural_block`` needs a binary grid BN; ``evidence`` is for samplers whose applicability
    depends on it (none at present).
    """
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; choose from {sorted(SAMPLERS)}")
    if name == "neural_block":
        grid_blocks(network)


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
