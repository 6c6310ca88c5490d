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

The class is put together from mixins, one module each: the neighbour differences and the start
checks (:mod:`pymc_lbp.step_methods.discrete_step_differences`) and the tuning bookkeeping
(:mod:`pymc_lbp.step_methods.discrete_step_tuning`); the integer sites' moves (support Gibbs and
jumps) are a component the step holds, ``step.integer_moves``
(:class:`pymc_lbp.samplers.integer.moves.IntegerMoves`); the transition records and
steps-per-draw rules are in :mod:`pymc_lbp.step_methods.step_results`. All their public names
are importable from here.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, ClassVar

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars
from pymc.distributions.truncated import TruncatedRV
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_value_vars_from_user_vars
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV

from pymc_lbp.logp.layout import (
    INTEGER,
    BlockLayout,
    describe_block,
    integer_support,
    truncated_support,
)
from pymc_lbp.samplers.integer.moves import (
    SUPPORT_GIBBS_MAX_ELEMENTS,  # noqa: F401 (re-exported)
    IntegerMoves,
    sites_are_independent,
)
from pymc_lbp.samplers.pairwise.couplings import PairwiseDifferences
from pymc_lbp.samplers.pairwise.kernel import PairwiseSteps, pairwise_steps
from pymc_lbp.step_methods.differences_choice import (
    DifferencesChoice,
    TuningRecheck,
)
from pymc_lbp.step_methods.discrete_step_differences import (
    EXPENSIVE_EXACT_EVALS,  # noqa: F401 (re-exported)
    DiscreteStepDifferences,
)
from pymc_lbp.step_methods.discrete_step_tuning import (
    ACCEPT_TOLERANCE,  # noqa: F401 (re-exported)
    TUNING_CHECK_MIN_DRAWS,  # noqa: F401 (re-exported)
    DiscreteStepTuning,
)
from pymc_lbp.step_methods.stats import dtypes_shapes
from pymc_lbp.step_methods.step_results import (
    MAX_STEPS_PER_DRAW,  # noqa: F401 (re-exported)
    DrawResult,  # noqa: F401 (re-exported)
    StepResult,  # noqa: F401 (re-exported)
    check_steps_per_draw,  # noqa: F401 (re-exported)
    steps_for_a_sweep,  # noqa: F401 (re-exported)
)

DIFFERENCES = ("exact", "gradient", "auto")

_log = logging.getLogger("pymc_lbp")


@dataclass_state
class DiscreteStepState(StepMethodState):
    tune: bool


PYMC_ARGUMENTS = "{pymc_arguments}"
"""The line of a step class's docstring replaced by :data:`PYMC_ARGUMENTS_DOC` when the class is
made (:meth:`DiscreteStep.__init_subclass__`)."""

PYMC_ARGUMENTS_DOC = """**kwargs
    PyMC's step-method arguments ``model``, ``rng``, ``initial_point``, ``compile_kwargs`` and
    ``blocked``, passed on to :class:`~pymc_lbp.step_methods.base.DiscreteStep` (documented
    there)."""


def model_and_start(kwargs: dict) -> tuple[pm.Model, dict]:
    """The model and start point of PyMC's step-method arguments ``kwargs`` (see
    :class:`DiscreteStep`), for a step class that needs them before it builds its base: the model
    in context and its initial point by default, written into ``kwargs`` so that the start point
    is computed once."""
    model = kwargs["model"] = pm.modelcontext(kwargs.get("model"))
    if kwargs.get("initial_point") is None:
        kwargs["initial_point"] = model.initial_point()
    return model, kwargs["initial_point"]


def _supported_rv(rv) -> bool:
    op = getattr(rv.owner, "op", None)
    if isinstance(op, BernoulliRV | CategoricalRV):
        return True
    if op is None or not rv.dtype.startswith("int"):
        return False
    if isinstance(op, TruncatedRV):
        return truncated_support(op, rv.owner.inputs) is not None
    if not hasattr(op, "dist_params"):
        return False
    try:
        return integer_support(op, op.dist_params(rv.owner)) is not None
    except Exception:  # noqa: BLE001 - an exotic op is simply not ours
        return False


class DiscreteStep(DiscreteStepDifferences, DiscreteStepTuning, ArrayStepShared):
    """Base class of the pymc_lbp step methods (not used directly).

    The last five parameters are PyMC's own step-method arguments, which ``pm.sample`` passes
    when it builds the steps; they are documented here once, and the subclasses take them as
    ``**kwargs`` and pass them on to this class (:func:`model_and_start` where they need the
    model first), with the docstring entry :data:`PYMC_ARGUMENTS_DOC`.

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
        :mod:`.differences_choice`). The choice is in :attr:`differences_choice`
        (with its reason and measurements), logged (logger ``"pymc_lbp"``, INFO), and recorded in
        the stat ``exact_differences``.
    model : pymc.Model, optional
        The model; default: the one in context.
    rng : RandomGenerator, optional
        The step's random generator (``pm.sample`` gives each chain's steps their own).
    initial_point : dict, optional
        The start point the block is read at; default: the model's initial point.
    compile_kwargs : dict, optional
        Passed to pytensor compilation (``{"mode": "NUMBA"}``, ``{"mode": "JAX"}``, ...).
    blocked : bool, default True
        PyMC's flag; with ``False`` each variable gets its own step.
    """

    name = "discrete_step"
    default_blocked = True
    # Names shared with PyMC's steps have their dtypes there ("accept" float64, "tune" bool,
    # "model_logp" float64 as NUTS/HMC); PyMC's "accepted" is float64 in Metropolis and bool in
    # DEMetropolis/HMC, so no dtype coexists with both: we count accepted steps in "n_accepted".
    stats_dtypes_shapes: ClassVar[dict] = dtypes_shapes(
        "tune",
        "accept",
        "n_accepted",
        "mh_steps",
        "sites_changed",
        "model_logp",
        "logp_evals",
        "grad_evals",
        "exact_differences",
    )
    conditional_stats: ClassVar[tuple[str, ...]] = (
        "model_logp",
        "integer_accept",
        "integer_jump_size",
    )
    """Stats an instance adds to or drops from ``stats_dtypes_shapes`` at construction (their
    conditions are in :data:`pymc_lbp.step_methods.stats.STATS`)."""
    target_accept: float | None = None
    integer_jumps: ClassVar[bool] = True
    """Whether each draw gives every integer site one informed jump
    (:mod:`pymc_lbp.samplers.integer.reference`)."""
    jax_kind: ClassVar[str | None] = None
    """Which JAX version runs the step in :func:`pymc_lbp.sample`'s compiled program (its room's
    ``jax_steps.py``, which the class's ``program_steps(model, to_jax)`` reads;
    :func:`pymc_lbp.whole_model.discrete_blocks.program_kind`), ``None`` where there is none;
    each class declares its own (a subclass inherits none)."""
    independent_sites_at_once: ClassVar[bool] = True
    """Whether a block of conditionally independent sites is drawn from its full conditionals
    at once (:func:`~pymc_lbp.samplers.integer.moves.sites_are_independent`) instead of by
    single-site steps."""
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

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        doc = cls.__dict__.get("__doc__")
        for line in (doc or "").splitlines():  # the entry of PyMC's arguments, written once
            if line.strip() == PYMC_ARGUMENTS:
                indent = line[: len(line) - len(line.lstrip())]
                entry = "\n".join(indent + part for part in PYMC_ARGUMENTS_DOC.splitlines())
                cls.__doc__ = doc.replace(line, entry, 1)
                break

    def __new__(cls, *args, **kwargs):
        # PyMC's BlockedStep.__new__ inspects vars first; give our errors before its own
        cls._check_keywords(kwargs)
        vars = args[0] if args else kwargs.get("vars")
        cls._resolve_vars(vars, pm.modelcontext(kwargs.get("model")))
        return super().__new__(cls, *args, **kwargs)

    @classmethod
    def _check_keywords(cls, kwargs: dict) -> None:
        """A ``TypeError`` naming the step class for a keyword none of its ``__init__`` (its own,
        or a base's it passes ``**kwargs`` on to) takes; Python would name the base class."""
        known: set[str] = set()
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is not None and issubclass(klass, DiscreteStep):
                known.update(
                    name
                    for name, p in inspect.signature(init).parameters.items()
                    if p.kind is not inspect.Parameter.VAR_KEYWORD
                )
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(
                f"{cls.__name__}() got an unexpected keyword argument {unknown[0]!r}; its "
                f"options: {', '.join(sorted(known - {'self', 'vars'}))}"
            )

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
        self._compile_kwargs = compile_kwargs  # for the kernels the subclasses compile
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
        # a block of conditionally independent sites is drawn from its full conditionals at
        # once, unless steps_per_draw is given; the analysis is kept for the colour classes
        self.independent_sites, pieces = False, None
        if self.independent_sites_at_once and self.layout.n_sites > 1 and not self._steps_per_draw:
            self.independent_sites, pieces = sites_are_independent(
                model, specs, self.layout, shared, self._x0, initial_point
            )
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
        sites = np.zeros(0, dtype=np.int64)
        if self.integer_jumps:
            sites = np.flatnonzero(self.layout.site_kind == INTEGER)
        if self.independent_sites:  # every site is drawn from its full conditional, all at once
            sites = np.arange(self.layout.n_sites)
        self.integer_moves: IntegerMoves | None = None
        """The block's integer moves (support Gibbs and jumps, one per moving site each draw),
        None where no site has one."""
        if sites.size:
            self.integer_moves = IntegerMoves(
                self.layout,
                sites,
                self._jump_differences(model, specs, shared, compile_kwargs),
                model=model,
                point=initial_point,
                x0=self._x0,
                all_gibbs=self.independent_sites,
                pieces=pieces,
                balancing=self._balancing(),
                compile_kwargs=compile_kwargs,
                label=f"{type(self).__name__} on {tuple(v.name for v in vars)}",
            )
            stats.update(dtypes_shapes("integer_accept", "integer_jump_size"))
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

    @property
    def steps_per_draw_given(self) -> int | None:
        """The ``steps_per_draw`` option as given: ``None`` for one sweep per draw."""
        return self._steps_per_draw

    def sweep_steps(self) -> int:
        """Steps per draw of ``steps_per_draw=None``: one sweep, one step per swept site
        (:meth:`swept_sites`)."""
        return self.swept_sites()

    def swept_sites(self) -> int:
        """Sites a default draw's single-site steps sweep: every site without a move of its own.
        Integer sites get theirs, an informed jump each draw
        (:mod:`pymc_lbp.samplers.integer.reference`), so a block of integer sites only makes no
        single-site steps by default: its draw is one jump per site."""
        moves = self.integer_moves
        return self.layout.n_sites - (0 if moves is None else moves.n_sites)

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

    # -- the PyMC contract ----------------------------------------------------------------------
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
        if self.integer_moves is not None:  # supports at the current state are in the graph
            first = self._tune_draws == 0
            moved = self.integer_moves.draw(x, self.rng, tuning=self.tune, chain_start=first)
            x, logp, jumps = moved.x, moved.logp, moved.stats
            jump_accepted, jump_evals = moved.n_accepted, moved.logp_evals
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
            "sites_changed": int(np.count_nonzero(x != x0)),
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
