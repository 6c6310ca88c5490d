"""DiscreteStep: the PyMC step-method shell shared by every pymc_lbp sampler.

It owns the variable bookkeeping (a raveled int64 block of one or more discrete variables), the
compiled neighbour differences, ``self.rng``, the stats, tune-then-freeze and competence. A
subclass implements :meth:`DiscreteStep.mh_step`, one Metropolis-Hastings transition from a state
whose logp and neighbour differences are already known; the base runs ``steps_per_draw`` of them
per recorded draw and caches ``(logp, differences)`` of the current state between them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.util import get_value_vars_from_user_vars
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV

from pymc_lbp.neighbours import (
    BlockLayout,
    Differences,
    ExactDifferences,
    GradientDifferences,
    describe_block,
    integer_support,
)
from pymc_lbp.relax import NotRelaxableError

DIFFERENCES = ("exact", "gradient", "auto")


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


class DiscreteStep(ArrayStepShared):
    """Base class of the pymc_lbp step methods (not used directly).

    Parameters
    ----------
    vars : list of variables, optional
        Discrete random variables or their value variables; the block may mix variables of
        different shapes and kinds. Defaults to all the model's value variables.
    steps_per_draw : int, default 1
        Metropolis-Hastings steps per recorded draw.
    differences : {"exact", "gradient", "auto"}
        How neighbour log-probability differences are computed: exact (one logp evaluation per
        neighbour, batched), first-order from the relaxed logp's gradient (one evaluation per
        step), or "auto" (gradient when the model relaxes, exact otherwise, with a warning).
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
    stats_dtypes_shapes: ClassVar[dict] = {
        "accept": (np.float64, []),
        "accepted": (bool, []),
        "n_accepted": (np.int64, []),
        "jump_distance": (np.int64, []),
        "logp_evals": (np.int64, []),
        "grad_evals": (np.int64, []),
    }
    _state_class = DiscreteStepState
    _registered: ClassVar[bool] = False

    def __init__(
        self,
        vars=None,
        *,
        steps_per_draw: int = 1,
        differences: str = "exact",
        model=None,
        rng=None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
    ):
        model = pm.modelcontext(model)
        if initial_point is None:
            initial_point = model.initial_point()
        vars = model.value_vars if vars is None else get_value_vars_from_user_vars(vars, model)
        if isinstance(steps_per_draw, bool) or not isinstance(steps_per_draw, int | np.integer):
            raise ValueError(f"steps_per_draw must be a positive int, got {steps_per_draw!r}")
        if steps_per_draw < 1:
            raise ValueError(f"steps_per_draw must be >= 1, got {steps_per_draw}")
        if differences not in DIFFERENCES:
            raise ValueError(f"differences must be one of {DIFFERENCES}, got {differences!r}")
        self.steps_per_draw = int(steps_per_draw)

        specs = describe_block(model, vars, initial_point)
        self.specs = specs
        self.layout = BlockLayout(specs)
        shared = pm.make_shared_replacements(initial_point, vars, model)
        self.differences = self._make_differences(
            differences, model, specs, self.layout, shared, compile_kwargs
        )
        self.differences_kind = self.differences.kind
        self.tune = True
        super().__init__(vars, shared, blocked=blocked, rng=rng)
        self._check_start(initial_point)

    # -- construction helpers ------------------------------------------------------------------
    def _balancing(self):
        """``(name, log-space function)`` the differences should prepare weights with."""
        return getattr(self, "balancing", None), getattr(self, "log_g", None)

    def _make_differences(self, kind, model, specs, layout, shared, compile_kwargs) -> Differences:
        bal = self._balancing()
        if kind == "exact":
            return ExactDifferences(model, specs, layout, shared, compile_kwargs, bal)
        try:
            diffs = GradientDifferences(model, specs, layout, shared, compile_kwargs, bal)
        except NotRelaxableError as err:
            if kind == "gradient":
                raise
            warnings.warn(
                f"{type(self).__name__}: falling back to exact neighbour differences. {err}",
                UserWarning,
                stacklevel=3,
            )
            return ExactDifferences(model, specs, layout, shared, compile_kwargs, bal)
        if diffs.piecewise:
            warnings.warn(
                f"{type(self).__name__}: first-order differences ignore the jumps of "
                f"{len(diffs.piecewise)} comparison(s) of integer variables in the model "
                "(they are piecewise constant). The MH correction keeps the chain exact, but "
                "differences='exact' may propose better.",
                UserWarning,
                stacklevel=3,
            )
        return diffs

    def _state_vector(self, point: dict) -> np.ndarray:
        return np.concatenate(
            [np.asarray(point[s.name], dtype=np.int64).ravel() for s in self.specs]
        )

    def _check_start(self, initial_point: dict) -> None:
        for name, shared in self.shared.items():
            shared.set_value(initial_point[name])
        x = self._state_vector(initial_point)
        self.differences.refresh_bounds(x)
        logp, _ = self.differences(x)
        if not np.isfinite(logp):
            raise ValueError(
                f"{type(self).__name__}: the starting point has log-probability {logp} "
                f"(variables {[s.name for s in self.specs]}). Give a feasible start via "
                "pm.sample(initvals=...) or the variables' initval."
            )

    # -- the PyMC contract ----------------------------------------------------------------------
    def reset_tuning(self) -> None:
        """Restore the untuned settings (a step reused for a new chain starts fresh)."""
        self.tune = True

    def stop_tuning(self) -> None:
        """End tuning: adapted settings are frozen from now on."""
        self.tune = False

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        x0 = np.asarray(q0.data, dtype=np.int64)
        x = x0.copy()
        self.differences.refresh_bounds(x)
        reused = self._reusable_state(x)
        logp, deltas = reused if reused is not None else self.differences(x)
        if not np.isfinite(logp):
            raise pm.exceptions.SamplingError(
                f"{type(self).__name__}: the current state of {self.var_names} has "
                f"log-probability {logp}; the discrete block cannot move from a state of zero "
                "probability. Check the start point and the other steps' variables."
            )
        evals = 0 if reused is not None else self.differences.logp_evals_per_call
        grads = 0 if reused is not None else self.differences.grad_evals_per_call
        run = self.run_steps(x, logp, deltas)
        x, logp, deltas = run.x, run.logp, run.deltas
        evals += run.logp_evals
        grads += run.grad_evals
        n_accepted, extras = run.n_accepted, run.extras
        stats = {
            "accept": run.sum_accept / self.steps_per_draw,
            "accepted": n_accepted > 0,
            "n_accepted": n_accepted,
            "jump_distance": int(np.count_nonzero(x != x0)),
            "logp_evals": int(evals),
            "grad_evals": int(grads),
        }
        stats.update(self.summarize_extras(extras))
        # the block's logp and differences depend on nothing else when it has no shared inputs
        self._last_state = None if self.shared else (x.copy(), logp, deltas)
        return RaveledVars(x.astype(q0.data.dtype, copy=False), q0.point_map_info), [stats]

    def run_steps(self, x: np.ndarray, logp: float, deltas: np.ndarray) -> DrawResult:
        """The ``steps_per_draw`` MH transitions of one draw from a state of known logp and
        differences (default: :meth:`mh_step` in a Python loop; compiled kernels override)."""
        total_accept = 0.0
        n_accepted = evals = grads = 0
        extras: dict[str, list] = {}
        for _ in range(self.steps_per_draw):
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

    def _reusable_state(self, x: np.ndarray) -> tuple[float, np.ndarray] | None:
        """``(logp, deltas)`` at ``x`` left by the previous draw, when still valid (the block
        has no other inputs and ``x`` is where the previous draw ended); else None."""
        last = getattr(self, "_last_state", None)
        if last is None or self.shared or not np.array_equal(last[0], x):
            return None
        return last[1], last[2]

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
