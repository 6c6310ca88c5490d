"""The samplers of ``python -m pymc_lbp mar --sampler NAME``: name -> factory, help, defaults.

A factory builds the steps for a :func:`~pymc_lbp.models.uai.read_uai` model's free variables;
:func:`check_sampler` refuses an inapplicable choice before any work, among them a sampler whose
moves cannot cross the walls that zero factors put between regions of states
(:func:`split_regions`). Imports only the standard library at import time (the samplers,
NumPy and SciPy are imported inside the functions).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BLOCK_GIBBS_MAX_STATES",
    "DEFAULT_SAMPLER",
    "DEFAULT_STEPS_PER_DRAW",
    "REGION_CHECK_MAX_STATES",
    "SAMPLERS",
    "SAMPLER_HELP",
    "SamplerFactory",
    "SamplerNotApplicableError",
    "SplitRegion",
    "block_gibbs_max_states",
    "check_sampler",
    "default_steps_per_draw",
    "grid_blocks",
    "make_steps",
    "split_regions",
    "steps_per_draw_for",
]

#: ``max_states`` of ``block_gibbs``, the largest elimination table of a block with a cutset
#: (``BlockGibbs``' default, written out here so that importing the CLI stays light), raised to
#: the largest free variable's states where that is more (:func:`block_gibbs_max_states`).
BLOCK_GIBBS_MAX_STATES = 2**16

#: A sampler factory: ``factory(value_vars, steps_per_draw) -> step or list of steps``, called
#: inside the model context (a :func:`~pymc_lbp.models.uai.read_uai` model) with the model's free
#: (discrete) variables. ``steps_per_draw=None`` means the sampler's own sweep (only for the
#: samplers whose :data:`DEFAULT_STEPS_PER_DRAW` is ``"sweep"``). Every option the command line
#: means is passed explicitly, so a change of a step class's defaults does not change it.
SamplerFactory = Callable[[list, "int | None"], Any]


def _explicit_steps(path: str, **options: Any) -> SamplerFactory:
    """The factory of the step class ``path`` (``module.Class``, imported when it is called)
    with ``options`` and an explicit ``steps_per_draw``."""

    def factory(vars: list, steps_per_draw: int | None) -> Any:
        if steps_per_draw is None:
            raise ValueError("this sampler needs an explicit steps_per_draw")
        module, name = path.rsplit(".", 1)
        step = getattr(importlib.import_module(module), name)
        return step(vars, steps_per_draw=steps_per_draw, **options)

    return factory


def _neural_block(vars: list, steps_per_draw: int | None) -> Any:
    """NeuralBlock with the shipped ``grid-bn`` proposal on the 3 x 3 grid-BN motif blocks;
    ``steps_per_draw=None``: one sweep over its update units (blocks and uncovered sites)."""
    import pymc as pm

    from pymc_lbp.samplers.block.neural_proposal import load_proposal
    from pymc_lbp.samplers.block.step import NeuralBlock

    model = pm.modelcontext(None)
    network = getattr(getattr(model, "uai_info", None), "network", None)
    if network is None:
        raise SamplerNotApplicableError("neural_block needs a model built by read_uai")
    blocks = grid_blocks(network)
    return NeuralBlock(
        vars, blocks=blocks, proposal=load_proposal("grid-bn"), steps_per_draw=steps_per_draw
    )


def block_gibbs_max_states(cards: Sequence[int]) -> int:
    """``max_states`` of ``block_gibbs`` on a network whose free variables have ``cards``
    states: :data:`BLOCK_GIBBS_MAX_STATES`, or the largest cardinality where that is more.

    A block's elimination tables hold at least one variable each, so a variable of ``K`` states
    needs a budget of ``K`` entries; with it, the variable's block is the variable alone or
    more (its neighbours cut where they would overflow the table), drawn exactly from its
    ``K``-entry conditional, which costs what one draw of its ``K`` states costs. Without it,
    ``BlockGibbs`` refuses the network.
    """
    return max(BLOCK_GIBBS_MAX_STATES, max((int(k) for k in cards), default=1))


def _block_gibbs(vars: list, steps_per_draw: int | None) -> Any:
    """:class:`~pymc_lbp.BlockGibbs` on elimination blocks of the network
    (:mod:`pymc_lbp.samplers.block.elimination`: every free variable but a small cutset, drawn
    whole by bucket elimination within :func:`block_gibbs_max_states` table entries; one
    block, independent exact draws, when the network fits): exact block Gibbs, whose moves cross
    determinism; ``steps_per_draw=None``: one update per block on average."""
    import pymc as pm

    from pymc_lbp.samplers.block.step_block_gibbs import BlockGibbs

    info = getattr(pm.modelcontext(None), "uai_info", None)
    if info is None:
        raise SamplerNotApplicableError("block_gibbs needs a model built by read_uai")
    free = info.fixed_values < 0
    return BlockGibbs(
        vars,
        blocks="elimination",
        max_states=block_gibbs_max_states(info.network.cards[free].tolist()),
        steps_per_draw=steps_per_draw,
        logp="auto",
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
    "gibbs_with_gradients": _explicit_steps(
        "pymc_lbp.samplers.single_site.step.GibbsWithGradients"
    ),
    "locally_balanced": _explicit_steps(
        "pymc_lbp.samplers.single_site.step.LocallyBalanced", balancing="sqrt", differences="exact"
    ),
    # gradient differences: the PAS paper's sampler, exact on the multilinear binary UAI models;
    # the path length is tuned to 0.574 acceptance
    "path_auxiliary_lbp": _explicit_steps(
        "pymc_lbp.samplers.path.step.PathAuxiliaryLBP", balancing="sqrt", differences="gradient"
    ),
    # LSB1: a learned mixture of balancing functions, learning during tuning only
    "self_balancing": _explicit_steps(
        "pymc_lbp.samplers.self_balancing.step.SelfBalancing", family="lsb1", differences="exact"
    ),
    "neural_block": _neural_block,
    "pymc_gibbs": _pymc_gibbs,
}
DEFAULT_SAMPLER = "block_gibbs"

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


#: :func:`split_regions`: the most joint states of a group of variables coupled by zero factors
#: that it enumerates; a larger group is reported unchecked.
REGION_CHECK_MAX_STATES = 2**16


@dataclass(frozen=True)
class SplitRegion:
    """A group of free variables coupled by zero factors whose states of positive probability
    a sampler's moves may not connect.

    Attributes
    ----------
    variables : tuple of int
        The group: network variable indices, sorted.
    states : int
        Its joint states (the product of its cardinalities).
    regions : int or None
        Into how many regions, none reachable from another, the moves split the group's
        states of positive probability (2 or more); None: not checked, more than
        ``max_states`` joint states.
    """

    variables: tuple[int, ...]
    states: int
    regions: int | None


def split_regions(
    network: Any,
    evidence: Mapping[int, int] | None = None,
    units: Sequence[Sequence[int]] = (),
    *,
    max_states: int = REGION_CHECK_MAX_STATES,
) -> list[SplitRegion]:
    """The groups of variables whose positive states a sampler's moves split into regions.

    Only factors with a zero entry (after the evidence is substituted) restrict where a
    chain can go. They couple the free variables into groups (connected by zero factors on
    two or more free variables); the states of positive probability are the product of the
    groups' positive states, and a move changes each group's part independently, so the moves
    connect them iff they connect every group's. A group of at most ``max_states`` joint
    states is checked exactly: its states are enumerated, those at which every zero factor on
    its variables is positive kept, and two are linked when they differ only on one site or
    only inside one unit (a move may change the unit's sites together); the connected
    components are the regions. A larger group is reported unchecked.

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int, optional
        Evidence variables (and those of cardinality 1) are fixed, in no group.
    units : sequence of sequence of int
        Sets of network variables a move may change together, besides every single site (a
        single-site sampler: none; ``neural_block``: its blocks).
    max_states : int
        The most joint states of a group that is enumerated.

    Returns
    -------
    list of SplitRegion
        The groups split into two or more regions and the unchecked ones, by first variable;
        empty when the moves reach every state of positive probability from every other.
    """
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from pymc_lbp.factor_graph.network import reduce_factors

    fixed = {v: 0 for v in range(network.n_vars) if network.cards[v] == 1} | dict(evidence or {})
    zero = [
        (scope, np.isfinite(log_table))
        for scope, log_table in reduce_factors(network, fixed)[0]
        if np.isneginf(log_table).any()
    ]
    parent = list(range(network.n_vars))

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = v = parent[parent[v]]
        return v

    for scope, _ in zero:
        for v in scope[1:]:
            parent[root(v)] = root(scope[0])
    groups: dict[int, list[int]] = {}
    for scope, _ in zero:
        if len(scope) > 1:
            groups.setdefault(root(scope[0]), [])
    for v in range(network.n_vars):
        if v not in fixed and root(v) in groups:
            groups[root(v)].append(v)
    found = []
    for group in sorted(groups.values()):
        cards = [int(network.cards[v]) for v in group]
        states = math.prod(cards)
        if states > max_states:
            found.append(SplitRegion(tuple(group), states, None))
            continue
        position = {v: i for i, v in enumerate(group)}
        digits = np.unravel_index(np.arange(states), cards)  # one row per variable
        positive = np.ones(states, dtype=bool)
        for scope, finite in zero:
            if scope[0] in position:
                positive &= finite[tuple(digits[position[v]] for v in scope)]
        strides = np.cumprod([1, *cards[:0:-1]])[::-1]  # C order
        moves = [[p] for p in range(len(group))]
        inside = ([position[v] for v in unit if v in position] for unit in units)
        moves += [sites for sites in inside if len(sites) > 1]
        # a bipartite graph: each positive state is linked to one hub per move, the state with
        # the move's sites zeroed; states that share a hub differ only on the move's sites
        rows, hubs = [], []
        index = np.flatnonzero(positive)
        for m, sites in enumerate(moves):
            key = index - sum(digits[p][index] * strides[p] for p in sites)
            rows.append(index)
            hubs.append(states * (1 + m) + key)
        rows, hubs = np.concatenate(rows), np.concatenate(hubs)
        n = states * (1 + len(moves))
        graph = coo_matrix((np.ones(rows.size, dtype=np.int8), (rows, hubs)), shape=(n, n))
        labels = connected_components(graph, directed=False)[1]
        regions = np.unique(labels[index]).size
        if regions > 1:
            found.append(SplitRegion(tuple(group), states, regions))
    return found


def _split_message(name: str, split: list[SplitRegion], max_states: int) -> str:
    """Why sampler ``name`` is refused: the first split group, how many others."""
    moves = "one site or 3 x 3 block at a time" if name == "neural_block" else "one site at a time"
    first = split[0]
    shown = ", ".join(f"x{v}" for v in first.variables[:6])
    if len(first.variables) > 6:
        shown += f", ... ({len(first.variables)} variables)"
    if first.regions is not None:
        what = (
            f"zero factors split the states of {shown} into {first.regions} regions that its "
            f"moves ({moves}) cannot cross, so a chain would stay in the region it starts in"
        )
    else:
        what = (
            f"zero factors couple {shown}: {first.states:.3g} joint states, too many (> "
            f"{max_states}) to check that its moves ({moves}) reach every state of positive "
            "probability"
        )
    more = f" (and {len(split) - 1} more such group(s))" if len(split) > 1 else ""
    return f"{what}{more}; --sampler block_gibbs (the default) draws such variables together"


def check_sampler(name: str, network: Any, evidence: Mapping[int, int] | None = None) -> None:
    """Raise :class:`SamplerNotApplicableError` if sampler ``name`` cannot sample ``network``.

    Called before the model is built, so that an inapplicable choice costs nothing:
    ``neural_block`` needs a binary grid BN; every sampler but ``block_gibbs`` (which draws the
    variables of every zero factor in one block) is refused where zero factors split the
    states of positive probability (given ``evidence``) into regions its moves cannot cross,
    or couple more variables than :func:`split_regions` can check, since its chains would stay
    in the regions they start in. ``neural_block`` moves one site or one of its 3 x 3 blocks at
    a time, the others one site at a time: ``path_auxiliary_lbp`` changes several sites in a
    step, but only sites whose change alone has positive probability (its paths are drawn from
    the single-site moves' weights at the current state), so a wall single-site moves cannot
    cross may still be crossed by its paths, never the other way round (conservative).
    """
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; choose from {sorted(SAMPLERS)}")
    if name == "block_gibbs":
        return
    units = (
        [b.block.tolist() for b in grid_blocks(network).blocks] if name == "neural_block" else []
    )
    split = split_regions(network, evidence, units)
    if split:
        raise SamplerNotApplicableError(_split_message(name, split, REGION_CHECK_MAX_STATES))


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
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; choose from {sorted(SAMPLERS)}")
    steps = SAMPLERS[name](vars, steps_per_draw)
    return list(steps) if isinstance(steps, list | tuple) else [steps]
