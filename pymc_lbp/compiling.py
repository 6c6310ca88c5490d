"""Compiling pytensor functions: PyMC's ``compile``, once per distinct graph, collector paused.

Two costs of building a step are paid here.

**The same graph compiled again.** A step's construction compiles the block's differences, its
kernels and its model logp; building the same step again on the same model (a second
``pm.sample`` in a notebook, one step per chain, a parameter sweep, every test of a sampler on a
shared model) compiled the very same graphs anew: 29% of the compile time of the samplers'
tests was such repeats. :func:`pm_compile` keeps the compiled functions of the last
:data:`CACHE_SIZE` distinct graphs in this process and hands back the same function for a graph
equal to one of them. Two graphs are equal when they apply equal ops (pytensor ops compare by
their properties) to the same inputs in the same positions (same types and names), the same
constants (same type and bytes) and the *same* shared variables (the same objects: a function
reads its shared variables' storage, so a graph over another step's shared variables is another
graph), with the same compile options. Graphs that draw random numbers (they carry random
generator updates) or that are compiled with ``updates``/``givens`` are not cached. The cache
holds the functions, and through them their shared variables, until they are evicted or
:func:`clear_compile_cache` is called; :func:`compile_cache_info` counts hits and misses.

**The same graph compiled in an earlier process.** A graph this process has not compiled is
looked up in :mod:`pymc_lbp.function_store` (functions pickled in PyTensor's compile directory
under a fingerprint of their graph) and loaded there, over the caller's shared variables,
without rewriting; a function compiled is stored.

**Python's collector while rewriting.** Rewriting a graph allocates tens of thousands of
short-lived objects (apply nodes, variables, their tags). With PyMC, pytensor and ArviZ imported,
the interpreter already holds millions of objects, and every generation-2 collection that these
allocations trigger walks all of them, a large share of a compilation's time (measured in
docs/compiled.md). So the collector is paused while a graph is compiled. Nothing else changes:
the same rewrites, the same compiled function; the cycles made while compiling are collected
when the collector runs again.
"""

from __future__ import annotations

import gc
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np
from pymc.pytensorf import compile as _pymc_compile
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import io_toposort
from pytensor.tensor.random.type import RandomType

from pymc_lbp import function_store
from pymc_lbp.fingerprint import config_key

__all__ = [
    "CACHE_SIZE",
    "CompileCacheInfo",
    "clear_compile_cache",
    "compile_cache_info",
    "config_key",
    "gc_paused",
    "graph_key",
    "pm_compile",
]

#: How many distinct compiled graphs :func:`pm_compile` keeps (least recently used goes first).
CACHE_SIZE = 256

#: Compile options that change what the function computes beyond its graph: never cached.
_UNCACHED_OPTIONS = ("updates", "givens")


class CompileCacheInfo(NamedTuple):
    """Counts of :func:`pm_compile` since the last :func:`clear_compile_cache`."""

    hits: int
    misses: int
    uncached: int
    size: int


class _Cache:
    def __init__(self) -> None:
        self.entries: OrderedDict[Hashable, Any] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = self.uncached = 0


_CACHE = _Cache()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (for building and compiling big graphs); its previous
    state is restored afterwards, also on error."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Uncacheable(Exception):
    """The graph or its options cannot be keyed safely: compile it without the cache."""


def _constant_key(c: Constant) -> tuple:
    if c.data is None:  # NoneConst (e.g. an absent size or axis): one value, keyed by its type
        return ("constant", c.type, None)
    data = np.asarray(c.data)
    if data.dtype == object:
        raise _Uncacheable
    digest = hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=16).hexdigest()
    return ("constant", c.type, data.shape, digest)


def _option_key(name: str, value: Any, keep: list) -> tuple:
    if isinstance(value, str | int | float | bool | type(None)):
        return (name, value)
    keep.append(value)  # alive as long as the entry, so its id is not reused
    return (name, "id", id(value))


def graph_key(inputs: Sequence[Variable], outputs, options: dict, keep: list) -> tuple:
    """A hashable key equal for equal graphs (see the module docstring).

    Objects compared by identity (shared variables, unhashable or non-scalar options) are
    appended to ``keep``, which the cache holds with the entry. Raises ``_Uncacheable`` for
    graphs that draw random numbers, options that change the graph, and unkeyable constants.
    """
    if any(options.get(name) for name in _UNCACHED_OPTIONS):
        raise _Uncacheable
    outs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
    if not all(isinstance(o, Variable) for o in outs):
        raise _Uncacheable  # In/Out wrappers carry their own options
    ids: dict[Variable, tuple] = {}
    for i, v in enumerate(inputs):
        if not isinstance(v, Variable) or v in ids:
            raise _Uncacheable
        ids[v] = ("input", i, v.type, v.name)

    def key_of(v: Variable) -> tuple:
        known = ids.get(v)
        if known is not None:
            return known
        if isinstance(v, SharedVariable):
            if isinstance(v.type, RandomType):
                raise _Uncacheable  # a random stream: its updates belong to one function
            keep.append(v)
            k = ("shared", id(v), v.type)
        elif isinstance(v, Constant):
            k = _constant_key(v)
        else:
            raise _Uncacheable  # a free variable: let the compiler say what is missing
        ids[v] = k
        return k

    nodes = []
    for n, node in enumerate(io_toposort(list(inputs), outs)):
        nodes.append((node.op, tuple(key_of(i) for i in node.inputs)))
        for j, out in enumerate(node.outputs):
            ids[out] = ("node", n, j)
    opts = tuple(sorted(_option_key(k, v, keep) for k, v in options.items()))
    key = (tuple(nodes), tuple(key_of(o) for o in outs), opts, config_key())
    hash(key)  # ops with unhashable properties raise TypeError here
    return key


def pm_compile(inputs: Sequence, outputs, **kwargs: Any):
    """``pymc.pytensorf.compile(inputs, outputs, **kwargs)``: the function compiled before for an
    equal graph when there is one in this process, else compiled with the collector paused."""
    keep: list = []
    try:
        key = graph_key(inputs, outputs, kwargs, keep)
    except (_Uncacheable, TypeError):
        with _CACHE.lock:
            _CACHE.uncached += 1
        with gc_paused():
            return _pymc_compile(inputs, outputs, **kwargs)
    with _CACHE.lock:
        entry = _CACHE.entries.get(key)
        if entry is not None:
            _CACHE.entries.move_to_end(key)
            _CACHE.hits += 1
            return entry[0]
    fn = _stored_or_compiled(inputs, outputs, kwargs)
    with _CACHE.lock:
        _CACHE.misses += 1
        _CACHE.entries[key] = (fn, keep)
        while len(_CACHE.entries) > CACHE_SIZE:
            _CACHE.entries.popitem(last=False)
    return fn


def _stored_or_compiled(inputs: Sequence, outputs, kwargs: dict):
    """The function :mod:`pymc_lbp.function_store` holds for the graph (an earlier process
    compiled it), else compiled (collector paused) and stored."""
    single = not isinstance(outputs, list | tuple)  # returns the output, not a list of it
    outs = [outputs] if single else list(outputs)
    found = function_store.fingerprint(list(inputs), outs, {**kwargs, "single_output": single})
    if found is not None:
        fn = function_store.load(*found)
        if fn is not None:
            return fn
    with gc_paused():
        fn = _pymc_compile(inputs, outputs, **kwargs)
    if found is not None:
        function_store.save(found[0], fn, found[1])
    return fn


def compile_cache_info() -> CompileCacheInfo:
    """Hits, misses, uncached compilations and entries of :func:`pm_compile`'s cache."""
    with _CACHE.lock:
        return CompileCacheInfo(_CACHE.hits, _CACHE.misses, _CACHE.uncached, len(_CACHE.entries))


def clear_compile_cache() -> None:
    """Forget every cached function and reset the counts."""
    with _CACHE.lock:
        _CACHE.entries.clear()
        _CACHE.hits = _CACHE.misses = _CACHE.uncached = 0
