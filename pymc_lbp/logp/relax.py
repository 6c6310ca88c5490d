"""A differentiable extension of a PyMC model's logp over discrete values.

PyMC's logp of a discrete variable is not differentiable in its value: ``pytensor.grad`` of a
Bernoulli logp with respect to its integer value is identically zero, and categorical values are
used as indices. First-order (gradient) neighbour differences (Grathwohl et al. 2021) need a
differentiable ``f~`` with ``f~ = f`` on every discrete point. This module builds it honestly:

* Each block variable gets a float "relaxed" input: binary (Bernoulli) ``v`` in [0, 1]; categorical
  a one-hot tensor ``O`` with a trailing axis of length K; integer-valued variables their float
  value. Binary variables also carry the one-hot ``[1 - v, v]``.
* The block variables' own logp terms become their multilinear extensions:
  Bernoulli ``v log p + (1 - v) log(1 - p)``, Categorical ``sum_k O_k log p_k``.
* Uses of a discrete value as an index into a tensor that does not depend on the block
  (``mu[z]``, ``table[x[a], x[b]]``) become one-hot contractions
  ``sum_{c1, c2} O_a[c1] O_b[c2] table[c1, c2]``. The contraction is kept lazy through elementwise
  functions with block-independent operands (``log(cpt[z])``, ``(y - mu[z]) / sigma``), because a
  unary function commutes with one-hot selection: that keeps mixture likelihoods and conditional
  probability tables multilinear.
* ``eq(z, k)``, ``neq``, ``lt``, ... of a one-hot variable become sums of one-hot entries;
  ``switch(c, a, b)`` on a relaxed indicator becomes ``c a + (1 - c) b``; logical and/or/not act
  on indicators as products.
* A comparison or non-differentiable integer function of one bounded value (``z == 2``,
  ``z // 2``, ``z % 2``) is tabulated over its categories, ``f(z) = sum_k O_k f(k)``, and kept
  lazy like an index contraction, so ``where`` chains on one value stay multilinear.
* Shapes are constants of the relaxation: ``Shape``/``Shape_i``, the shape operand of ``fill``
  (``ones_like``) and ``SpecifyShape`` do not read values, so integer graphs built on them
  (``roll``'s shift modulo a length, ``x.size``, ``alloc`` sizes) never block it. The relaxed
  logp reads no block value variable (shape reads get constants of the block's shapes).
* Arithmetic uses take the float value; parameter checks (``CheckParameterValue``/``Assert``) are
  dropped (they guard parameters, not the target's values).

Where none of these rules applies (a non-differentiable function of an unbounded or computed
value, a discrete value indexing a tensor that itself depends on the block, a shape that depends on
values, ...), :class:`NotRelaxableError` names the operation, the block variables it reads and the
model term: the relaxation never returns a silent zero gradient. Comparisons of unbounded
integer variables (support checks such as ``value < 0``) are kept piecewise constant and listed in
:attr:`RelaxedLogp.piecewise`, so callers can warn.

Zero probabilities: ``log 0 = -inf`` entries are floored at :data:`LOG_FLOOR` where they are
multiplied by a relaxed weight (``0 * -inf`` would be NaN). On discrete points ``f~`` therefore
equals ``f`` wherever ``f`` is finite, and is ``<= LOG_FLOOR`` where ``f = -inf``.

Modules: this one builds the relaxed logp (:func:`relaxed_logp`, :class:`RelaxedLogp`, the block
variables' own terms); :mod:`pymc_lbp.logp.relaxer` holds the rules, node by node;
:mod:`pymc_lbp.logp.relaxed_values` holds :data:`LOG_FLOOR`, :class:`NotRelaxableError` and the
relaxed representation of a graph variable.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from pytensor.graph.replace import clone_replace
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV

from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.logp.relaxed_values import LOG_FLOOR, NotRelaxableError, _Rep
from pymc_lbp.logp.relaxer import _Relaxer


@dataclass
class RelaxedLogp:
    """A relaxed logp graph and its float inputs.

    Attributes
    ----------
    inputs : list of TensorVariable
        One float input per block variable, in block order: binary and integer variables have the
        variable's shape, categorical ones an extra trailing axis of length K (one-hot).
    logp : TensorVariable
        Scalar relaxed log-density, a function of ``inputs`` and of the model's other value
        variables.
    piecewise : list of str
        Operations kept piecewise constant (comparisons of unbounded integer variables); they
        contribute no gradient.
    """

    inputs: list[Variable]
    logp: Variable
    piecewise: list[str] = field(default_factory=list)


def relaxed_logp(model, specs) -> RelaxedLogp:
    """Build the relaxed logp of ``model`` over the block described by ``specs``.

    Parameters
    ----------
    model : pymc.Model
        The model.
    specs : sequence of VariableSpec
        The block variables (see :func:`pymc_lbp.logp.layout.describe_block`).

    Returns
    -------
    RelaxedLogp

    Raises
    ------
    NotRelaxableError
        If some use of a block variable has no differentiable extension here.
    """
    inputs, leaves = [], {}
    for spec in specs:
        shape = tuple(spec.shape) + ((spec.n_categories,) if spec.kind == "categorical" else ())
        leaf = pt.tensor(f"relaxed_{spec.name}", dtype="float64", shape=shape)
        inputs.append(leaf)
        if spec.kind == "binary":
            leaves[spec.value_var] = _Rep(value=leaf, onehot=pt.stack([1.0 - leaf, leaf], axis=-1))
        elif spec.kind == "categorical":
            cats = pt.arange(spec.n_categories, dtype="float64")
            leaves[spec.value_var] = _Rep(value=pt.sum(leaf * cats, axis=-1), onehot=leaf)
        else:
            leaves[spec.value_var] = _Rep(value=leaf)
    n_categories = {s.value_var: s.n_categories for s in specs if s.kind == "categorical"}
    relaxer = _Relaxer(leaves, n_categories)

    block_rvs = {model.values_to_rvs[s.value_var] for s in specs}
    other = [rv for rv in model.free_RVs + model.observed_RVs if rv not in block_rvs]
    terms = (
        model_logp(model, other + list(model.potentials), sum=False)
        if (other or model.potentials)
        else []
    )
    term_names = [v.name for v in other + list(model.potentials)]
    if len(term_names) != len(terms):
        term_names = [str(t) for t in terms]

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))
    try:
        total = pt.constant(0.0, dtype="float64")
        for name, term in zip(term_names, terms, strict=True):
            with _in_term(name):
                total = total + pt.sum(relaxer.value(term))
        # comparisons met so far are the model's own; those in the block variables' own terms
        # (support checks of integer variables) are expected and not reported
        user_piecewise = list(relaxer.piecewise)
        for spec, leaf in zip(specs, inputs, strict=True):
            with _in_term(spec.name):
                total = total + _own_term(model, spec, leaf, relaxer)
    finally:
        sys.setrecursionlimit(old_limit)
    # What still reads a block value variable reads only its shape (see _Relaxer.relax): give
    # those reads constants of the block's shapes, so the relaxed logp is a function of its
    # float inputs alone and a wrongly value-independent path would show as a wrong value.
    shapes_only = {
        s.value_var: pt.constant(np.zeros(s.shape, dtype=s.value_var.dtype)) for s in specs
    }
    (total,) = clone_replace([total], replace=shapes_only, rebuild_strict=False)
    return RelaxedLogp(inputs=inputs, logp=total, piecewise=user_piecewise)


@contextmanager
def _in_term(name: str):
    """Adds the model term being relaxed to a NotRelaxableError."""
    try:
        yield
    except NotRelaxableError as exc:
        if "in the logp term" in str(exc):
            raise
        raise NotRelaxableError(f"{exc} [in the logp term of `{name}`]") from exc


def _floored(relaxer: _Relaxer, graph: Variable) -> Variable:
    """The relaxed ``graph`` (a log-probability), floored at :data:`LOG_FLOOR`."""
    rep = relaxer.relax(graph)
    if rep is None:
        return pt.maximum(graph, LOG_FLOOR)
    if rep.table is not None and rep.value is None:
        return rep.table.materialize()
    return pt.maximum(rep.get_value(), LOG_FLOOR)


def _own_term(model, spec, leaf, relaxer: _Relaxer) -> Variable:
    """Multilinear extension of a block variable's own logp term."""
    rv = model.values_to_rvs[spec.value_var]
    op = rv.owner.op
    if isinstance(op, BernoulliRV | CategoricalRV):
        (p,) = model.replace_rvs_by_values(op.dist_params(rv.owner))
        if isinstance(op, BernoulliRV):
            lp1, lp0 = _floored(relaxer, pt.log(p)), _floored(relaxer, pt.log1p(-p))
            return pt.sum(leaf * lp1 + (1.0 - leaf) * lp0)
        return pt.sum(leaf * _floored(relaxer, pt.log(p)))
    # integer-valued variables: the model's own term, retyped onto the float value
    (term,) = model_logp(model, [rv], sum=False)
    return pt.sum(relaxer.value(term))


__all__ = ["RelaxedLogp", "relaxed_logp"]
