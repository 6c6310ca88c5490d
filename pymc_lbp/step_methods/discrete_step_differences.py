"""DiscreteStep's neighbour differences and its start: how the differences are chosen and built,
the judging of the start (its values, and the cost of exact differences there), and the re-check
that switches gradient differences to exact ones where they turn out wrong.

A mixin of :class:`pymc_lbp.step_methods.base.DiscreteStep`; the choice rules themselves are in
:mod:`pymc_lbp.step_methods.differences_choice`.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from pymc_lbp.logp.differences import Differences, ExactDifferences, GradientDifferences
from pymc_lbp.logp.layout import INTEGER, BlockLayout
from pymc_lbp.logp.relaxed_values import NotRelaxableError
from pymc_lbp.samplers.balancing import log_sqrt
from pymc_lbp.samplers.pairwise.couplings import pairwise_differences
from pymc_lbp.step_methods.differences_choice import (
    DifferencesChoice,
    TuningRecheck,
    choose,
    probe_first_order,
)

_log = logging.getLogger("pymc_lbp")

EXPENSIVE_EXACT_EVALS = 2000
"""Exact differences that cost more logp evaluations than this per call are reported (the
batched method costs one per move; the local one a few, plus one per move for terms that couple
the whole block)."""


class DiscreteStepDifferences:
    """The neighbour differences and start checks of :class:`DiscreteStep`."""

    def _check_block_options(self, layout: BlockLayout, specs) -> None:
        """Check the sampler's options against the block (subclasses; before any compilation)."""

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

    def _check_values(self, x: np.ndarray, where: str, *, integers: bool = False) -> None:
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
        self._check_values(x, "the start point")
        self.differences.refresh_bounds(x)
        self._check_values(x, "the start point", integers=True)
        logp = self.differences.logp(x)
        if not np.isfinite(logp):
            raise ValueError(
                f"{type(self).__name__}: the starting point has log-probability {logp} "
                f"(variables {list(self.var_names)}, other variables at their current values). "
                "Give a feasible start via pm.sample(initvals=...) or the variables' initval."
            )
        self._judge_at_first_draw = False

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
