"""NeighbourStep: the shell of the samplers that propose from neighbour differences
(LocallyBalanced, GibbsWithGradients, SelfBalancing, PathAuxiliaryLBP).

A :class:`~pymc_lbp.step_methods.base.DiscreteStep` whose target is the block's neighbour
differences, ``target(x) -> (logp, differences)`` (also :attr:`NeighbourStep.differences`):
how they are chosen (``differences="auto"``: the rules of
:mod:`pymc_lbp.step_methods.differences_choice`) and built, the re-check that switches
first-order differences to exact ones where they turn out wrong, the block's integer moves
(:class:`pymc_lbp.samplers.integer.moves.IntegerMoves`, a component the step holds: every integer
site's informed jump, or, for a block of conditionally independent sites, every site's draw
from its full conditional at once), and the pairwise binary kernel
(:mod:`pymc_lbp.samplers.pairwise.kernel`) where a step runs it.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, ClassVar

import numpy as np

from pymc_lbp.logp.differences import Differences, ExactDifferences, GradientDifferences
from pymc_lbp.logp.layout import INTEGER
from pymc_lbp.logp.relaxed_values import NotRelaxableError
from pymc_lbp.samplers.balancing import log_sqrt
from pymc_lbp.samplers.integer.moves import IntegerMoves, sites_are_independent
from pymc_lbp.samplers.pairwise.couplings import PairwiseDifferences, pairwise_differences
from pymc_lbp.samplers.pairwise.kernel import PairwiseSteps, pairwise_steps
from pymc_lbp.step_methods.base import DiscreteStep, DrawResult
from pymc_lbp.step_methods.differences_choice import (
    DifferencesChoice,
    TuningRecheck,
    choose,
    probe_first_order,
)
from pymc_lbp.step_methods.stats import dtypes_shapes

_log = logging.getLogger("pymc_lbp")

DIFFERENCES = ("exact", "gradient", "auto")

EXPENSIVE_EXACT_EVALS = 2000
"""Exact differences that cost more logp evaluations than this per call are reported (the
batched method costs one per move; the local one a few, plus one per move for terms that couple
the whole block)."""


class NeighbourStep(DiscreteStep):
    """Base class of the samplers that propose from neighbour differences (not used directly).

    Parameters
    ----------
    vars, steps_per_draw
        As :class:`~pymc_lbp.step_methods.base.DiscreteStep`'s.
    differences : {"auto", "exact", "gradient"}, default "auto"
        How neighbour log-probability differences are computed: exact (local terms or one logp
        evaluation per neighbour, batched), first-order from the relaxed logp's gradient (one
        evaluation per step), or "auto": first-order where they are measured to track the exact
        ones from the start point and, while tuning, again from where the chain is (a step whose
        first-order proposals stop tracking them switches to exact ones for good), exact
        otherwise (the rule: :mod:`.differences_choice`). The choice is in
        :attr:`differences_choice` (with its reason and measurements), logged (logger
        ``"pymc_lbp"``, INFO), and recorded in the stat ``exact_differences``.
    **kwargs
        PyMC's step-method arguments, passed on to
        :class:`~pymc_lbp.step_methods.base.DiscreteStep`.
    """

    stats_dtypes_shapes: ClassVar[dict] = dtypes_shapes(
        *DiscreteStep.stats_dtypes_shapes, "exact_differences"
    )
    integer_jumps: ClassVar[bool] = True
    """Whether each draw gives every integer site one informed jump
    (:mod:`pymc_lbp.samplers.integer.reference`)."""
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

    def __init__(self, vars=None, *, differences: str = "auto", **kwargs):
        if differences not in DIFFERENCES:
            raise ValueError(f"differences must be one of {DIFFERENCES}, got {differences!r}")
        self._differences_option = differences
        super().__init__(vars, **kwargs)

    @property
    def differences(self) -> Differences:
        """The block's neighbour differences (the step's :attr:`target`)."""
        return self.target

    def _build_target(self, model, shared: dict, initial_point: dict) -> Differences:
        """The neighbour differences the option asks for, and the integer moves: a block of
        conditionally independent sites is drawn from its full conditionals at once (unless
        ``steps_per_draw`` is given), integer sites get their jumps."""
        specs, layout, compile_kwargs = self.specs, self.layout, self._compile_kwargs
        differences = self._differences_option
        self._recheck: TuningRecheck | None = None  # set where "auto" chose first-order ones
        # the independence analysis is kept for the colour classes of the integer moves
        self.independent_sites, pieces = False, None
        if self.independent_sites_at_once and layout.n_sites > 1 and not self._steps_per_draw:
            self.independent_sites, pieces = sites_are_independent(
                model, specs, layout, shared, self._x0, initial_point
            )
        # a default draw of integer sites only is their jumps: no single-site steps (sweep_steps)
        jumps_only = (
            self.integer_jumps
            and self._steps_per_draw is None
            and bool(np.all(layout.site_kind == INTEGER))
        )
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
            target = self._exact_differences(
                model, specs, layout, shared, compile_kwargs, self._balancing()
            )
        else:
            self.differences_choice = DifferencesChoice(differences, f"differences={differences!r}")
            target = self._make_differences(
                differences, model, specs, layout, shared, compile_kwargs
            )
        self.differences_kind = target.kind
        self.differences_reason = self.differences_choice.reason
        sites = np.zeros(0, dtype=np.int64)
        if self.integer_jumps:
            sites = np.flatnonzero(layout.site_kind == INTEGER)
        if self.independent_sites:  # every site is drawn from its full conditional, all at once
            sites = np.arange(layout.n_sites)
        if sites.size:
            # the jumps evaluate exact differences' batched logp at one-site changes
            jump_differences = target
            if not isinstance(target, ExactDifferences):
                jump_differences = ExactDifferences(
                    model, specs, layout, shared, compile_kwargs, method="batched"
                )
            self.integer_moves = IntegerMoves(
                layout,
                sites,
                jump_differences,
                model=model,
                point=initial_point,
                x0=self._x0,
                all_gibbs=self.independent_sites,
                pieces=pieces,
                balancing=self._balancing(),
                compile_kwargs=compile_kwargs,
                label=f"{type(self).__name__} on {tuple(s.name for s in specs)}",
            )
        _log.info(
            "%s on %s: %s neighbour differences (%s).",
            type(self).__name__,
            [s.name for s in specs],
            self.differences_kind,
            self.differences_reason,
        )
        return target

    def _before_draw(self, x: np.ndarray) -> None:
        if self._recheck is not None and self._recheck.due(self._tune_draws, self.tune):
            self._recheck_differences(x)

    def _target_stats(self) -> dict[str, Any]:
        return {"exact_differences": self.differences_kind == "exact"}

    def _balancing(self):
        """``(name, log-space function)`` the differences should prepare weights with."""
        return getattr(self, "balancing", None), getattr(self, "log_g", None)

    def _make_differences(self, kind, model, specs, layout, shared, compile_kwargs) -> Differences:
        """Build the differences asked for; ``"auto"`` measures first (see
        :mod:`pymc_lbp.step_methods.differences_choice`) and sets :attr:`differences_choice`."""
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
                        stacklevel=6,
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
                stacklevel=6,
            )
        return exact

    def recheck_at(self, point: dict, where: str) -> None:
        """Measure a ``differences="auto"`` first-order choice again at ``point`` (the model's
        values by name; ``where`` names it in the reason), switching to exact differences for
        good where the rule says so; nothing where the differences are exact already."""
        if self._recheck is None:
            return
        for name, shared in self.shared.items():
            shared.set_value(point[name])
        self._recheck_differences(self.state_vector(point), where=where)

    def _recheck_differences(self, x: np.ndarray, where: str | None = None) -> None:
        """Measure a first-order choice again from ``x`` (see
        :class:`~pymc_lbp.step_methods.differences_choice.TuningRecheck`); switch to exact
        differences for good when the rule says so. ``where``: how the reason names the
        place (default: the tuning draw)."""
        recheck = self._recheck
        choice = recheck.check(x, self._tune_draws, where)
        if choice.kind == "gradient":
            return
        self.differences_choice = choice
        self.target = self._exact_differences(*self._exact_args)
        self.differences_kind = self.target.kind
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
