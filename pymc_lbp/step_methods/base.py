"""DiscreteStep: the PyMC step-method shell shared by every pymc_lbp sampler.

It owns the variable bookkeeping (a raveled int64 block of one or more discrete variables),
the judging of the start, ``self.rng``, the stats, tune-then-freeze and competence; what the
block's states are scored with is the subclass's :meth:`DiscreteStep._build_target`, held as
:attr:`DiscreteStep.target`: the model logp for the block samplers (NeuralBlock, BlockGibbs),
neighbour differences for the others (:class:`pymc_lbp.step_methods.neighbour_step.NeighbourStep`).
A subclass implements :meth:`DiscreteStep.mh_step`, one Metropolis-Hastings transition from a
state whose target is already evaluated, or :meth:`DiscreteStep.run_steps`, a draw's worth of
them; the base carries ``(logp, differences)`` of the current state from one step to the next
within the draw. Nothing is carried from one draw to the next: between draws other steps move
the variables the block's logp depends on, and ``pm.set_data`` changes its data, so every draw
starts with a fresh evaluation at its current state.

The integer sites' moves (support Gibbs and jumps) are a component a step may hold,
``step.integer_moves`` (:class:`pymc_lbp.samplers.integer.moves.IntegerMoves`); the transition
records and steps-per-draw rules are in :mod:`pymc_lbp.step_methods.step_results`.
"""

from __future__ import annotations

import inspect
import logging
import warnings
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

from pymc_lbp.logp.differences import Differences
from pymc_lbp.logp.layout import (
    INTEGER,
    BlockLayout,
    describe_block,
    integer_support,
    truncated_support,
)
from pymc_lbp.step_methods.stats import dtypes_shapes, fill_placeholder
from pymc_lbp.step_methods.step_results import (
    DrawResult,
    StepResult,
    check_steps_per_draw,
    steps_for_a_sweep,  # noqa: F401 (re-exported)
)

_log = logging.getLogger("pymc_lbp")

TUNING_CHECK_MIN_DRAWS = 20
"""Tuning diagnostics (:meth:`DiscreteStep.stop_tuning`) need at least this many tuning draws."""

ACCEPT_TOLERANCE = 0.25
"""A tuned mean acceptance further than this from ``target_accept`` is reported."""


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


class DiscreteStep(ArrayStepShared):
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
        :data:`~pymc_lbp.step_methods.step_results.MAX_STEPS_PER_DRAW` (or ten sweeps on blocks
        of more than 100,000 sites).
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
    )
    conditional_stats: ClassVar[tuple[str, ...]] = (
        "model_logp",
        "integer_accept",
        "integer_jump_size",
    )
    """Stats an instance adds to or drops from ``stats_dtypes_shapes`` at construction (their
    conditions are in :data:`pymc_lbp.step_methods.stats.STATS`)."""
    target_accept: float | None = None
    jax_kind: ClassVar[str | None] = None
    """Which JAX version runs the step in :func:`pymc_lbp.sample`'s compiled program (its room's
    ``jax_steps.py``, which the class's ``program_steps(model, to_jax)`` reads;
    :func:`pymc_lbp.whole_model.discrete_blocks.program_kind`), ``None`` where there is none;
    each class declares its own (a subclass inherits none)."""
    auto_assignable: ClassVar[bool] = True
    auto_assign_needs: ClassVar[str] = ""
    _state_class = DiscreteStepState
    _registered: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        doc = cls.__dict__.get("__doc__") or ""  # the entry of PyMC's arguments, written once
        doc = fill_placeholder(doc, PYMC_ARGUMENTS, PYMC_ARGUMENTS_DOC)
        if doc is not None:
            cls.__doc__ = doc

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
        self.specs = describe_block(model, vars, initial_point)
        self.layout = BlockLayout(self.specs)
        self._steps_per_draw = check_steps_per_draw(steps_per_draw, self.layout.n_sites)
        self._check_block_options(self.layout, self.specs)
        shared = pm.make_shared_replacements(initial_point, vars, model)
        self._x0 = self.state_vector(initial_point)
        self.check_values(self._x0, "the start point given to the step")
        self.integer_moves = None
        """The block's integer moves (support Gibbs and jumps, one per moving site each draw),
        None where no site has one (a subclass's :meth:`_build_target` makes them)."""
        self.target: Differences = self._build_target(model, shared, initial_point)
        """What the block's states are scored with: ``target(x) -> (logp, neighbour
        differences)`` (an empty array of differences for the block samplers),
        ``target.logp(x)``, ``target.refresh_bounds(x)``, and its cost per call
        (``logp_evals_per_call``, ``grad_evals_per_call``)."""
        self.tune = True
        self._reset_tuning_record()
        # model_logp only where it is the logp of the recorded point: PyMC's CompoundStep keeps
        # the last step's model_logp only (others record 0) and stacks same-named stats, so
        # next to NUTS ours would turn ArviZ's `lp` into a (chain, draw, 2) array
        self.emits_model_logp = set(vars) == set(model.value_vars)
        stats = dict(self.stats_dtypes_shapes)
        if not self.emits_model_logp:
            stats.pop("model_logp")
        if self.integer_moves is not None:
            stats.update(dtypes_shapes("integer_accept", "integer_jump_size"))
        if stats != self.stats_dtypes_shapes:
            self.stats_dtypes_shapes = stats
            self.stats_dtypes = [{k: v[0] for k, v in stats.items()}]
        # the stats of a draw without steps (path length, ...): a zero of each dtype
        self._zero_stats = {k: np.zeros((), dtype=v[0]).item() for k, v in stats.items()}
        super().__init__(vars, shared, blocked=blocked, rng=rng)
        self._check_start(initial_point)

    def _build_target(self, model, shared: dict, initial_point: dict) -> Differences:
        """What the block's states are scored with (:attr:`target`); subclasses build it from
        the model, the step's shared copies of the other variables and the start point."""
        raise NotImplementedError

    def _check_block_options(self, layout: BlockLayout, specs) -> None:
        """Check the sampler's options against the block (subclasses; before any compilation)."""

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

    # -- the start ---------------------------------------------------------------------------
    def state_vector(self, point: dict) -> np.ndarray:
        """The block's sites at ``point`` (the model's values by name), as one int64 vector."""
        return np.concatenate(
            [np.asarray(point[s.name], dtype=np.int64).ravel() for s in self.specs]
        )

    def _check_start(self, initial_point: dict) -> None:
        """Note whether the construction's start is feasible; the start is judged at the first
        draw, where ``pm.sample`` gives it (:meth:`_judge_start`), so that
        ``pm.sample(initvals=...)`` can mend a default start of probability zero."""
        for name, shared in self.shared.items():
            shared.set_value(initial_point[name])
        x = self.state_vector(initial_point)
        self.target.refresh_bounds(x)
        self._judge_at_first_draw = True
        if not np.isfinite(self.target.logp(x)):
            _log.info(
                "%s on %s: the start point given at construction has probability zero; the "
                "start pm.sample gives (initvals=...) is judged at the first draw.",
                type(self).__name__,
                self.var_names,
            )

    def check_values(self, x: np.ndarray, where: str, *, integers: bool = False) -> None:
        """A ``ValueError`` naming the variable when a site holds no value of its own (a
        categorical value outside ``0 .. K - 1``, a binary one not 0 or 1; with ``integers``, an
        integer one outside its support, whose bounds were just refreshed at ``x``)."""
        layout = self.layout
        bad = layout.outside_categories(x)
        if integers:
            outside = (layout.site_kind == INTEGER) & ((x < layout.lower) | (x > layout.upper))
            bad = np.union1d(bad, np.flatnonzero(outside))
        if bad.size == 0:
            return
        site = int(bad[0])
        spec = next(s for s in self.specs if s.offset <= site < s.offset + s.size)
        index = np.unravel_index(site - spec.offset, spec.shape) if spec.shape else ()
        at = f"{spec.name}[{', '.join(map(str, index))}]" if index else spec.name
        if spec.kind == "integer":
            values = f"{layout.lower[site]:.0f} .. {layout.upper[site]:.0f}"
        else:
            values = "0 or 1" if spec.kind == "binary" else f"0 .. {spec.n_categories - 1}"
        raise ValueError(
            f"{type(self).__name__}: {where} has {at} = {int(x[site])}, which is not a value of "
            f"{spec.name!r} ({spec.kind}: {values}); {bad.size} site(s) of the block are out of "
            "range. Give a start inside the support (pm.sample(initvals=...))."
        )

    def _judge_start(self, x: np.ndarray) -> None:
        """The first draw's start (what ``pm.sample`` gives, ``initvals`` included): every site
        within its values and a finite logp, else a ``ValueError`` that says so."""
        self.check_values(x, "the start point")
        self.target.refresh_bounds(x)
        self.check_values(x, "the start point", integers=True)
        logp = self.target.logp(x)
        if not np.isfinite(logp):
            raise ValueError(
                f"{type(self).__name__}: the starting point has log-probability {logp} "
                f"(variables {list(self.var_names)}, other variables at their current values). "
                "Give a feasible start via pm.sample(initvals=...) or the variables' initval."
            )
        self._judge_at_first_draw = False

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

    # -- the PyMC contract ----------------------------------------------------------------------
    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        x0 = np.asarray(q0.data, dtype=np.int64)
        x = x0.copy()
        if self._judge_at_first_draw:
            self._judge_start(x)
        self._before_draw(x)
        n_steps = self.steps_per_draw
        if n_steps:
            self.target.refresh_bounds(x)
            # always a fresh evaluation: other steps and pm.set_data change the logp between draws
            logp, deltas = self.target(x)
            self._check_finite(logp)
            run = self.run_steps(x, logp, deltas, n_steps)
            evals = self.target.logp_evals_per_call + run.logp_evals
            grads = self.target.grad_evals_per_call + run.grad_evals
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
        stats.update(self._target_stats())
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

    def _before_draw(self, x: np.ndarray) -> None:
        """What a subclass does at the start of a draw, from its start ``x``, before the target
        is evaluated (NeighbourStep: its re-check of first-order differences)."""

    def _target_stats(self) -> dict[str, Any]:
        """The draw's stats about the target (NeighbourStep: ``exact_differences``)."""
        return {}

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
                evals += self.target.logp_evals_per_call
                grads += self.target.grad_evals_per_call
            x, logp, deltas = res.x, res.logp, res.deltas
            total_accept += res.accept
            n_accepted += int(res.accepted)
            for key, val in (res.extra or {}).items():
                extras.setdefault(key, []).append(val)
        return DrawResult(x, logp, deltas, total_accept, n_accepted, evals, grads, extras)

    def draw_from_kernel(self, res, extras: dict[str, list] | None = None) -> DrawResult:
        """The :class:`DrawResult` of a compiled kernel run (``res`` with ``x``, ``logp``,
        ``deltas``, ``sum_accept``, ``n_accepted``, ``n_evaluated``), its work counted from
        the target's cost per evaluation."""
        d = self.target
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
        """One MH transition from ``x`` with known logp and neighbour differences (the
        target's, an empty array for the block samplers)."""
        raise NotImplementedError

    # -- tuning --------------------------------------------------------------------------------
    def reset_tuning(self) -> None:
        """Restore the untuned settings (a step reused for a new chain starts fresh; its start
        is judged at its first draw). Exact differences chosen while tuning an earlier chain
        are kept: they are right everywhere. The integer jumps' ``J`` is the untuned one again
        (each chain then starts it from its own start, at its first tuning draw)."""
        self.tune = True
        self._reset_tuning_record()
        self._judge_at_first_draw = True
        if self.integer_moves is not None:
            self.integer_moves.reset()

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
            other = (
                "PathAuxiliaryLBP"
                if type(self).__name__ == "BlockGibbs"
                else "BlockGibbs, which updates the variables of a zero-probability constraint "
                "together"
            )
            warnings.warn(
                f"{name}: the chain did not move during tuning ({n} draws, no step accepted). "
                "Either the posterior is concentrated on the start point or the sampler is "
                "stuck there; the draws will not explore the posterior. Check the start point, "
                f"the model, or try another sampler (e.g. {other}).",
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

    @classmethod
    def competence(cls, var, has_grad=None) -> Competence:
        """COMPATIBLE for supported discrete variables; IDEAL once :func:`register` ran."""
        if not _supported_rv(var):
            return Competence.INCOMPATIBLE
        return Competence.IDEAL if cls._registered else Competence.COMPATIBLE
