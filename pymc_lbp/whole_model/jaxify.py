"""Our pytensor graphs as JAX functions of the whole model's values.

A step's graphs read the model's other variables through the step's shared variables
(:func:`pymc.make_shared_replacements`); in the compiled program every value lives in the chain's
state instead, so each such shared variable is replaced by the model's value variable of the same
name and the graph becomes a function of its own inputs followed by every value variable of the
model, in ``model.value_vars`` order. The model's data (``pm.Data``) are inputs too, passed by
the function when it is called (:func:`jax_function`, :func:`bound_data`), so ``pm.set_data``
is seen. The conversion is PyMC's (:func:`pymc.sampling.jax.get_jaxified_graph`): other shared
variables held as constants, PyTensor's JAX rewrites, then ``jax_funcify``.

**Rewritten graphs kept on disk.** Without this store the rewrites are most of a warm build's
time (measured in docs/whole_model.md, "Compile time"), and they give the same graph every time
for the same graph, PyTensor and settings. So the rewritten graph is pickled into PyTensor's
compile directory (``<compiledir>/pymc_lbp_jax_graphs/<fingerprint>``), named by the
fingerprint of the graph before rewriting (:func:`pymc_lbp.fingerprint.graph_fingerprint`:
ops with their properties, inner graphs, constants' bytes, input types, PyTensor's version and
settings, PyMC's and JAX's versions), and a later process converts the stored graph instead of
rewriting again (files compressed and pruned as :mod:`pymc_lbp.function_store`'s, which keeps
the compiled PyTensor functions of the steps the same way). A graph the fingerprint cannot
stand for (an op known only by its name), one that cannot be pickled, or a
stored file that cannot be read is rewritten as PyMC does, and nothing is stored or the file is
replaced: only the time changes, never the function.
"""

from __future__ import annotations

import contextlib
import io
import logging
import pickle
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import graph_inputs

from pymc_lbp import function_store
from pymc_lbp.compiling import _Uncacheable, graph_key
from pymc_lbp.fingerprint import Unfingerprintable, graph_fingerprint
from pymc_lbp.function_store import read, write_atomically

_log = logging.getLogger("pymc_lbp")

STORE_FOLDER = "pymc_lbp_jax_graphs"
"""The folder of rewritten graphs inside PyTensor's ``config.compiledir``."""

CACHE_SIZE = 64
"""Converted graphs kept per process: a graph equal to one converted before (as
:func:`pymc_lbp.compiling.pm_compile` compares them) reuses its JAX function, so sampling a
model again skips PyTensor's JAX rewrites and conversion."""

_CACHE: OrderedDict = OrderedDict()


def model_value_replacements(model, steps: Sequence) -> dict:
    """``{shared variable: value variable}`` for the shared copies the steps hold of the model's
    values."""
    by_name = {v.name: v for v in model.value_vars}
    return {
        shared: by_name[name]
        for step in steps
        for name, shared in getattr(step, "shared", {}).items()
        if name in by_name
    }


def jax_function(
    inputs: Sequence, outputs: Sequence, model, replacements: dict
) -> Callable[..., list]:
    """``f(*inputs, *values) -> list of outputs`` as a JAX function, ``values`` the model's value
    variables in ``model.value_vars`` order.

    The graph's data (the model's ``pm.Data``, any shared tensor left once ``replacements``
    made the steps' copies of the model's values value variables) are inputs of the converted
    function too, of the shape their values have now: ``f`` passes their values when it is
    called (traced), the arrays :func:`bound_data` binds, else each variable's current value.
    So ``pm.set_data`` between two runs is seen, and the converted function serves every value
    of the same shape (a new shape is another graph); PyMC's conversion held them as constants,
    which the cache below, keyed by the variables themselves, kept from the first run. Integer
    scalars (a dimension's length, read as a shape: JAX needs it concrete) and shared variables
    of other types stay constants of their current value, part of the cache's key.

    The function is ``jax.jit``-wrapped (the program calls it inside its own ``jit``, where XLA
    inlines it): JAX keeps its traced form per input shapes and its batched form per batching,
    so the warmup's and the draws' transitions, and ``vmap``'s passes over a loop body, trace
    and batch each of our graphs once, not once per transition and pass (the tracing times
    before and after are in docs/whole_model.md, "Compile time").
    """
    import jax

    # one pass over the graph: the steps' copies of the model's values become value variables,
    # the data inputs of their current shapes, every other shared variable a constant
    shared = [
        v
        for v in graph_inputs(list(outputs))
        if isinstance(v, SharedVariable) and v not in replacements
    ]
    data = [v for v in shared if _is_data(v)]
    data_inputs = [
        v.type.clone(shape=np.shape(v.get_value(borrow=True)))(name=v.name) for v in data
    ]
    constants = _as_constants([v for v in shared if not _is_data(v)])
    replace = {**replacements, **dict(zip(data, data_inputs, strict=True)), **constants}
    outs = clone_replace(list(outputs), replace=replace)
    all_inputs = [*inputs, *model.value_vars, *data_inputs]
    keep: list = []
    try:
        key = graph_key(all_inputs, outs, {"backend": "jax"}, keep)
    except (_Uncacheable, TypeError):
        return _with_data(jax.jit(jaxified_graph(all_inputs, outs)), data)
    entry = _CACHE.get(key)
    if entry is not None:
        _CACHE.move_to_end(key)
        return _with_data(entry[0], data)
    fn = jax.jit(jaxified_graph(all_inputs, outs))
    _CACHE[key] = (fn, keep)  # keep: what the key compares by identity stays alive
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return _with_data(fn, data)


_BOUND: dict = {}
"""The data values :func:`bound_data` binds now (``{shared variable: array}``)."""


@contextlib.contextmanager
def bound_data(values: dict):
    """Inside the block, the functions of :func:`jax_function` read the data variables of
    ``values`` (``{shared variable: array}``) there, not their current values: the compiled
    program passes its data arguments (tracers) so, and XLA's program is the same for new
    values of the same shape."""
    before = dict(_BOUND)
    _BOUND.update(values)
    try:
        yield
    finally:
        _BOUND.clear()
        _BOUND.update(before)


def data_variables(model) -> list:
    """The model's data variables :func:`jax_function` takes as inputs (see
    :func:`bound_data`)."""
    return [v for v in model.data_vars if _is_data(v)]


def _is_data(v) -> bool:
    from pytensor.tensor.type import TensorType, integer_dtypes

    if not isinstance(v, SharedVariable) or not isinstance(v.type, TensorType):
        return False
    if v.default_update is not None:
        return False
    # an integer scalar may be a length (a dimension's): JAX needs shapes concrete
    return not (v.type.ndim == 0 and v.type.dtype in integer_dtypes)


def _with_data(fn: Callable, data: list) -> Callable[..., list]:
    """``f(*args) = fn(*args, *data values)`` (a new function each time: JAX keeps the traced
    form of a function it traced before, and would keep data read then)."""
    if not data:
        return fn

    def with_data(*args):
        return fn(*args, *(_BOUND[v] if v in _BOUND else v.get_value(borrow=True) for v in data))

    return with_data


def store_folder() -> Path:
    """The folder of rewritten graphs: :data:`STORE_FOLDER` in PyTensor's ``config.compiledir``."""
    return function_store.store_folder(STORE_FOLDER)


def jaxified_graph(inputs: Sequence, outputs: Sequence) -> Callable[..., list]:
    """What :func:`pymc.sampling.jax.get_jaxified_graph` makes of the graph (its steps, with the
    rewritten graph read from the store when an earlier process wrote it there: see the module
    docstring)."""
    import jax
    import pymc
    import pymc.sampling.jax  # noqa: F401 (its JAX conversions of PyMC's ops: checks, PosDefMatrix)
    from pytensor.graph.fg import FunctionGraph
    from pytensor.link.jax.dispatch import jax_funcify

    # every shared variable a constant of its value, as get_jaxified_graph does
    graph = list(outputs)
    shared = [v for v in graph_inputs(graph) if isinstance(v, SharedVariable)]
    if shared:
        graph = clone_replace(graph, replace=_as_constants(shared))
    versions = {"pymc": pymc.__version__, "jax": jax.__version__, "backend": "jax"}
    try:
        path = store_folder() / graph_fingerprint(inputs, graph, versions)
    except Unfingerprintable as err:
        _log.debug("Rewriting for JAX without the store: %s", err)
        path = None
    fgraph = None if path is None else _read(path, len(inputs), len(graph))
    if fgraph is None:
        fgraph = _rewritten(FunctionGraph(inputs=list(inputs), outputs=graph, clone=True))
        if path is not None:
            _write(path, fgraph)
    with _constants_put_on_device():
        return jax_funcify(fgraph)


@contextlib.contextmanager
def _constants_put_on_device():
    """PyTensor's JAX conversion makes each array constant a JAX array with ``jnp.array``, an
    eager op that JAX compiles once per shape and dtype (24 XLA compilations for the hidden
    Markov model's graphs from an empty cache, docs/whole_model.md); ``jax.device_put`` makes
    the same array with no compilation. Registered for the conversion only, then PyTensor's own
    again."""
    import jax
    from pytensor.link.jax.dispatch.basic import jax_typify

    theirs = jax_typify.registry[np.ndarray]

    def ours(data, dtype=None, **kwargs):
        if len(data.shape) == 0:
            return theirs(data, dtype=dtype, **kwargs)
        return jax.device_put(np.asarray(data, dtype=dtype))

    jax_typify.register(np.ndarray, ours)
    try:
        yield
    finally:
        jax_typify.register(np.ndarray, theirs)


def _rewritten(fgraph):
    """PyTensor's JAX rewrites applied to ``fgraph`` (in place; returned)."""
    from pytensor.compile import mode

    mode.JAX.optimizer.rewrite(fgraph)
    return fgraph


def _as_constants(shared: list) -> dict:
    """``{shared variable: constant of its value}``, as PyMC's JAX conversion replaces them
    (refusing what it refuses)."""
    import pytensor.tensor as pt
    from pytensor.tensor.random.type import RandomType

    if any(isinstance(v.type, RandomType) for v in shared):
        raise ValueError(
            "Graph contains shared RandomType variables which cannot be safely replaced"
        )
    if any(v.default_update is not None for v in shared):
        raise ValueError(
            "Graph contains shared variables with default_update which cannot be safely replaced."
        )
    return {v: pt.constant(v.get_value(borrow=True)) for v in shared}


def _read(path: Path, n_inputs: int, n_outputs: int):
    """The stored rewritten graph at ``path``, or None (absent, unreadable, or not a graph of
    this many inputs and outputs)."""
    data = read(path)
    if data is None:
        return None
    try:
        inputs, outputs = pickle.loads(data)
        if len(inputs) != n_inputs or len(outputs) != n_outputs:
            raise ValueError("a stored graph of another signature")
        return _fresh_function_graph(inputs, outputs)
    except Exception as err:  # a damaged or foreign file: rewrite again, replace it
        _log.debug("Ignoring the stored JAX graph %s: %s", path, err)
        return None


def _fresh_function_graph(inputs: list, outputs: list):
    from pytensor.graph.fg import FunctionGraph

    return FunctionGraph(inputs, outputs, clone=False)


class _GraphPickler(pickle.Pickler):
    """Inner function graphs (a ``Scan``'s, a ``Composite``'s) pickled as their inputs and
    outputs only: their rewriting features do not survive pickling (PyTensor's ``ReplaceValidate``
    comes back without its history), and JAX's conversion rewrites a ``Scan``'s inner graph
    again, attaching what it needs."""

    def reducer_override(self, obj):
        from pytensor.graph.fg import FunctionGraph

        if isinstance(obj, FunctionGraph):
            return _fresh_function_graph, (list(obj.inputs), list(obj.outputs))
        return NotImplemented


def _write(path: Path, fgraph) -> None:
    """Pickle ``fgraph``'s inputs and outputs to ``path`` (atomically: other processes read the
    same folder); a graph that cannot be pickled is skipped."""
    try:
        buffer = io.BytesIO()
        _GraphPickler(buffer, protocol=5).dump((list(fgraph.inputs), list(fgraph.outputs)))
    except (pickle.PicklingError, RecursionError, TypeError, AttributeError) as err:
        _log.debug("Could not store the rewritten JAX graph %s: %s", path, err)
        return
    write_atomically(path, buffer.getvalue())
