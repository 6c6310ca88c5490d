"""DiscreteStep: the PyMC step-method shell shared by every pymc_lbp sampler.

It owns the variable bookkeeping (a raveled int64 block of one or more discrete variables), the
compiled neighbour differences, ``self.rng``, the stats, tune-then-freeze and competence. A
subclass implements :meth:`DiscreteStep.mh_step`, one Metropolis-Hastings transition from a state
whose logp and neighbour differences are already known; the base runs ``steps_per_draw`` of them
per recorded draw and carries ``(logp, differences)`` of the current state from one step to the
next within the draw. Nothing is carried from one draw to the next: between draws other steps
move the variables the block's logp depends on, and ``pm.set_data`` changes its data, so every
draw starts with a fresh evaluation at its current state (one differences evaluation per draw,
about ``1 / steps_per_draw`` of the draw's cost with the default of one sweep per draw).
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import scipy.sparse as sp
from pymc.blocking import RaveledVars
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_value_vars_from_user_vars
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV

from pymc_lbp.logp.differences import Differences, ExactDifferences, GradientDifferences
from pymc_lbp.logp.differences_choice import (
    DifferencesChoice,
    TuningRecheck,
    choose,
    probe_first_order,
)
from pymc_lbp.logp.layout import BINARY, INTEGER, BlockLayout, describe_block, integer_support
from pymc_lbp.logp.relaxed_values import NotRelaxableError
from pymc_lbp.logp.site_colouring import greedy_colouring
from pymc_lbp.logp.site_pieces import site_pieces
from pymc_lbp.samplers.balancing import log_sqrt
from pymc_lbp.samplers.integer.graph import CompiledJumps
from pymc_lbp.samplers.integer.reference import (
    LARGEST_SCALE_EXPONENT,
    MAX_SCALE_EXPONENT,
    grown_exponent,
    scale_exponent,
    start_exponent,
    uses_support_gibbs,
)
from pymc_lbp.samplers.pairwise.couplings import PairwiseDifferences, pairwise_differences
from pymc_lbp.samplers.pairwise.kernel import PairwiseSteps, pairwise_steps
from pymc_lbp.samplers.single_site.graph import graph_balancing

DIFFERENCES = ("exact", "gradient", "auto")

EXPENSIVE_EXACT_EVALS = 2000
"""Exact differences that cost more logp evaluations than this per call are reported (the
batched method costs one per move; the local one a few, plus one per move for terms that couple
the whole block)."""

_log = logging.getLogger("pymc_lbp")

MAX_STEPS_PER_DRAW = 1_000_000
"""Largest ``steps_per_draw`` accepted, unless the block has more than a tenth of it in sites
(then ten sweeps, ``10 * n_sites``). One MH step costs at least tens of microseconds (a compiled
logp call plus the proposal), so this bound is already tens of seconds per recorded draw: take
more draws instead."""

SUPPORT_GIBBS_MAX_ELEMENTS = 2**22
"""Integer sites are drawn from their full conditional over a small support only while one
batched evaluation of the support costs at most this many elements (rows times the model's
size, :func:`_model_size`); beyond it they jump (a few dozen rows)."""

TUNING_CHECK_MIN_DRAWS = 20
"""Tuning diagnostics (:meth:`DiscreteStep.stop_tuning`) need at least this many tuning draws."""

ACCEPT_TOLERANCE = 0.25
"""A tuned mean acceptance further than this from ``target_accept`` is reported."""


def steps_for_a_sweep(n_sites: int, sites_per_step: float = 1.0) -> int:
    """MH steps per draw that propose about one change per site: ``ceil(n_sites / sites_per_step)``.

    ``sites_per_step`` is the expected number of sites one step proposes to change (1 for the
    single-site samplers, ``E[R]`` for a path of length ``R``).
    """
    if n_sites <= 0:
        return 0  # nothing to sweep (a block whose sites all move by their own jumps)
    return max(1, math.ceil(n_sites / max(float(sites_per_step), 1.0)))


def check_steps_per_draw(value, n_sites: int) -> int | None:
    """Validate ``steps_per_draw``: None (one sweep, see the samplers) or a positive int within
    :data:`MAX_STEPS_PER_DRAW` (or ten sweeps on huge blocks)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(
            f"steps_per_draw must be None (one sweep per draw) or a positive int, got {value!r}"
        )
    if value < 1:
        raise ValueError(f"steps_per_draw must be >= 1, got {value}")
    bound = max(MAX_STEPS_PER_DRAW, 10 * n_sites)
    if value > bound:
        raise ValueError(
            f"steps_per_draw={value} is out of range: at most {bound} MH steps per recorded draw "
            f"(max({MAX_STEPS_PER_DRAW}, 10 x the block's {n_sites} sites)); each step costs at "
            "least tens of microseconds, so this draw alone would take hours. Use "
            "steps_per_draw=None (one sweep per draw) and more draws."
        )
    return int(value)


@dataclass
class StepResult:
    """Outcome of one MH transition (returned by :meth:`DiscreteStep.mh_step`)."""

    x: np.ndarray
    logp: float
    deltas: np.ndarray
    accept: float
    accepted: bool
    evaluated: bool = True  # whether the differences were evaluated at a proposal
    extra: dict[str, Any] | None = None


@dataclass
class DrawResult:
    """Outcome of the ``steps_per_draw`` transitions of one draw (see
    :meth:`DiscreteStep.run_steps`)."""

    x: np.ndarray
    logp: float
    deltas: np.ndarray
    sum_accept: float
    n_accepted: int
    logp_evals: int
    grad_evals: int
    extras: dict[str, list]


@dataclass_state
class DiscreteStepState(StepMethodState):
    tune: bool


def _supported_rv(rv) -> bool:
    op = getattr(rv.owner, "op", None)
    if isinstance(op, BernoulliRV | CategoricalRV):
        return True
    if op is None or not rv.dtype.startswith("int") or not hasattr(op, "dist_params"):
        return False
    try:
        return integer_support(op, op.dist_params(rv.owner)) is not None
    except Exception:  # noqa: BLE001 - an exotic op is simply not ours
        return False


def _model_size(model, point: dict) -> int:
    """Elements of the model's free values (at ``point``) and observed data: what one row of a
    batched logp evaluation touches, up to a constant."""
    size = sum(int(np.size(v)) for v in point.values())
    for rv in model.observed_RVs:
        data = model.rvs_to_values.get(rv)
        value = getattr(data, "data", None)
        if value is None and hasattr(data, "get_value"):
            value = data.get_value()
        size += int(np.size(value)) if value is not None else 1
    return max(size, 1)


class DiscreteStep(ArrayStepShared):
    """Base class of the pymc_lbp step methods (not used directly).

    Parameters
    ----------
    vars : list of variables, optional
        Discrete random variables or their value variables; the block may mix variables of
        different shapes and kinds, each listed once. Defaults to all the model's value
        variables. An empty block or a repeated variable is a ``ValueError``.
    steps_per_draw : int, optional
        Metropolis-Hastings steps per recorded draw. ``None`` (default): one sweep's worth,
        :meth:`sweep_steps` (single-site samplers: the number of sites of the block without a
        jump of their own, :meth:`swept_sites`; 0 for a block of integer sites only). At most
        :data:`MAX_STEPS_PER_DRAW` (or ten sweeps on blocks of more than 100,000 sites).
    differences : {"auto", "exact", "gradient"}, default "auto"
        How neighbour log-probability differences are computed: exact (local terms or one logp
        evaluation per neighbour, batched), first-order from the relaxed logp's gradient (one
        evaluation per step), or "auto": first-order where they are measured to track the exact
        ones from the start point and, while tuning, again from where the chain is (a step whose
        first-order proposals stop tracking them switches to exact ones for good), exact
        otherwise (the rule:
        :mod:`pymc_lbp.logp.differences_choice`). The choice is in :attr:`differences_choice`
        (with its reason and measurements), logged (logger ``"pymc_lbp"``, INFO), and recorded in
        the stat ``exact_differences``.
    model : pymc.Model, optional
    rng : RandomGenerator, optional
    initial_point : dict, optional
    compile_kwargs : dict, optional
        Passed to pytensor compilation.
    blocked : bool, default True
        PyMC's flag; with ``False`` each variable gets its own step.
    """

    name = "discrete_step"
    default_blocked = True
    # Names shared with PyMC's steps have their dtypes there ("accept" float64, "tune" bool,
    # "model_logp" float64 as NUTS/HMC); PyMC's "accepted" is float64 in Metropolis and bool in
    # DEMetropolis/HMC, so no dtype coexists with both: we count accepted steps in "n_accepted".
    stats_dtypes_shapes: ClassVar[dict] = {
        "tune": (bool, []),
        "accept": (np.float64, []),
        "n_accepted": (np.int64, []),
        "mh_steps": (np.int64, []),
        "jump_distance": (np.int64, []),
        "model_logp": (np.float64, []),
        "logp_evals": (np.int64, []),
        "grad_evals": (np.int64, []),
        "exact_differences": (bool, []),
    }
    conditional_stats: ClassVar[tuple[str, ...]] = ("model_logp", "integer_accept", "integer_jump")
    """Stats an instance adds to or drops from ``stats_dtypes_shapes`` at construction (their
    conditions are in :data:`pymc_lbp.step_methods.stats.STATS`)."""
    target_accept: float | None = None
    integer_jumps: ClassVar[bool] = True
    """Whether each draw gives every integer site one informed jump
    (:mod:`pymc_lbp.samplers.integer.reference`)."""
    independent_sites_at_once: ClassVar[bool] = True
    """Whether a block of conditionally independent sites is drawn from its full conditionals
    at once (:meth:`_sites_are_independent`) instead of by single-site steps."""
    pairwise_kernel: ClassVar[bool] = False
    """Whether the step runs :mod:`pymc_lbp.samplers.pairwise.kernel` on pairwise binary blocks
    (then ``differences="auto"`` and ``"exact"`` take the couplings of
    :mod:`pymc_lbp.samplers.pairwise.couplings`)."""
    learned_balancing: ClassVar[bool] = False
    """Whether the balancing function is learned (SelfBalancing; passed to the pairwise kernel by
    :meth:`pairwise_balancing`) rather than one of the built-in ones."""
    auto_assignable: ClassVar[bool] = True
    auto_assign_needs: ClassVar[str] = ""
    _state_class = DiscreteStepState
    _registered: ClassVar[bool] = False

    def __new__(cls, *args, **kwargs):
        # PyMC's BlockedStep.__new__ inspects vars first; give our errors before its own
        vars = args[0] if args else kwargs.get("vars")
        cls._resolve_vars(vars, pm.modelcontext(kwargs.get("model")))
        return super().__new__(cls, *args, **kwargs)

    def __init__(
        self,
        vars=None,
        *,
        steps_per_draw: int | None = None,
        differences: str = "auto",
        model=None,
        rng=None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
    ):
        model = pm.modelcontext(model)
        vars = self._resolve_vars(vars, model)
        if initial_point is None:
            initial_point = model.initial_point()
        if differences not in DIFFERENCES:
            raise ValueError(f"differences must be one of {DIFFERENCES}, got {differences!r}")

        specs = describe_block(model, vars, initial_point)
        self.specs = specs
        self.layout = BlockLayout(specs)
        self._steps_per_draw = check_steps_per_draw(steps_per_draw, self.layout.n_sites)
        self._check_block_options(self.layout, specs)
        shared = pm.make_shared_replacements(initial_point, vars, model)
        self._x0 = self._state_vector(initial_point)
        self._check_values(self._x0, "the start point given to the step")
        self._recheck: TuningRecheck | None = None  # set where "auto" chose first-order ones
        self._site_pieces = None  # the dependency analysis, when the independence check ran it
        self.independent_sites = self._sites_are_independent(model, initial_point, specs, shared)
        jumps_only = self._draws_are_jumps_only()
        if (self.independent_sites or jumps_only) and differences == "auto":
            self.differences_choice = DifferencesChoice(
                "exact",
                "the block's sites share no term of the logp (conditionally independent): each "
                "draw gives every site a draw from its full conditional, all at once"
                if self.independent_sites
                else "integer sites only: each draw is one informed jump per site, weighted by "
                "exact one-site logps; no single-site steps by default, so first-order "
                "differences would go unused",
            )
            self.differences = self._exact_differences(
                model, specs, self.layout, shared, compile_kwargs, self._balancing()
            )
        else:
            self.differences_choice = DifferencesChoice(differences, f"differences={differences!r}")
            self.differences = self._make_differences(
                differences, model, specs, self.layout, shared, compile_kwargs
            )
        self.differences_kind = self.differences.kind
        self.differences_reason = self.differences_choice.reason
        self.tune = True
        self._reset_tuning_record()
        # model_logp only where it is the logp of the recorded point: PyMC's CompoundStep keeps
        # the last step's model_logp only (others record 0) and stacks same-named stats, so
        # next to NUTS ours would turn ArviZ's `lp` into a (chain, draw, 2) array
        self.emits_model_logp = set(vars) == set(model.value_vars)
        stats = dict(self.stats_dtypes_shapes)
        if not self.emits_model_logp:
            stats.pop("model_logp")
        self._integer_sites = np.zeros(0, dtype=np.int64)
        if self.integer_jumps:
            self._integer_sites = np.flatnonzero(self.layout.site_kind == INTEGER)
        if self.independent_sites:  # every site is drawn from its full conditional, all at once
            self._integer_sites = np.arange(self.layout.n_sites)
        self._jumps: CompiledJumps | None = None
        if self._integer_sites.size:
            self._jump_target = self._jump_differences(model, specs, shared, compile_kwargs)
            # the supports at the start decide which sites jump and which are drawn over them
            self._jump_target.refresh_bounds(self._x0)
            self._gibbs_sites = (
                self._integer_sites
                if self.independent_sites
                else self._support_gibbs_sites(model, initial_point)
            )
            self._jump_sites = np.setdiff1d(self._integer_sites, self._gibbs_sites)
            self._jump_exponent = self._block_jump_exponent()
            self._move_classes = self._independent_classes(model)
            self._jump_compile_kwargs = compile_kwargs
            self._jumps = self._compile_jumps()  # every draw makes them
            stats["integer_accept"] = (np.float64, [])
            stats["integer_jump"] = (np.float64, [])
        self._site_pieces = None  # the classes keep what they need
        if stats != self.stats_dtypes_shapes:
            self.stats_dtypes_shapes = stats
            self.stats_dtypes = [{k: v[0] for k, v in stats.items()}]
        # the stats of a draw without steps (path length, ...): a zero of each dtype
        self._zero_stats = {k: np.zeros((), dtype=v[0]).item() for k, v in stats.items()}
        super().__init__(vars, shared, blocked=blocked, rng=rng)
        self._check_start(initial_point)
        _log.info(
            "%s on %s: %s neighbour differences (%s).",
            type(self).__name__,
            self.var_names,
            self.differences_kind,
            self.differences_reason,
        )

    @classmethod
    def _resolve_vars(cls, vars, model) -> list:
        """The block's value variables, with one clear error for an empty or repeated list."""
        name = cls.__name__
        if vars is None:
            if not model.value_vars:
                raise ValueError(
                    f"{name}: nothing to sample: vars=None takes the model's free random "
                    "variables and this model has none (a model made only of Potentials and "
                    "observed data has no free variables). Add discrete random variables."
                )
            return list(model.value_vars)
        if isinstance(vars, str) or not isinstance(vars, list | tuple):
            vars = [vars]
        if len(vars) == 0:
            raise ValueError(f"{name}: nothing to sample: vars is empty")
        values = get_value_vars_from_user_vars(list(vars), model)
        seen: set = set()
        for v in values:
            if v in seen:
                raise ValueError(
                    f"{name}: variable {v.name!r} appears more than once in vars; list each "
                    "variable once."
                )
            seen.add(v)
        return values

    # -- steps per draw ------------------------------------------------------------------------
    @property
    def steps_per_draw(self) -> int:
        """MH steps the next draw makes: the value given, or the one-sweep rule
        (:meth:`sweep_steps`) when ``steps_per_draw=None``."""
        fixed = self._steps_per_draw
        return self.sweep_steps() if fixed is None else fixed

    @steps_per_draw.setter
    def steps_per_draw(self, value: int | None) -> None:
        self._steps_per_draw = check_steps_per_draw(value, self.layout.n_sites)

    def sweep_steps(self) -> int:
        """Steps per draw of ``steps_per_draw=None``: one sweep, one step per swept site
        (:meth:`swept_sites`)."""
        return self.swept_sites()

    def swept_sites(self) -> int:
        """Sites a default draw's single-site steps sweep: every site without a move of its own.
        Integer sites get theirs, an informed jump each draw
        (:mod:`pymc_lbp.samplers.integer.reference`), so a block of integer sites only makes no
        single-site steps by default: its draw is one jump per site."""
        return self.layout.n_sites - self._integer_sites.size

    # -- construction helpers ------------------------------------------------------------------
    def _draws_are_jumps_only(self) -> bool:
        """Whether a default draw is the integer sites' jumps and nothing else: every site is an
        integer site with a jump of its own and ``steps_per_draw`` is left to the sweep rule,
        which then makes no single-site steps (:meth:`sweep_steps`)."""
        lay = self.layout
        return (
            self.integer_jumps
            and self._steps_per_draw is None
            and bool(np.all(lay.site_kind == INTEGER))
        )

    def _check_block_options(self, layout: BlockLayout, specs) -> None:
        """Check the sampler's options against the block (subclasses; before any compilation)."""

    def _balancing(self):
        """``(name, log-space function)`` the differences should prepare weights with."""
        return getattr(self, "balancing", None), getattr(self, "log_g", None)

    def _make_differences(self, kind, model, specs, layout, shared, compile_kwargs) -> Differences:
        """Build the differences asked for; ``"auto"`` measures first (see
        :mod:`pymc_lbp.logp.differences_choice`) and sets :attr:`differences_choice`."""
        bal = self._balancing()
        log_g = bal[1] if callable(bal[1]) else log_sqrt
        name = f"{type(self).__name__} on {[s.name for s in specs]}"
        if self.pairwise_kernel and kind in ("auto", "exact"):
            pairwise, why = pairwise_differences(
                model, specs, layout, shared, compile_kwargs, bal, self._x0,
                learned=self.learned_balancing,
            )  # fmt: skip
            if pairwise is not None:
                self.differences_choice = DifferencesChoice("exact", why)
                return pairwise
            _log.debug("%s: no pairwise couplings (%s)", name, why)
        if kind == "exact":
            return self._exact_differences(model, specs, layout, shared, compile_kwargs, bal)
        try:
            grad = GradientDifferences(model, specs, layout, shared, compile_kwargs, bal)
        except NotRelaxableError as err:
            if kind == "gradient":
                raise
            self.differences_choice = DifferencesChoice(
                "exact", f"the model has no differentiable extension in the block: {err}"
            )
            return self._exact_differences(model, specs, layout, shared, compile_kwargs, bal)
        piecewise = ""
        if grad.piecewise:
            piecewise = (
                f"; first-order differences ignore the jumps of {len(grad.piecewise)} "
                "comparison(s) of integer variables (piecewise constant in the relaxation)"
            )
        if kind == "gradient":
            if grad.piecewise:
                probe = probe_first_order(grad, self._x0, log_g, n_steps=0, n_states=1)
                if probe is not None and not probe.exact_match:
                    warnings.warn(
                        f"{name}: differences='gradient' as asked, but the model has "
                        f"{len(grad.piecewise)} comparison(s) of integer variables, which "
                        "first-order differences see as piecewise constant: at the start point "
                        f"they differ from the exact differences by up to {probe.max_error:.3g} "
                        f"nats over {probe.n_compared} moves. The MH correction keeps the chain "
                        "exact, but its proposals are poorer; differences='auto' measures this "
                        "and takes exact differences where first-order ones do not track them.",
                        UserWarning,
                        stacklevel=4,
                    )
            return grad
        probe = probe_first_order(grad, self._x0, log_g)
        choice = choose(probe, layout.n_slots)
        self.differences_choice = choice._replace(reason=choice.reason + piecewise)
        if choice.kind == "gradient":
            # measured again where the chain is (differences_choice.TuningRecheck)
            self._recheck = TuningRecheck(grad, log_g, layout.n_slots, measured=probe is not None)
            self._exact_args = (model, specs, layout, shared, compile_kwargs, bal)
            return grad
        return self._exact_differences(model, specs, layout, shared, compile_kwargs, bal)

    def _jump_differences(self, model, specs, shared, compile_kwargs) -> ExactDifferences:
        """The exact differences whose batched logp at one-site changes the integer jumps
        evaluate (the step's own when they are exact)."""
        if isinstance(self.differences, ExactDifferences):
            return self.differences
        return ExactDifferences(model, specs, self.layout, shared, compile_kwargs, method="batched")

    def _support_gibbs_sites(self, model, initial_point: dict) -> np.ndarray:
        """Integer sites drawn from their full conditional over their support
        (:func:`pymc_lbp.samplers.integer.reference.support_gibbs`) instead of jumping: those with a
        fixed support of at most :data:`SUPPORT_GIBBS_MAX_VALUES` values, when the block's supports
        are all fixed and the batched evaluation of the support stays below
        :data:`SUPPORT_GIBBS_MAX_ELEMENTS` (rows times the model's size)."""
        lay = self.layout
        if not self._jump_target.bounds_are_constant():
            return np.zeros(0, dtype=np.int64)
        small = [s for s in self._integer_sites if uses_support_gibbs(lay.lower[s], lay.upper[s])]
        if not small:
            return np.zeros(0, dtype=np.int64)
        rows = max(int(lay.upper[s] - lay.lower[s]) + 1 for s in small)
        if rows * _model_size(model, initial_point) > SUPPORT_GIBBS_MAX_ELEMENTS:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(small, dtype=np.int64)

    def _site_supports(self, sites: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` of ``sites`` (float, infinite where unbounded): ``0 .. K - 1`` for
        binary and categorical sites, the layout's bounds for integer ones."""
        lay = self.layout
        kind = lay.site_kind[sites]
        lower = np.where(kind == INTEGER, lay.lower[sites], 0)
        upper = np.where(
            kind == INTEGER,
            lay.upper[sites],
            np.where(kind == BINARY, 1, lay.site_ncat[sites] - 1),
        )
        return lower.astype(np.float64), upper.astype(np.float64)

    def _sites_are_independent(self, model, initial_point: dict, specs, shared: dict) -> bool:
        """Whether the block's sites are conditionally independent given the rest of the model:
        no term of the logp touches two of them (the dependency analysis of
        :mod:`pymc_lbp.logp.local_differences`), as the inclusion indicators of a spike-and-slab
        prior or per-unit latent classes. Then informed proposals have nothing to balance (a
        site's move changes no other site's conditional), and a draw gives every site one draw
        from its full conditional over its support, all sites in one compiled call (the
        support Gibbs of :mod:`pymc_lbp.samplers.integer.reference`), and ``steps_per_draw``
        defaults to 0. False when ``steps_per_draw`` is given (the sampler's own steps, as asked),
        when the analysis cannot tell, for a block of one site, where a site's support is not fixed
        or is larger than :data:`~pymc_lbp.samplers.integer.reference.SUPPORT_GIBBS_MAX_VALUES`, or
        where evaluating the supports would cost more than :data:`SUPPORT_GIBBS_MAX_ELEMENTS`."""
        lay = self.layout
        if not self.independent_sites_at_once or lay.n_sites < 2 or self._steps_per_draw:
            return False
        target = Differences(model, specs, lay, shared)  # the block's graph, nothing compiled
        if not target.bounds_are_constant():
            return False
        target.refresh_bounds(self._x0)  # the integer sites' (fixed) supports into the layout
        lower, upper = self._site_supports(np.arange(lay.n_sites))
        if not all(uses_support_gibbs(lo, hi) for lo, hi in zip(lower, upper, strict=True)):
            return False
        rows = int(np.max(upper - lower)) + 1  # finite: uses_support_gibbs checked each
        if rows * _model_size(model, initial_point) > SUPPORT_GIBBS_MAX_ELEMENTS:
            return False
        pieces = site_pieces(model, target._replace, target._x, lay.n_sites, self._x0)
        if pieces is None:
            return False
        self._site_pieces = pieces  # reused by the colour classes
        incidence = sp.csr_matrix(pieces.element_sites)
        shared_terms = incidence.T @ incidence
        return shared_terms.nnz == lay.n_sites  # only the diagonal: no two sites share a term

    def _block_jump_exponent(self) -> int:
        """``J`` of the jump offsets at the start (supports refreshed at the start point).

        When the jumping sites' supports are fixed and finite, the largest
        :func:`scale_exponent` of them (the largest jump spans every support), fixed for good.
        Otherwise (an unbounded support, or one that follows other variables and may widen) the
        chain's starting exponent (:meth:`_jump_exponent_at`: at least
        :data:`MAX_SCALE_EXPONENT`, enough for the start's magnitude), which tuning may grow
        (:meth:`_tune_jump_exponent`). Offsets beyond a site's support weigh 0 either way, see
        :mod:`pymc_lbp.samplers.integer.graph`. Sets :attr:`_jump_exponent_grows`.
        """
        lay = self.layout
        fixed = self._jump_target.bounds_are_constant() and all(
            math.isfinite(float(lay.upper[site]) - float(lay.lower[site]))
            for site in self._jump_sites
        )
        self._jump_exponent_grows = not fixed
        if fixed:
            return max(
                (scale_exponent(lay.lower[site], lay.upper[site]) for site in self._jump_sites),
                default=1,
            )
        return self._jump_exponent_at(self._x0)

    @property
    def _site_logp(self):
        """The compiled batched logp at one-site changes the jumps evaluate (the numpy
        reference's input, for tests; the compiled jumps build on its graph, so it is compiled
        only on first use)."""
        return self._jump_target.site_logp_function()

    @property
    def jumps(self) -> CompiledJumps:
        """The compiled integer jumps (:class:`pymc_lbp.samplers.integer.graph.CompiledJumps`),
        compiled on first use."""
        if self._jumps is None:
            self._jumps = self._compile_jumps()
        return self._jumps

    def _compile_jumps(self) -> CompiledJumps:
        """The compiled jumps at the current :attr:`_jump_exponent` (kept per exponent: chains
        that tune ``J`` again from their start reuse them)."""
        cached = self.__dict__.setdefault("_jumps_by_exponent", {})
        if self._jump_exponent in cached:
            return cached[self._jump_exponent]
        name, fn = self._balancing()
        log_g = graph_balancing(name, fn) if callable(fn) else graph_balancing("sqrt", log_sqrt)
        target = self._jump_target
        jump_classes, gibbs_classes, pieces = self._move_classes
        lower, upper = self._site_supports(self._gibbs_sites)
        jumps = CompiledJumps(
            self._jump_sites,
            self._jump_exponent,
            target.site_logp_graph,
            target.bounds_graph,
            log_g,
            self._jump_compile_kwargs,
            gibbs_sites=self._gibbs_sites,
            gibbs_lower=lower.astype(np.int64),
            gibbs_upper=upper.astype(np.int64),
            jump_classes=jump_classes,
            gibbs_classes=gibbs_classes,
            class_rows=None if pieces is None else pieces.class_rows,
            n_sites=self.layout.n_sites,
        )
        cached[self._jump_exponent] = jumps
        return jumps

    def _independent_classes(self, model) -> tuple[list | None, list | None, object]:
        """Colour classes of the jumping and of the support-Gibbs sites: sites that share no
        term of the logp (the dependency analysis of :mod:`pymc_lbp.logp.local_differences`) move
        at once, their one-site changes evaluated from the logp's elements
        (:meth:`~pymc_lbp.logp.site_pieces.SitePieces.class_rows`). None for a group whose
        sites all interact; all None when the graph cannot be analysed or a term couples sites the
        analysis cannot name."""
        groups = (self._jump_sites, self._gibbs_sites)
        if max(g.size for g in groups) < 2:
            return None, None, None
        pieces = self._site_pieces
        if pieces is None:
            target = self._jump_target
            pieces = site_pieces(model, target._replace, target._x, self.layout.n_sites, self._x0)
        if pieces is None:
            return None, None, None
        incidence = pieces.element_sites
        adjacency = sp.csr_matrix(incidence.T @ incidence)
        out = []
        for sites in groups:
            if sites.size < 2:
                out.append(None)
                continue
            colours = greedy_colouring(sp.csr_matrix(adjacency[sites][:, sites]))
            classes = [np.flatnonzero(colours == c) for c in range(int(colours.max()) + 1)]
            out.append(classes if len(classes) < sites.size else None)
        return out[0], out[1], pieces

    def _jump_integer_sites(self, x: np.ndarray) -> tuple[np.ndarray, float, dict, int, int]:
        """One move per integer site in one compiled call (:attr:`jumps`; the numpy references
        are :func:`pymc_lbp.samplers.integer.reference.jump` and
        :func:`~pymc_lbp.samplers.integer.reference.support_gibbs`); returns the state, its logp,
        the stats, the jumps accepted and the logp evaluations made.

        While tuning, the jumps' exponent ``J`` adapts where the supports do not fix it
        (:meth:`_tune_jump_exponent`); after tuning it is frozen, so the kernel is one fixed
        pi-invariant kernel.
        """
        if self.tune and self._jump_exponent_grows and self._tune_draws == 0:
            self._restart_jump_exponent(x)  # a chain's first tuning draw: J from its start
        jumps = self.jumps
        res = jumps(x, self.rng.random((self._integer_sites.size, 2)))
        if self.tune and self._jump_exponent_grows:
            self._tune_jump_exponent(x, res.x)
        n = self._integer_sites.size
        stats = {"integer_accept": res.sum_accept / n, "integer_jump": res.sum_distance / n}
        return res.x, res.logp, stats, res.n_accepted, jumps.logp_evals_per_call

    def _jump_exponent_at(self, x: np.ndarray) -> int:
        """``J`` a chain started at ``x`` starts from, on a block whose supports do not fix it:
        the largest :func:`~pymc_lbp.samplers.integer.reference.start_exponent` of the jumping sites
        at ``x`` (at least :data:`MAX_SCALE_EXPONENT`, enough bits for the start's magnitude,
        a finite support spanned)."""
        if not self._jump_target.bounds_are_constant():
            self._jump_target.refresh_bounds(x)  # the supports at this start
        lay = self.layout
        return max(
            (start_exponent(x[s], lay.lower[s], lay.upper[s]) for s in self._jump_sites),
            default=MAX_SCALE_EXPONENT,
        )

    def _restart_jump_exponent(self, x: np.ndarray) -> None:
        """Start tuning ``J`` afresh from the chain's start ``x`` (its first tuning draw): every
        chain tunes its own, as a copy of the untuned step does under ``pm.sample(cores > 1)``,
        whether the chains run in sequence or in parallel."""
        exponent = self._jump_exponent_at(x)
        if exponent != self._jump_exponent:
            _log.debug(
                "%s on %s: integer jumps start at J = %d (offsets up to +-2^%d).",
                type(self).__name__,
                self.var_names,
                exponent,
                exponent,
            )
            self._set_jump_exponent(exponent)

    def _tune_jump_exponent(self, x: np.ndarray, y: np.ndarray) -> None:
        """Grow ``J`` after a tuning draw ``x -> y`` in which a jumping site's accepted jump used
        the largest offset ``2^J`` (:func:`~pymc_lbp.samplers.integer.reference.grown_exponent`:
        doubled, at most 62); the jumps are compiled again at the next draw.

        A jump to the edge of the offsets says larger moves are wanted: a chain started far
        from its posterior, or a posterior wider than ``2^J``. Only the tuning draws adapt ``J``
        (tune-then-freeze), and it is a property of the step, not of the state, so each frozen
        kernel has the same offsets forward and in reverse.
        """
        exponent = int(self._jump_exponent)
        sites = self._jump_sites
        if exponent >= LARGEST_SCALE_EXPONENT or sites.size == 0:
            return
        # each jumping site jumps once per call: its change is its accepted offset (int64-safe)
        moved = np.abs(np.asarray(y, dtype=np.int64)[sites] - np.asarray(x, dtype=np.int64)[sites])
        if not np.any(moved == 2**exponent):
            return
        grown = grown_exponent(exponent)
        _log.info(
            "%s on %s: a tuning jump used the largest offset 2^%d; integer jumps now reach "
            "+-2^%d (J %d -> %d, compiled again for the next draw).",
            type(self).__name__,
            self.var_names,
            exponent,
            grown,
            exponent,
            grown,
        )
        self._set_jump_exponent(grown)

    def _set_jump_exponent(self, exponent: int) -> None:
        """Make ``exponent`` the jumps' ``J``; their compiled call follows lazily (:attr:`jumps`,
        from the cache of :meth:`_compile_jumps` when this ``J`` was compiled before)."""
        self._jump_exponent = int(exponent)
        self._jumps = None

    def _exact_differences(self, model, specs, layout, shared, compile_kwargs, bal):
        exact = ExactDifferences(model, specs, layout, shared, compile_kwargs, bal)
        if exact.logp_evals_per_call > EXPENSIVE_EXACT_EVALS:
            warnings.warn(
                f"{type(self).__name__} on {[s.name for s in specs]}: exact neighbour "
                f"differences ({self.differences_choice.reason}) cost about "
                f"{exact.logp_evals_per_call} logp evaluations per step on this block of "
                f"{layout.n_slots} moves ({exact.method} method: {exact.method_reason}). "
                "Sampling will be slow; smaller blocks (several steps with fewer variables "
                "each) or a model whose terms each touch few sites make it cheaper.",
                UserWarning,
                stacklevel=4,
            )
        return exact

    def _state_vector(self, point: dict) -> np.ndarray:
        return np.concatenate(
            [np.asarray(point[s.name], dtype=np.int64).ravel() for s in self.specs]
        )

    def _check_start(self, initial_point: dict) -> None:
        """Note whether the construction's start is feasible; the start is judged at the first
        draw, where ``pm.sample`` gives it (:meth:`_judge_start`), so that
        ``pm.sample(initvals=...)`` can mend a default start of probability zero."""
        for name, shared in self.shared.items():
            shared.set_value(initial_point[name])
        x = self._state_vector(initial_point)
        self.differences.refresh_bounds(x)
        self._judge_at_first_draw = True
        if not np.isfinite(self.differences.logp(x)):
            _log.info(
                "%s on %s: the start point given at construction has probability zero; the "
                "start pm.sample gives (initvals=...) is judged at the first draw.",
                type(self).__name__,
                self.var_names,
            )

    def _check_values(self, x: np.ndarray, where: str) -> None:
        """A ``ValueError`` naming the variable when a site holds no value of its own (a
        categorical value outside ``0 .. K - 1``, a binary one not 0 or 1)."""
        bad = self.layout.outside_categories(x)
        if bad.size == 0:
            return
        site = int(bad[0])
        spec = next(s for s in self.specs if s.offset <= site < s.offset + s.size)
        index = np.unravel_index(site - spec.offset, spec.shape) if spec.shape else ()
        at = f"{spec.name}[{', '.join(map(str, index))}]" if index else spec.name
        values = "0 or 1" if spec.kind == "binary" else f"0 .. {spec.n_categories - 1}"
        raise ValueError(
            f"{type(self).__name__}: {where} has {at} = {int(x[site])}, which is not a value of "
            f"{spec.name!r} ({spec.kind}: {values}); {bad.size} site(s) of the block are out of "
            "range. Give a start inside the support (pm.sample(initvals=...))."
        )

    def _judge_start(self, x: np.ndarray) -> None:
        """The first draw's start (what ``pm.sample`` gives, ``initvals`` included): every site
        within its values and a finite logp, else a ``ValueError`` that says so."""
        self._check_values(x, "the start point")
        self.differences.refresh_bounds(x)
        logp = self.differences.logp(x)
        if not np.isfinite(logp):
            raise ValueError(
                f"{type(self).__name__}: the starting point has log-probability {logp} "
                f"(variables {list(self.var_names)}, other variables at their current values). "
                "Give a feasible start via pm.sample(initvals=...) or the variables' initval."
            )
        self._judge_at_first_draw = False

    def _recheck_differences(self, x: np.ndarray) -> None:
        """Measure a first-order choice again from ``x`` (see
        :class:`~pymc_lbp.logp.differences_choice.TuningRecheck`); switch to exact
        differences for good when the rule says so."""
        recheck = self._recheck
        choice = recheck.check(x, self._tune_draws)
        if choice.kind == "gradient":
            return
        self.differences_choice = choice
        self.differences = self._exact_differences(*self._exact_args)
        self.differences_kind = self.differences.kind
        self.differences_reason = choice.reason
        self._recheck = self._exact_args = None
        self._differences_changed()
        _log.info(
            "%s on %s: switched to exact neighbour differences (%s).",
            type(self).__name__,
            self.var_names,
            choice.reason,
        )

    def _differences_changed(self) -> None:
        """Drop what was compiled from the previous differences (subclasses' kernels)."""

    # -- the PyMC contract ----------------------------------------------------------------------
    def reset_tuning(self) -> None:
        """Restore the untuned settings (a step reused for a new chain starts fresh; its start
        is judged at its first draw). Exact differences chosen while tuning an earlier chain
        are kept: they are right everywhere."""
        self.tune = True
        self._reset_tuning_record()
        self._judge_at_first_draw = True

    def stop_tuning(self) -> None:
        """End tuning: adapted settings are frozen from now on.

        Warns (``UserWarning``) when, over at least :data:`TUNING_CHECK_MIN_DRAWS` tuning draws,
        the chain never moved, or the mean acceptance of the second half of tuning is further
        than :data:`ACCEPT_TOLERANCE` from ``target_accept`` (samplers that tune toward one).
        """
        if self.tune:
            self._check_tuning()
        self.tune = False

    def _reset_tuning_record(self) -> None:
        self._tune_draws = 0
        self._tune_accepted = 0
        self._tune_accept: list[float] = []

    def _record_tuning(self, accept: float, n_accepted: int) -> None:
        self._tune_draws += 1
        self._tune_accepted += n_accepted
        self._tune_accept.append(accept)

    def _check_tuning(self) -> None:
        n = self._tune_draws
        if n < TUNING_CHECK_MIN_DRAWS:
            return
        name = f"{type(self).__name__} on {self.var_names}"
        if self._tune_accepted == 0:
            warnings.warn(
                f"{name}: the chain did not move during tuning ({n} draws, no step accepted). "
                "Either the posterior is concentrated on the start point or the sampler is "
                "stuck there; the draws will not explore the posterior. Check the start point, "
                "the model, or try another sampler (e.g. PathAuxiliaryLBP).",
                UserWarning,
                stacklevel=2,
            )
            return
        # no steps (integer sites only, each draw their jumps): no tuned acceptance to check
        target = self._tuned_target() if self.steps_per_draw else None
        if target is None:
            return
        late = float(np.mean(self._tune_accept[n // 2 :]))
        if abs(late - target) <= ACCEPT_TOLERANCE or self._tuning_at_bound(late > target):
            return
        warnings.warn(
            f"{name}: mean acceptance {late:.3f} over the second half of tuning is far from its "
            f"target {target}. " + self._tuning_advice(late > target),
            UserWarning,
            stacklevel=2,
        )

    def _tuned_target(self) -> float | None:
        """The acceptance rate tuning aimed at (None: this step tunes no acceptance)."""
        return self.target_accept

    def _tuning_at_bound(self, too_high: bool) -> bool:
        """Whether the tuned setting sits at the bound that explains a missed target (then the
        miss is expected, e.g. acceptance above target with paths as long as the block)."""
        return False

    def _tuning_advice(self, too_high: bool) -> str:
        return "Tune longer (pm.sample(tune=...))."

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        x0 = np.asarray(q0.data, dtype=np.int64)
        x = x0.copy()
        if self._judge_at_first_draw:
            self._judge_start(x)
        if self._recheck is not None and self._recheck.due(self._tune_draws, self.tune):
            self._recheck_differences(x)
        n_steps = self.steps_per_draw
        if n_steps:
            self.differences.refresh_bounds(x)
            # always a fresh evaluation: other steps and pm.set_data change the logp between draws
            logp, deltas = self.differences(x)
            self._check_finite(logp)
            run = self.run_steps(x, logp, deltas, n_steps)
            evals = self.differences.logp_evals_per_call + run.logp_evals
            grads = self.differences.grad_evals_per_call + run.grad_evals
        else:  # integer sites only: the draw is their jumps, which evaluate the logp themselves
            run = DrawResult(x, -np.inf, np.zeros(0), 0.0, 0, 0, 0, {})
            evals = grads = 0
        x, logp = run.x, run.logp
        jumps, jump_accepted, jump_evals = {}, 0, 0
        if self._integer_sites.size:  # supports at the current state are computed in the graph
            x, logp, jumps, jump_accepted, jump_evals = self._jump_integer_sites(x)
            self._check_finite(logp)
        if n_steps:
            accept, n_accepted = run.sum_accept / n_steps, run.n_accepted
        else:
            accept, n_accepted = jumps["integer_accept"], jump_accepted
        stats = {
            "tune": bool(self.tune),
            "accept": accept,
            "n_accepted": n_accepted,
            "mh_steps": n_steps,
            "jump_distance": int(np.count_nonzero(x != x0)),
            "logp_evals": int(evals + jump_evals),
            "grad_evals": int(grads),
        }
        if "exact_differences" in self.stats_dtypes_shapes:
            stats["exact_differences"] = self.differences_kind == "exact"
        if self.emits_model_logp:
            stats["model_logp"] = float(logp)
        stats.update(self.summarize_extras(run.extras))
        stats.update(jumps)
        if not n_steps:  # the steps' own stats (path length, ...) are 0 on a draw without steps
            for key, zero in self._zero_stats.items():
                stats.setdefault(key, zero)
        if self.tune:
            self._record_tuning(accept, n_accepted)
        return RaveledVars(x.astype(q0.data.dtype, copy=False), q0.point_map_info), [stats]

    def _check_finite(self, logp: float) -> None:
        if not np.isfinite(logp):
            raise pm.exceptions.SamplingError(
                f"{type(self).__name__}: the current state of {self.var_names} has "
                f"log-probability {logp}; the discrete block cannot move from a state of zero "
                "probability. Check the start point and the other steps' variables."
            )

    def run_steps(self, x: np.ndarray, logp: float, deltas: np.ndarray, n_steps: int) -> DrawResult:
        """The ``n_steps`` MH transitions of one draw from a state of known logp and
        differences (default: :meth:`mh_step` in a Python loop; compiled kernels override)."""
        total_accept = 0.0
        n_accepted = evals = grads = 0
        extras: dict[str, list] = {}
        for _ in range(n_steps):
            res = self.mh_step(x, logp, deltas)
            if res.evaluated:
                evals += self.differences.logp_evals_per_call
                grads += self.differences.grad_evals_per_call
            x, logp, deltas = res.x, res.logp, res.deltas
            total_accept += res.accept
            n_accepted += int(res.accepted)
            for key, val in (res.extra or {}).items():
                extras.setdefault(key, []).append(val)
        return DrawResult(x, logp, deltas, total_accept, n_accepted, evals, grads, extras)

    def pairwise_ready(self) -> bool:
        """Whether this draw runs :mod:`pymc_lbp.samplers.pairwise.kernel`: the differences are a
        pairwise binary block's couplings and they are finite at the current values of the
        other variables (checked by the draw's first evaluation)."""
        d = self.differences
        return isinstance(d, PairwiseDifferences) and d.usable

    def run_pairwise(
        self, x: np.ndarray, logp: float, n_steps: int, **options
    ) -> tuple[DrawResult, PairwiseSteps]:
        """The draw's transitions in one call of
        :func:`pymc_lbp.samplers.pairwise.kernel.pairwise_steps` (``options``: its keyword
        arguments), drawing from ``self.rng``."""
        d = self.differences
        x = x.copy()
        h = d.field(x)
        name, params = self.pairwise_balancing()
        res = pairwise_steps(
            x, h, logp, d.couplings, n_steps, name, self.rng, params=params, **options
        )
        deltas = (1.0 - 2.0 * x) * h
        draw = DrawResult(x, res.logp, deltas, res.sum_accept, res.n_accepted, 0, 0, {})
        return draw, res

    def pairwise_balancing(self) -> tuple[str, np.ndarray | None]:
        """The balancing function as :func:`pymc_lbp.samplers.pairwise.kernel.pairwise_steps` takes
        it: a built-in name (the step's ``balancing``), or a learned one and its parameters."""
        return self.balancing, None

    def draw_from_kernel(self, res, extras: dict[str, list] | None = None) -> DrawResult:
        """The :class:`DrawResult` of a compiled kernel run (``res`` with ``x``, ``logp``,
        ``deltas``, ``sum_accept``, ``n_accepted``, ``n_evaluated``), its work counted from
        the differences' cost per evaluation."""
        d = self.differences
        return DrawResult(
            res.x,
            res.logp,
            res.deltas,
            res.sum_accept,
            res.n_accepted,
            res.n_evaluated * d.logp_evals_per_call,
            res.n_evaluated * d.grad_evals_per_call,
            extras or {},
        )

    def summarize_extras(self, extras: dict[str, list]) -> dict[str, Any]:
        """Reduce per-step extra stats to per-draw scalars (default: the mean)."""
        return {k: float(np.mean(v)) for k, v in extras.items()}

    def mh_step(self, x: np.ndarray, logp: float, deltas: np.ndarray) -> StepResult:
        """One MH transition from ``x`` with known logp and neighbour differences."""
        raise NotImplementedError

    @classmethod
    def competence(cls, var, has_grad=None) -> Competence:
        """COMPATIBLE for supported discrete variables; IDEAL once :func:`register` ran."""
        if not _supported_rv(var):
            return Competence.INCOMPATIBLE
        return Competence.IDEAL if cls._registered else Competence.COMPATIBLE
