"""Exact neighbour differences whose cost grows with the interactions, not with sites squared.

When one site of the block moves, only the log-probability terms that touch it change. This
module finds those terms in the model's own graph and evaluates the exact differences to every
one-site neighbour with a handful of elementwise evaluations of the model's terms, instead of one
whole-model evaluation per neighbour (:class:`pymc_lbp.logp.differences.ExactDifferences`' batched
method).

How it works
------------
1. **Terms as sums of elements.** The model logp is the sum of its terms
   (``model.logp(sum=False)``: every variable's elementwise logp and every ``pm.Potential``).
   A term that is a linear combination of sums (``J * (sum(a) + sum(b))``, broadcast additions,
   ``Alloc``, ``Join``, reshapes) is split into *pieces* whose elements add up to the term
   (:func:`linear_pieces`). The Ising coupling ``J * sum(s[:-1] * s[1:])`` becomes the elements
   ``J * s_i s_{i+1}``. PyMC's parameter checks, which reduce their conditions over the whole
   term, are first applied element by element (:func:`elementwise_checks`).
2. **Which sites every element depends on** (:func:`analyse_dependencies`): a structural,
   conservative analysis of the graph. Dependencies are sparse (element x site) matrices
   propagated node by node: elementwise ops take the union over broadcast inputs, reductions the
   union over reduced elements, data-movement ops (reshape, dimshuffle, slicing, ``Alloc``,
   ``Join``, ``pt.roll``, gathers with constant indices) move dependency rows exactly as they move
   data (the op is run on element labels), gathers with value-dependent indices (``mu[z]``,
   ``P[z[:-1], z[1:]]``, factor tables ``T[x_a, x_b]``) depend on their index elements, and any
   other op makes each output depend on everything its inputs depend on. An element that depends
   on more than ``max_term_sites`` sites, or on a value whose shape could change with the state,
   is *global*.
3. **Colouring.** Sites that share an element are adjacent; a greedy colouring gives classes of
   sites no two of which share an element. For colour ``c`` and move ``k`` (binary: flip;
   categorical: category ``k``; integer: ``-1``/``+1``) the state with *all* sites of colour ``c``
   moved evaluates every element once; an element's change belongs to its unique moved site, and
   a segment sum over sites gives every site's difference. Cost: ``sum_c max_k`` elementwise
   evaluations (two for a bipartite lattice of binary sites) instead of one per neighbour.
4. **Global pieces** (a piece with any global element) are evaluated exactly at every neighbour
   (batched, like the general method) and added. Only when no piece is local does the block fall
   back to the batched method as a whole.

The result equals the batched method's: masked slots (a categorical's current value, integer
moves outside the support) and zero-probability neighbours are ``-inf``, never NaN. The analysis
assumes the shapes of shared variables (other variables' values, ``pm.Data``) stay as they were
at construction; :class:`LocalDifferences` checks that on every call and refuses otherwise.

Modules: step 1 is :mod:`pymc_lbp.logp.site_pieces`, step 2
:mod:`pymc_lbp.logp.dependency_analysis`, step 3 :mod:`pymc_lbp.logp.site_colouring`, and the
plan of steps 3 and 4 :mod:`pymc_lbp.logp.local_plan`; this module holds the compiled callable,
:class:`LocalDifferences`, and its self-check.
"""

from __future__ import annotations

import numpy as np
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.traversal import ancestors

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.local_plan import LocalPlan


class LocalCheckError(RuntimeError):
    """The local differences disagreed with the model logp in the first-call self-check."""


class LocalDifferences:
    """Compiled ``(logp_x, deltas) = diffs(x)`` from a :class:`LocalPlan`.

    On its first call from a state of finite logp it checks a few differences against the model
    logp evaluated at the neighbours and raises :class:`LocalCheckError` on disagreement.

    Parameters
    ----------
    plan : LocalPlan
    layout : BlockLayout
    compile_kwargs : dict, optional

    Attributes
    ----------
    evals_per_call : int
        Cost of one call in model-logp evaluations: the moved states plus the state itself
        (plus one per slot when global terms are evaluated at every neighbour).
    """

    n_checks = 8

    def __init__(self, plan: LocalPlan, layout, compile_kwargs=None):
        self.plan = plan
        self.layout = layout
        self._kw = dict(compile_kwargs or {})
        self._fn = None  # compiled on first call: a step whose draws are all full-conditional
        self._logp_fn = None  # draws of independent sites never calls it
        self.evals_per_call = plan.n_rows + 1 + (layout.n_slots if plan.n_global_pieces else 0)
        shared = [v for v in ancestors([plan.logp, plan.deltas]) if isinstance(v, SharedVariable)]
        self._shared = [(v, np.shape(v.get_value(borrow=True))) for v in shared]
        self._checked = False

    def check_shapes(self) -> None:
        """Refuse shared variables whose shape changed since the analysis."""
        for v, shape in self._shared:
            now = np.shape(v.get_value(borrow=True))
            if now != shape:
                raise ValueError(
                    f"Shared variable {v.name!r} changed shape from {shape} to {now} after the "
                    "local exact differences were built; build the step again."
                )

    def logp(self, x: np.ndarray) -> float:
        """Model logp at ``x``."""
        if self._logp_fn is None:
            self._logp_fn = pm_compile(
                [self.plan.x], self.plan.logp, on_unused_input="ignore", **self._kw
            )
            self._logp_fn.trust_input = True
        return float(self._logp_fn(x))

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        self.check_shapes()
        if self._fn is None:
            plan = self.plan
            self._fn = pm_compile(
                [plan.x], [plan.logp, plan.deltas], on_unused_input="ignore", **self._kw
            )
            self._fn.trust_input = True
        logp_x, deltas = self._fn(x)
        logp_x = float(logp_x)
        if not self._checked and np.isfinite(logp_x):
            self._self_check(x, logp_x, deltas)
        return logp_x, deltas

    def _self_check(self, x, logp_x, deltas):
        lay = self.layout
        new, valid = lay.candidates(x)
        slots = np.flatnonzero(valid)
        rng = np.random.default_rng(12345)  # verification only; sampling never sees it
        for s in rng.permutation(slots)[: self.n_checks]:
            y = x.copy()
            y[lay.slot_site[s]] = new[s]
            with np.errstate(invalid="ignore"):
                want = self.logp(y) - logp_x
            want = -np.inf if np.isnan(want) else want
            got = deltas[s]
            same = (got == want) or abs(got - want) <= 1e-8 * (1.0 + abs(logp_x))
            if not same:
                raise LocalCheckError(
                    f"local exact difference of slot {s} is {got}, the model logp gives {want}"
                )
        self._checked = True


__all__ = ["LocalCheckError", "LocalDifferences"]
