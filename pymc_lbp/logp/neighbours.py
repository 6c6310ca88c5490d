"""One-site neighbourhoods of a discrete block and compiled log-probability differences.

The sampled block is the raveled concatenation ``x`` (int64) of one or more discrete value
variables. Each site has a fixed number of *slots*, one per potential one-site move:

============ ======================= ==================================================
kind         slots per site          move of slot ``s``
============ ======================= ==================================================
binary       1                       ``x_i -> 1 - x_i`` (Bernoulli)
categorical  K                       ``x_i -> c`` (slot ``c``; masked when ``c == x_i``)
integer      2                       ``x_i -> x_i - 1`` and ``x_i -> x_i + 1``, masked
                                     outside the variable's support
============ ======================= ==================================================

Slots are laid out site by site. A samplers' view of the model is one call
``logp_x, deltas = differences(x)`` that returns the model logp at ``x`` (other variables held at
their current, shared values) and ``Delta_s(x) = f(x^(s)) - f(x)`` for every slot (``-inf`` for
masked slots and for zero-probability neighbours, never NaN):

* :class:`ExactDifferences` is exact. On blocks of 32 slots or more whose model terms are local
  it uses :mod:`pymc_lbp.logp.local_differences` (only the terms that touch a site are
  re-evaluated; cost: a few elementwise evaluations of the terms per call, see docs/differences.md);
  otherwise it evaluates the logp at all neighbours in one compiled, batched call (the logp graph
  vectorised over a leading axis with ``vectorize_graph``; chunked for large blocks). Cost: one logp
  evaluation per slot.
* :class:`GradientDifferences` uses the first-order estimate of Grathwohl et al. from the gradient
  of the relaxed logp (:mod:`pymc_lbp.logp.relax`). Cost: one logp and one gradient evaluation.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.distributions.discrete import DiscreteUniformRV, DiscreteWeibullRV
from pymc.logprob.utils import local_check_parameter_to_ninf_switch
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.traversal import graph_inputs
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaBinomialRV,
    BinomialRV,
    CategoricalRV,
    GeometricRV,
    HyperGeometricRV,
    NegBinomialRV,
    PoissonRV,
)

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.graphs import repeated_rows, set_per_row, substitute
from pymc_lbp.logp.local_differences import (
    LocalCheckError,
    LocalDifferences,
    NotLocalError,
    build_local_plan,
    rewritten_clone,
)
from pymc_lbp.logp.relax import LOG_FLOOR, relaxed_logp
from pymc_lbp.samplers.balancing import balanced_log_weights, graph_log_balancing
from pymc_lbp.samplers.common import prepare_weights

_log = logging.getLogger("pymc_lbp")

BINARY, CATEGORICAL, INTEGER = 0, 1, 2
KIND_CODES = {"binary": BINARY, "categorical": CATEGORICAL, "integer": INTEGER}

SUPPORTED = (
    "Bernoulli, Categorical (incl. OrderedLogistic/OrderedProbit), and integer-valued Poisson, "
    "Binomial, BetaBinomial, Geometric, NegativeBinomial, HyperGeometric, DiscreteUniform, "
    "DiscreteWeibull"
)


def integer_support(op, params) -> tuple[Variable | float, Variable | float] | None:
    """Support ``[lower, upper]`` of an integer-valued RV as graphs of its parameters.

    Returns None for distributions pymc_lbp does not support.
    """
    if isinstance(op, PoissonRV | NegBinomialRV | DiscreteWeibullRV):
        return 0.0, np.inf
    if isinstance(op, GeometricRV):
        return 1.0, np.inf
    if isinstance(op, BinomialRV | BetaBinomialRV):
        return 0.0, params[0]
    if isinstance(op, DiscreteUniformRV):
        return params[0], params[1]
    if isinstance(op, HyperGeometricRV):
        N, k, n = params
        return pt.maximum(0, n - N + k), pt.minimum(k, n)
    return None


@dataclass(frozen=True)
class VariableSpec:
    """One discrete variable of a block.

    Attributes
    ----------
    name : str
        The value variable's name.
    value_var : Variable
        The model's value variable.
    shape : tuple of int
        Its shape at the initial point.
    offset : int
        Position of its first site in the raveled block.
    kind : str
        ``"binary"``, ``"categorical"`` or ``"integer"``.
    n_categories : int or None
        K for categorical variables.
    bounds : tuple or None
        Integer variables: ``(lower, upper)`` support graphs (or numbers) in terms of value
        variables; ``None`` otherwise.
    """

    name: str
    value_var: Any
    shape: tuple
    offset: int
    kind: str
    n_categories: int | None = None
    bounds: tuple | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))


def _is_discrete_rv(rv) -> bool:
    return rv.dtype.startswith(("int", "uint", "bool"))


def describe_block(model, value_vars, initial_point) -> list[VariableSpec]:
    """Classify the block's variables and check that each is supported.

    Raises
    ------
    ValueError
        Naming the variable, for continuous variables and unsupported distributions.
    """
    specs = []
    offset = 0
    for value_var in value_vars:
        rv = model.values_to_rvs[value_var]
        name = value_var.name
        if not _is_discrete_rv(rv) or value_var.dtype.startswith("float"):
            raise ValueError(
                f"Variable {rv.name!r} is continuous (dtype {value_var.dtype}); pymc_lbp samplers "
                f"only take discrete variables ({SUPPORTED}). Give continuous variables to NUTS, "
                "e.g. pm.sample(step=[ThisStep([discrete vars])])."
            )
        op = rv.owner.op
        shape = tuple(np.shape(initial_point[name]))
        if isinstance(op, BernoulliRV):
            spec = VariableSpec(name, value_var, shape, offset, "binary")
        elif isinstance(op, CategoricalRV):
            (p,) = op.dist_params(rv.owner)
            k_graph = model.replace_rvs_by_values([p.shape[-1]])[0]
            k = pytensor.function(
                model.value_vars, k_graph, on_unused_input="ignore", mode="FAST_COMPILE"
            )(**{v.name: initial_point[v.name] for v in model.value_vars})
            spec = VariableSpec(name, value_var, shape, offset, "categorical", int(k))
        else:
            bounds = None
            if hasattr(op, "dist_params"):
                params = model.replace_rvs_by_values(list(op.dist_params(rv.owner)))
                bounds = integer_support(op, params)
            if bounds is None:
                raise ValueError(
                    f"Variable {rv.name!r} has distribution {type(op).__name__}, which pymc_lbp "
                    f"does not support. Supported discrete distributions: {SUPPORTED}."
                )
            spec = VariableSpec(name, value_var, shape, offset, "integer", bounds=bounds)
        specs.append(spec)
        offset += spec.size
    return specs


class BlockLayout:
    """Slot layout of a raveled block: which move each slot makes, and its reverse."""

    def __init__(self, specs: list[VariableSpec]):
        kinds, ncat = [], []
        for spec in specs:
            kinds.append(np.full(spec.size, KIND_CODES[spec.kind], dtype=np.int8))
            ncat.append(np.full(spec.size, spec.n_categories or 0, dtype=np.int64))
        self.site_kind = np.concatenate(kinds) if kinds else np.zeros(0, np.int8)
        self.site_ncat = np.concatenate(ncat) if ncat else np.zeros(0, np.int64)
        self.n_sites = self.site_kind.size
        per_site = np.where(
            self.site_kind == BINARY, 1, np.where(self.site_kind == CATEGORICAL, self.site_ncat, 2)
        )
        self.site_offset = np.concatenate(([0], np.cumsum(per_site)[:-1])).astype(np.int64)
        self.n_slots = int(per_site.sum())
        self.slot_site = np.repeat(np.arange(self.n_sites), per_site)
        within = np.arange(self.n_slots) - self.site_offset[self.slot_site]
        self.slot_kind = self.site_kind[self.slot_site]
        # categorical: the category; integer: -1 / +1; binary: unused
        self.slot_arg = np.where(
            self.slot_kind == CATEGORICAL,
            within,
            np.where(self.slot_kind == INTEGER, 2 * within - 1, 0),
        ).astype(np.int64)
        self.lower = np.full(self.n_sites, -np.inf)
        self.upper = np.full(self.n_sites, np.inf)
        self.all_binary = bool(np.all(self.site_kind == BINARY))

    def set_bounds(self, lower: np.ndarray, upper: np.ndarray) -> None:
        """Set the support of integer sites (ignored for other sites)."""
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)

    def outside_categories(self, x: np.ndarray) -> np.ndarray:
        """Sites whose value in ``x`` is no value of theirs: a binary site not 0 or 1, a
        categorical one outside ``0 .. K - 1`` (integer sites' supports may depend on other
        variables: the logp judges them)."""
        x = np.asarray(x)
        binary_bad = (self.site_kind == BINARY) & ((x < 0) | (x > 1))
        cat_bad = (self.site_kind == CATEGORICAL) & ((x < 0) | (x >= self.site_ncat))
        return np.flatnonzero(binary_bad | cat_bad)

    def candidates(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New value and validity of every slot's move from state ``x``."""
        xs = x[self.slot_site]
        if self.all_binary:
            return 1 - xs, np.ones(self.n_slots, dtype=bool)
        new = np.where(
            self.slot_kind == BINARY,
            1 - xs,
            np.where(self.slot_kind == CATEGORICAL, self.slot_arg, xs + self.slot_arg),
        )
        site_lo, site_hi = self.lower[self.slot_site], self.upper[self.slot_site]
        valid = np.where(
            self.slot_kind == CATEGORICAL,
            self.slot_arg != xs,
            np.where(self.slot_kind == INTEGER, (new >= site_lo) & (new <= site_hi), True),
        )
        return new, valid

    def new_value(self, x: np.ndarray, slot: int) -> int:
        """Value that slot ``slot`` gives its site from state ``x``."""
        site = self.slot_site[slot]
        kind = self.slot_kind[slot]
        if kind == BINARY:
            return int(1 - x[site])
        if kind == CATEGORICAL:
            return int(self.slot_arg[slot])
        return int(x[site] + self.slot_arg[slot])

    def reverse_slot(self, slot: int, old_value: int) -> int:
        """The slot that moves the site back to ``old_value`` after ``slot`` was applied."""
        site = self.slot_site[slot]
        kind = self.slot_kind[slot]
        if kind == BINARY:
            return int(slot)
        if kind == CATEGORICAL:
            return int(self.site_offset[site] + old_value)
        return int(2 * self.site_offset[site] + 1 - slot)

    def moves_of(self, slot: np.ndarray, old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`new_value` and :meth:`reverse_slot` elementwise over arrays: the value each
        ``slot`` gives its site when the site holds ``old``, and the slot that moves it back."""
        kind, arg = self.slot_kind[slot], self.slot_arg[slot]
        offset = self.site_offset[self.slot_site[slot]]
        new = np.where(kind == BINARY, 1 - old, np.where(kind == CATEGORICAL, arg, old + arg))
        back = np.where(
            kind == BINARY, slot, np.where(kind == CATEGORICAL, offset + old, 2 * offset + 1 - slot)
        )
        return new, back

    def slot_of(self, site: int, new_value: int, old_value: int) -> int:
        """The slot that moves ``site`` from ``old_value`` to ``new_value``."""
        kind = self.site_kind[site]
        off = int(self.site_offset[site])
        if kind == BINARY:
            return off
        if kind == CATEGORICAL:
            return off + int(new_value)
        return off + (1 if new_value > old_value else 0)


def block_state_graph(specs: list[VariableSpec], x: Variable) -> dict[Variable, Variable]:
    """Replacement of each block value variable by its slice of the raveled int vector ``x``."""
    replace = {}
    for spec in specs:
        piece = x[spec.offset : spec.offset + spec.size].reshape(spec.shape)
        replace[spec.value_var] = pt.cast(piece, spec.value_var.dtype)
    return replace


def checks_per_row(logp: Variable) -> Variable:
    """``logp`` with PyMC's parameter checks as ``switch(condition, term, -inf)``.

    Compiled, a check becomes that switch anyway, but on the graph as written: vectorised over a
    batch of states afterwards, its condition would be reduced over the whole batch, so one row
    with an impossible parameter (a HyperGeometric population below its sample size) would void
    every row. Rewritten before vectorising, each row keeps its own condition. Checks that must
    raise (``can_be_replaced_by_ninf`` false) are left as they are. The model's own graph is not
    changed (the rewrite works on a clone).
    """
    return rewritten_clone([logp], local_check_parameter_to_ninf_switch)[0]


def unblock_gathers(out: Variable) -> Variable:
    """Replace batched gathers from unbatched tables by plain advanced indexing.

    ``vectorize_graph`` wraps ``table[i, j]`` with batched index arrays in a ``Blockwise``, which
    loops in Python over the batch. When every index is an array, NumPy's broadcasting of index
    arrays does the batching: ``table[I, J]`` with ``I, J`` of shape ``(B, ...)`` is the batched
    gather from a table without batch dimension (its leading axis broadcastable), and
    ``table[R, I, J]`` with the row numbers ``R`` (shape ``(B, 1, ...)``) from a batched one.
    """
    from pytensor.graph.replace import graph_replace

    while True:  # one gather at a time: a replaced gather may read from another
        new = _unblock_one_gather(out)
        if new is None:
            return out
        out = graph_replace(out, new)


def _unblock_one_gather(out: Variable) -> dict | None:
    """``{batched gather: plain indexing}`` for the first rewritable gather of ``out`` (or None)."""
    from pytensor.graph.traversal import graph_inputs, io_toposort
    from pytensor.tensor.blockwise import Blockwise
    from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1

    for node in io_toposort(graph_inputs([out]), [out]):
        op = node.op
        if not (
            isinstance(op, Blockwise)
            and isinstance(op.core_op, AdvancedSubtensor | AdvancedSubtensor1)
            and all(isinstance(i.type, pt.TensorType) for i in node.inputs)
        ):
            continue
        table, *indices = node.inputs
        n_batch = (
            node.outputs[0].ndim
            - op.core_op.make_node(
                *[pt.tensor(dtype=i.dtype, shape=(None,) * (i.ndim - 1)) for i in node.inputs]
            )
            .outputs[0]
            .ndim
        )
        if n_batch != 1 or any(i.ndim < 1 for i in indices):
            continue
        # index arrays broadcast from the right: pad each after its batch axis to equal rank
        rank = max(i.ndim for i in indices)
        indices = [i.dimshuffle(0, *(["x"] * (rank - i.ndim)), *range(1, i.ndim)) for i in indices]
        if table.type.shape[0] != 1:  # a batched table: its batch axis indexed by the row
            rows = pt.arange(table.shape[0]).reshape((-1,) + (1,) * (rank - 1))
            return {node.outputs[0]: table[(rows, *indices)]}
        core_table = table[0]
        if isinstance(op.core_op, AdvancedSubtensor1):
            return {node.outputs[0]: core_table[indices[0]]}
        return {node.outputs[0]: core_table[tuple(indices)]}
    return None


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
        x = pt.vector("x_block", dtype="int64")
        self._x = x
        self._replace = {**block_state_graph(specs, x), **shared}
        self._bounds = self._bounds_graph()
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

    def _valid_graph(self):
        """Validity of every slot at ``x`` as a graph (see :meth:`BlockLayout.candidates`)."""
        lay = self.layout
        xs = self._x[lay.slot_site]
        kind = pt.as_tensor_variable(lay.slot_kind)
        arg = pt.as_tensor_variable(lay.slot_arg)
        valid = pt.or_(pt.neq(kind, CATEGORICAL), pt.neq(arg, xs))
        if self._bounds is not None:
            lo, hi = self._bounds
            new = xs + arg
            site = pt.as_tensor_variable(lay.slot_site)
            inside = pt.ge(new, lo[site]) & pt.le(new, hi[site])
            valid = pt.switch(pt.eq(kind, INTEGER), inside, valid)
        return valid

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

    def refresh_bounds(self, x: np.ndarray) -> None:
        """Recompute integer supports (their parameters may have moved)."""
        if self._bounds_fn is not None:
            lo, hi = self._bounds_fn(x)
            self.layout.set_bounds(lo, hi)

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
        ``"local"`` raises :class:`~pymc_lbp.logp.local_differences.NotLocalError` when the model
        has no usable locality.
    local_min_slots : int
        ``"auto"`` uses the local method from this many slots on.
    local_options : dict, optional
        Passed to :func:`~pymc_lbp.logp.local_differences.build_local_plan` (``max_term_sites``,
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
        self._logp_graph = clone_replace(model.logp(), replace=self._replace)
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
        _log.info(
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
            batch = repeated_rows(self._x, sites.shape[0])
            batch = set_per_row(batch, sites, values)
            X = pt.matrix("X", dtype="int64")
            logp_batch = unblock_gathers(
                vectorize_graph(checks_per_row(logp), replace={self._x: X})
            )
            logp_batch = clone_replace(logp_batch, replace={X: batch})
            self._graph_parts = (logp, logp_batch, sites, values)
        return self._graph_parts

    def _batched(self):
        """The batched evaluation (compiled on first use when the local method is in use)."""
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

    def site_logp_function(self):
        """The compiled ``(x, sites, values) -> (logp(x), logp at x with x[sites[r]] =
        values[r] for every r)`` (the batched evaluation; compiled on first use)."""
        return self._batched()

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
            return tuple(substitute([plan.logp, plan.deltas], {plan.x: x}))
        logp, logp_batch, sites, values = self._batched_graph()
        lay = self.layout
        xs = self._x[lay.slot_site]
        if lay.all_binary:
            new, valid = 1 - xs, None
        else:
            kind = pt.as_tensor_variable(lay.slot_kind)
            arg = pt.as_tensor_variable(lay.slot_arg)
            new = pt.switch(
                pt.eq(kind, BINARY), 1 - xs, pt.switch(pt.eq(kind, CATEGORICAL), arg, xs + arg)
            )
            valid = self._valid_graph()
            new = pt.switch(valid, new, xs)
        nb = clone_replace(
            logp_batch, replace={sites: pt.as_tensor_variable(lay.slot_site), values: new}
        )
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
        fn = self._batched()
        new, valid = layout.candidates(x)
        values = np.where(valid, new, x[layout.slot_site]).astype(np.int64)
        sites = layout.slot_site
        if layout.n_slots <= self._chunk:
            logp_x, logp_nb = fn(x, sites, values)
        else:
            parts = []
            for start in range(0, layout.n_slots, self._chunk):
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
        """Model logp at ``x`` (its own compiled function: the batched evaluation with no rows, or
        one, does not run for every model, e.g. ``pt.roll`` under vectorisation)."""
        if self._local is not None:
            return self._local.logp(x)
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
            keep = keep & self._valid_graph()
        deltas = pt.switch(keep, deltas, -np.inf)
        outs = [model.logp(), deltas]
        self._graph_parts = clone_replace(outs, replace={**replace, **self._replace})
        log_g_graph = graph_log_balancing(self.balancing_name) if self.log_g else None
        self._fused = log_g_graph is not None
        if self._fused:
            log_w = pt.switch(pt.eq(deltas, -np.inf), -np.inf, log_g_graph(deltas))
            top = pt.max(log_w)
            cdf = pt.cumsum(pt.exp(log_w - top))
            outs += [log_w, cdf, top + pt.log(cdf[-1])]
        outs = clone_replace(outs, replace={**replace, **self._replace})
        self._fn = pm_compile([self._x], outs, on_unused_input="ignore", **self._compile_kwargs)
        self._fn.trust_input = True
        (self._relaxed_graph,) = clone_replace([relaxed.logp], replace={**replace, **self._replace})
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
