"""Compiled log-probability differences to a block's one-site neighbours.

A samplers' view of the model is one call ``logp_x, deltas = differences(x)`` that returns the
model logp at ``x`` (other variables held at their current, shared values) and
``Delta_s(x) = f(x^(s)) - f(x)`` for every slot of the block's layout
(:mod:`pymc_lbp.logp.layout`; ``-inf`` for masked slots and for zero-probability neighbours,
never NaN):

* :class:`ExactDifferences` is exact: local (:mod:`pymc_lbp.logp.local_differences`) where the
  model's terms allow, else the logp at all neighbours in one compiled, batched call (the logp
  graph vectorised over a leading axis; chunked for large blocks). See docs/differences.md.
* :class:`GradientDifferences` uses the first-order estimate of Grathwohl et al. from the gradient
  of the relaxed logp (:mod:`pymc_lbp.logp.relax`). Cost: one logp and one gradient evaluation.

:class:`Differences` is their base class.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import graph_inputs

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.dependency_analysis import NotLocalError
from pymc_lbp.logp.graphs import substitute
from pymc_lbp.logp.layout import block_state_graph
from pymc_lbp.logp.local_differences import LocalCheckError, LocalDifferences
from pymc_lbp.logp.local_plan import build_local_plan
from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.logp.relax import relaxed_logp
from pymc_lbp.logp.relaxed_values import LOG_FLOOR
from pymc_lbp.logp.vectorising import checks_per_row, one_site_rows
from pymc_lbp.samplers.balancing import balanced_log_weights, graph_log_balancing
from pymc_lbp.samplers.common import prepare_weights

_log = logging.getLogger("pymc_lbp")


class Differences:
    """Base class: ``(logp_x, deltas) = differences(x)`` with masked slots at ``-inf``.

    Attributes
    ----------
    layout : BlockLayout
    kind : str
        ``"exact"`` or ``"gradient"``.
    logp_evals_per_call, grad_evals_per_call : int
        Model logp and gradient evaluations that one call costs.
    """

    kind = ""
    logp_evals_per_call = 1
    grad_evals_per_call = 0

    def __init__(self, model, specs, layout, shared, compile_kwargs=None, balancing=None):
        self.layout = layout
        self.specs = specs
        self._compile_kwargs = dict(compile_kwargs or {})
        # Its length known: the rewrites drop a block's only variable's whole-vector slice and
        # reshape, so the model's logp over x compiles to NUTS's own C modules (before, occupancy's
        # first run compiled two C modules more).
        x = pt.vector("x_block", dtype="int64", shape=(layout.n_sites,))
        self._x = x
        self._replace = {**block_state_graph(specs, x), **shared}
        self._bounds = self._bounds_graph()
        self._constant_bounds = self.bounds_are_constant()
        self._bounds_read = False
        self._bounds_fn = None
        if self._bounds is not None:
            self._bounds_fn = pm_compile(
                [self._x], list(self._bounds), on_unused_input="ignore", **self._compile_kwargs
            )
        self.balancing_name, self.log_g = balancing if balancing is not None else (None, None)

    def _bounds_graph(self):
        """Support of every site as graphs ``(lower, upper)`` of ``x``; None without integers."""
        if all(s.kind != "integer" for s in self.specs):
            return None
        lows, highs = [], []
        for s in self.specs:
            lo, hi = s.bounds if s.kind == "integer" else (-np.inf, np.inf)
            lows.append(pt.broadcast_to(pt.cast(lo, "float64"), s.shape).ravel())
            highs.append(pt.broadcast_to(pt.cast(hi, "float64"), s.shape).ravel())
        return tuple(clone_replace([pt.concatenate(lows), pt.concatenate(highs)], self._replace))

    def bounds_are_constant(self) -> bool:
        """Whether the sites' supports are fixed (depend on no variable)."""
        if self._bounds is None:
            return True
        return all(isinstance(v, Constant) for v in graph_inputs(list(self._bounds)))

    def bounds_graph(self, x: Variable) -> tuple[Variable, Variable] | None:
        """Supports ``(lower, upper)`` of every site at a symbolic block vector ``x`` (float,
        infinite where unbounded); None when the block has no integer sites."""
        if self._bounds is None:
            return None
        return tuple(substitute(list(self._bounds), {self._x: x}))

    def graph(self, x: Variable) -> tuple[Variable, Variable]:
        """``(logp_x, deltas)`` as pytensor graphs of a symbolic int64 block vector ``x``.

        The same quantities as :meth:`__call__` (masked slots and zero-probability neighbours at
        ``-inf``), for building compiled transition kernels (:mod:`pymc_lbp.samplers`). The other
        model variables enter as the step's shared variables.
        """
        raise NotImplementedError

    def evaluate(self, x: np.ndarray) -> tuple[float, np.ndarray, tuple | None]:
        """``(logp_x, deltas, prepared)`` with the balanced proposal weights prepared.

        ``prepared`` is ``(log_w, cdf, log_z)`` as from
        :func:`pymc_lbp.samplers.common.prepare_weights` (None when no slot can be proposed); it
        needs the balancing function given at construction.
        """
        logp_x, deltas = self(x)
        return logp_x, deltas, prepare_weights(balanced_log_weights(deltas, self.log_g))

    def bounds_at(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every site's support ``(lower, upper)`` at ``x`` (float, infinite where unbounded),
        without changing the layout's (see :meth:`refresh_bounds`)."""
        if self._bounds_fn is None or self._constant_bounds:
            return self.layout.lower, self.layout.upper
        lo, hi = self._bounds_fn(x)
        return np.asarray(lo), np.asarray(hi)

    def refresh_bounds(self, x: np.ndarray) -> None:
        """Recompute integer supports (their parameters may have moved; fixed ones are read
        once)."""
        if self._bounds_fn is None or (self._constant_bounds and self._bounds_read):
            return
        lo, hi = self._bounds_fn(x)
        self.layout.set_bounds(lo, hi)
        self._bounds_read = True

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        raise NotImplementedError

    def logp(self, x: np.ndarray) -> float:
        """Model logp at ``x`` (subclasses with a cheaper way than a full call override it)."""
        return self(x)[0]


class ExactDifferences(Differences):
    """Exact differences: local (only the terms that touch a site) or the batched evaluation.

    With ``method="auto"`` (default) a block of at least ``local_min_slots`` slots uses
    :mod:`pymc_lbp.logp.local_differences` when the model's terms are local in the block (cost: a
    few elementwise evaluations of the model's terms per call); otherwise, and for smaller blocks,
    the logp is evaluated at all neighbours in one batched call (cost: one logp evaluation per
    slot). Both are exact. The choice and its reason are in :attr:`method` and :attr:`method_reason`
    and logged (logger ``"pymc_lbp"``, level INFO). With the local method, :attr:`local_plan` holds
    its ``logp`` and ``deltas`` as pytensor graphs of the block vector ``local_plan.x`` (for
    compiled transition kernels); it is None otherwise.

    Parameters
    ----------
    model : pymc.Model
    specs : list of VariableSpec
    layout : BlockLayout
    shared : dict
        Shared replacements for the model's other value variables.
    compile_kwargs : dict, optional
    max_batch_elements : int
        Neighbour states are evaluated in chunks of at most this many sites in total
        (``chunk rows * block size``), to bound memory on large blocks.
    method : {"auto", "local", "batched"}
        ``"local"`` raises :class:`~pymc_lbp.logp.dependency_analysis.NotLocalError` when the model
        has no usable locality.
    local_min_slots : int
        ``"auto"`` uses the local method from this many slots on.
    local_options : dict, optional
        Passed to :func:`~pymc_lbp.logp.local_plan.build_local_plan` (``max_term_sites``,
        ``max_rows_fraction``).
    """

    kind = "exact"

    def __init__(
        self,
        model,
        specs,
        layout,
        shared,
        compile_kwargs=None,
        balancing=None,
        max_batch_elements=4_000_000,
        method="auto",
        local_min_slots=32,
        local_options=None,
    ):
        if method not in ("auto", "local", "batched"):
            raise ValueError(f"method must be 'auto', 'local' or 'batched', got {method!r}")
        super().__init__(model, specs, layout, shared, compile_kwargs, balancing)
        self._logp_graph = clone_replace(model_logp(model), replace=self._replace)
        self._chunk = max(1, int(max_batch_elements // max(layout.n_sites, 1)))
        self._fn = None
        self._logp_fn = None
        self._graph_parts = None
        self._local = None
        self.local_plan = None
        self.method, self.method_reason = "batched", "chosen by the caller"
        if method == "auto" and layout.n_slots < local_min_slots:
            self.method_reason = f"small block ({layout.n_slots} < {local_min_slots} slots)"
        elif method != "batched":
            try:
                plan = build_local_plan(
                    model, layout, self._replace, self._x, self._bounds, **(local_options or {})
                )
                self._local = LocalDifferences(plan, layout, self._compile_kwargs)
            except NotLocalError as err:
                if method == "local":
                    raise
                self.method_reason = f"no usable locality: {err}"
            else:
                self.method, self.method_reason = "local", plan.reason
                self.local_plan = plan
        if self._local is None:  # the batched evaluation is compiled on first use
            self.logp_evals_per_call = layout.n_slots + 1
        else:
            self.logp_evals_per_call = self._local.evals_per_call
        _log.debug(
            "Exact differences for %s: %s (%s).",
            [s.name for s in specs],
            self.method,
            self.method_reason,
        )

    def _batched_graph(self):
        """``(logp, logp_batch, sites, values)``: the logp at ``x`` and at ``x`` with
        ``x[sites[r]] = values[r]`` for every row ``r`` (built once)."""
        if self._graph_parts is None:
            logp = self._logp_graph
            sites = pt.vector("sites", dtype="int64")
            values = pt.vector("values", dtype="int64")
            logp_batch = one_site_rows(checks_per_row(logp), self._x, sites, values)
            self._graph_parts = (logp, logp_batch, sites, values)
        return self._graph_parts

    def site_logp_function(self):
        """The compiled ``(x, sites, values) -> (logp(x), logp at x with x[sites[r]] =
        values[r] for every r)`` (the batched evaluation; compiled on first use)."""
        if self._fn is None:
            logp, logp_batch, sites, values = self._batched_graph()
            self._fn = pm_compile(
                [self._x, sites, values],
                [logp, logp_batch],
                on_unused_input="ignore",
                **self._compile_kwargs,
            )
            self._fn.trust_input = True
        return self._fn

    def site_logp_graph(
        self, x: Variable, sites: Variable, values: Variable
    ) -> tuple[Variable, Variable]:
        """Graphs of :meth:`site_logp_function`'s outputs at symbolic ``(x, sites, values)``."""
        logp, logp_batch, s, v = self._batched_graph()
        return tuple(substitute([logp, logp_batch], {self._x: x, s: sites, v: values}))

    def graph(self, x: Variable) -> tuple[Variable, Variable]:
        """Graphs of ``(logp_x, deltas)``: the local method's graphs when it is in use (see
        :mod:`pymc_lbp.logp.local_differences`; at a zero-probability ``x`` its deltas are not
        meaningful, and a kernel never moves to such a state), else all neighbours evaluated in
        one batched expression (no chunking: memory ``n_slots * n_sites`` per evaluation)."""
        if self._local is not None:
            plan = self.local_plan
            outs = [pt.cast(plan.logp, "float64"), pt.cast(plan.deltas, "float64")]
            return tuple(substitute(outs, {plan.x: x}))
        logp, logp_batch, sites, values = self._batched_graph()
        lay = self.layout
        xs = self._x[lay.slot_site]
        if lay.all_binary:
            new, valid = 1 - xs, None
        else:
            new, valid = lay.candidates_graph(self._x, self._bounds)
            new = pt.switch(valid, new, xs)
        nb = clone_replace(
            logp_batch, replace={sites: pt.as_tensor_variable(lay.slot_site), values: new}
        )
        # float64 whatever floatX is: the difference of two float32 logps is exact in float64
        logp, nb = pt.cast(logp, "float64"), pt.cast(nb, "float64")
        deltas = nb - logp
        keep = ~pt.isnan(deltas)
        if valid is not None:
            keep = keep & valid
        deltas = pt.switch(keep, deltas, -np.inf)
        return tuple(substitute([logp, deltas], {self._x: x}))

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        if self._local is not None:
            try:
                logp_x, deltas = self._local(x)
            except LocalCheckError as err:
                warnings.warn(
                    f"Local exact differences failed their self-check ({err}); using the "
                    "batched evaluation from now on. Please report this model.",
                    UserWarning,
                    stacklevel=2,
                )
                self._local = None
                self.method, self.method_reason = "batched", f"local self-check failed: {err}"
                self.logp_evals_per_call = self.layout.n_slots + 1
            else:
                if np.isfinite(logp_x):
                    return logp_x, deltas
                # from a zero-probability state: the batched method's differences
        return self._batched_call(x)

    def _batched_call(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        layout = self.layout
        fn = self.site_logp_function()
        new, valid = layout.candidates(x)
        values = np.where(valid, new, x[layout.slot_site]).astype(np.int64)
        sites = layout.slot_site
        parts = []
        for start in range(0, max(layout.n_slots, 1), self._chunk):  # one call for no slots
            stop = start + self._chunk
            logp_x, part = fn(x, sites[start:stop], values[start:stop])
            parts.append(part)
        logp_nb = np.concatenate(parts)
        logp_x = float(logp_x)
        # float64 whatever floatX is: the difference of two float32 logps is exact in float64
        logp_nb = np.asarray(logp_nb, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            deltas = logp_nb - logp_x
        deltas[~valid | np.isnan(deltas)] = -np.inf
        return logp_x, deltas

    def logp(self, x: np.ndarray) -> float:
        """Model logp at ``x``: the local method's, or the model's own compiled logp
        (:meth:`model_logp`)."""
        if self._local is not None:
            return self._local.logp(x)
        return self.model_logp(x)

    def model_logp(self, x: np.ndarray) -> float:
        """Model logp at ``x`` from the model's logp graph compiled alone (the batched evaluation
        with no rows, or one, does not run for every model, e.g. ``pt.roll`` under
        vectorisation; its C modules are mostly those of NUTS's logp and gradient)."""
        if self._logp_fn is None:
            self._logp_fn = pm_compile(
                [self._x], self._logp_graph, on_unused_input="ignore", **self._compile_kwargs
            )
            self._logp_fn.trust_input = True
        return float(self._logp_fn(x))


class GradientDifferences(Differences):
    """First-order differences (Grathwohl et al. 2021) from the relaxed logp's gradient.

    binary: ``(1 - 2 x_i) df~/dv_i``; categorical: ``df~/dO_{i,c} - df~/dO_{i,x_i}``;
    integer: ``-+ df~/dv_i``. Exact for logps that are multilinear in the block (Ising, Potts,
    pairwise MRFs, factor tables, mixtures).

    Raises
    ------
    NotRelaxableError
        If the model's logp has no differentiable extension (see :mod:`pymc_lbp.logp.relax`).
    """

    kind = "gradient"
    grad_evals_per_call = 1

    def __init__(self, model, specs, layout, shared, compile_kwargs=None, balancing=None):
        super().__init__(model, specs, layout, shared, compile_kwargs, balancing)
        relaxed = relaxed_logp(model, specs)
        self.piecewise = relaxed.piecewise
        grads = pt.grad(relaxed.logp, relaxed.inputs)
        pieces = []
        replace = {}
        state = block_state_graph(specs, self._x)
        for spec, leaf, g in zip(specs, relaxed.inputs, grads, strict=True):
            xv = pt.cast(state[spec.value_var], "int64")
            if spec.kind == "binary":
                replace[leaf] = pt.cast(xv, "float64")
                pieces.append(((1 - 2 * xv) * g).ravel())
            elif spec.kind == "categorical":
                K = spec.n_categories
                onehot = pt.cast(pt.eq(xv[..., None], pt.arange(K)), "float64")
                replace[leaf] = onehot
                g_cur = pt.take_along_axis(g, xv[..., None], axis=-1)
                pieces.append((g - g_cur).ravel())
            else:
                replace[leaf] = pt.cast(xv, "float64")
                pieces.append(pt.stack([-g, g], axis=-1).ravel())
        deltas = pt.concatenate(pieces) if len(pieces) > 1 else pieces[0]
        # NaN, floored log 0 (see pymc_lbp.logp.relax) and masked slots mean "never propose"
        keep = pt.ge(deltas, 0.5 * LOG_FLOOR)
        if not layout.all_binary:
            keep = keep & layout.candidates_graph(self._x, self._bounds)[1]
        deltas = pt.switch(keep, deltas, -np.inf)
        outs = [pt.cast(model_logp(model), "float64"), pt.cast(deltas, "float64")]
        log_g_graph = graph_log_balancing(self.balancing_name) if self.log_g else None
        self._fused = log_g_graph is not None
        if self._fused:
            log_w = pt.switch(pt.eq(deltas, -np.inf), -np.inf, log_g_graph(deltas))
            top = pt.max(log_w)
            cdf = pt.cumsum(pt.exp(log_w - top))
            outs += [log_w, cdf, top + pt.log(cdf[-1])]
        *outs, self._relaxed_graph = clone_replace(
            [*outs, relaxed.logp], replace={**replace, **self._replace}
        )
        self._graph_parts = outs[:2]
        self._fn = pm_compile([self._x], outs, on_unused_input="ignore", **self._compile_kwargs)
        self._fn.trust_input = True
        self._relaxed_fn = None

    def graph(self, x: Variable) -> tuple[Variable, Variable]:
        """Graphs of ``(logp_x, deltas)``: one logp and one gradient evaluation."""
        return tuple(substitute(self._graph_parts, {self._x: x}))

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        out = self._fn(x)
        return float(out[0]), np.asarray(out[1], dtype=np.float64)

    def evaluate(self, x: np.ndarray) -> tuple[float, np.ndarray, tuple | None]:
        if not self._fused:
            return super().evaluate(x)
        logp_x, deltas, log_w, cdf, log_z = self._fn(x)
        prepared = (log_w, cdf, float(log_z)) if np.isfinite(log_z) else None
        return float(logp_x), deltas, prepared

    def relaxed_logp_at(self, x: np.ndarray) -> float:
        """The relaxed logp at the discrete point ``x`` (equals the logp where it is finite)."""
        if self._relaxed_fn is None:
            self._relaxed_fn = pm_compile([self._x], self._relaxed_graph, on_unused_input="ignore")
        return float(self._relaxed_fn(x))
