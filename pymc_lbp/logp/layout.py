"""The sampled block of discrete variables: its sites and their one-site moves ("slots").

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

Slots are laid out site by site (:class:`BlockLayout`); :func:`describe_block` says which value
variables form the block and what kind each is. The differences ``Delta_s(x)`` are in
:mod:`pymc_lbp.logp.differences`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.distributions.discrete import DiscreteUniformRV, DiscreteWeibullRV
from pymc.distributions.truncated import TruncatedRV
from pytensor.graph.basic import Variable
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

BINARY, CATEGORICAL, INTEGER = 0, 1, 2
KIND_CODES = {"binary": BINARY, "categorical": CATEGORICAL, "integer": INTEGER}

SUPPORTED = (
    "Bernoulli, Categorical (incl. OrderedLogistic/OrderedProbit), and integer-valued Poisson, "
    "Binomial, BetaBinomial, Geometric, NegativeBinomial, HyperGeometric, DiscreteUniform, "
    "DiscreteWeibull, and pm.Truncated of these integer-valued ones"
)


def truncated_support(op, inputs) -> tuple[Variable, Variable] | None:
    """Support of a ``pm.Truncated`` integer-valued RV (op ``TruncatedRV``) as graphs of its node's
    ``inputs`` (the truncated distribution's ``rng, size, *params``, then ``lower, upper``):
    the truncated distribution's :func:`integer_support` narrowed to ``[ceil(lower),
    floor(upper)]`` (absent bounds are infinite). None where that distribution is not one of
    ours (or is not a plain random variable)."""
    from pytensor.tensor.random.op import RandomVariable

    base = op.base_rv_op
    if not isinstance(base, RandomVariable):
        return None
    *base_inputs, lower, upper = inputs
    support = integer_support(base, base_inputs[2:])  # a RandomVariable's: rng, size, *params
    if support is None:
        return None
    return pt.maximum(support[0], pt.ceil(lower)), pt.minimum(support[1], pt.floor(upper))


def integer_support(op, params) -> tuple[Variable | float, Variable | float] | None:
    """Support ``[lower, upper]`` of an integer-valued RV as graphs of its parameters.

    Returns None for distributions pymc_lbp does not support (``pm.Truncated``'s:
    :func:`truncated_support`).
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
            what = type(op).__name__
            if isinstance(op, TruncatedRV):
                # its dist_params is PyMC's error "extended_signature must be provided"
                inputs = model.replace_rvs_by_values(list(rv.owner.inputs))
                bounds = truncated_support(op, inputs)
                what = f"pm.Truncated({type(op.base_rv_op).__name__})"
            elif hasattr(op, "dist_params"):
                params = model.replace_rvs_by_values(list(op.dist_params(rv.owner)))
                bounds = integer_support(op, params)
            if bounds is None:
                raise ValueError(
                    f"Variable {rv.name!r} has distribution {what}, which pymc_lbp does not "
                    f"support. Supported discrete distributions: {SUPPORTED}."
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
        return int(self.moves_of(slot, x[self.slot_site[slot]])[0])

    def reverse_slot(self, slot: int, old_value: int) -> int:
        """The slot that moves the site back to ``old_value`` after ``slot`` was applied."""
        return int(self.moves_of(slot, old_value)[1])

    def moves_of(self, slot: np.ndarray, old: np.ndarray, xp=np) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`new_value` and :meth:`reverse_slot` elementwise over arrays: the value each
        ``slot`` gives its site when the site holds ``old``, and the slot that moves it back
        (``xp`` the array module: numpy, or ``jax.numpy`` in the JAX twins)."""
        if self.all_binary:
            return 1 - old, slot
        kind, arg = xp.asarray(self.slot_kind)[slot], xp.asarray(self.slot_arg)[slot]
        offset = xp.asarray(self.site_offset)[xp.asarray(self.slot_site)[slot]]
        new = xp.where(kind == BINARY, 1 - old, xp.where(kind == CATEGORICAL, arg, old + arg))
        back = xp.where(
            kind == BINARY, slot, xp.where(kind == CATEGORICAL, offset + old, 2 * offset + 1 - slot)
        )
        return new, back

    def candidates_graph(self, x: Variable, bounds=None) -> tuple[Variable, Variable]:
        """:meth:`candidates` as graphs of a symbolic int64 block ``x`` (``bounds`` the sites'
        ``(lower, upper)`` graphs; None when the block has no integer sites)."""
        site = pt.as_tensor_variable(self.slot_site)
        kind = pt.as_tensor_variable(self.slot_kind)
        arg = pt.as_tensor_variable(self.slot_arg)
        xs = x[site]
        new = pt.switch(
            pt.eq(kind, BINARY), 1 - xs, pt.switch(pt.eq(kind, CATEGORICAL), arg, xs + arg)
        )
        valid = pt.or_(pt.neq(kind, CATEGORICAL), pt.neq(arg, xs))
        if bounds is not None:
            lo, hi = bounds
            inside = pt.ge(new, lo[site]) & pt.le(new, hi[site])
            valid = pt.switch(pt.eq(kind, INTEGER), inside, valid)
        return new, valid

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
