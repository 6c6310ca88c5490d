"""Fingerprints of PyTensor graphs: one hex digest per graph, the same in every process.

The stores kept in PyTensor's compile directory name their files by it: the compiled functions
of :mod:`pymc_lbp.function_store` and the rewritten JAX graphs of
:mod:`pymc_lbp.whole_model.jaxify`. A fingerprint stands for the graph itself: the graph's ops
(class and properties, inner graphs by their own fingerprint, memory addresses left out), its
inputs' types, its constants' bytes, its shared variables by type and place (their values may
change; the caller gets them in order), and the settings a compilation depends on
(PyTensor's version, mode, linker, rewrites, ``floatX``, compiler and its flags, and the compile
options). A graph it cannot tell from another (an op known only by its printed name, a value
whose repr leaves out its content) raises :class:`Unfingerprintable`, and the stores then
compile or rewrite as if they were empty.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pytensor
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.op import Op
from pytensor.graph.traversal import io_toposort
from pytensor.graph.type import Type
from pytensor.scalar.basic import ScalarOp

__all__ = ["Unfingerprintable", "config_key", "graph_fingerprint"]

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class Unfingerprintable(ValueError):
    """A graph whose fingerprint could not tell it from another (:func:`graph_fingerprint`): an
    op with neither ``__props__`` nor an inner graph (other than a scalar op, known by its class
    and attributes) is known only by its printed name, a value printed by a repr of its own may
    leave out its content, and a shared variable's value may change."""


def _text(value: Any) -> str:
    """``repr(value)`` without memory addresses (they differ from one process to the next);
    arrays, also inside tuples, lists and dicts, by their bytes (numpy prints them rounded and
    elided); ops (an ``Elemwise``'s scalar op) as the graph's ops are."""
    if isinstance(value, np.ndarray):
        return _array_text(value)
    if isinstance(value, Op):
        return _op_text(value)
    if isinstance(value, tuple | list):
        return f"{type(value).__name__}({','.join(_text(v) for v in value)})"
    if isinstance(value, Mapping):  # a dict, PyTensor's frozendict
        items = (f"{_text(k)}:{_text(v)}" for k, v in value.items())
        return f"{type(value).__name__}({','.join(items)})"
    if isinstance(value, type) or inspect.isfunction(value) or inspect.isbuiltin(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    text = repr(value)
    if isinstance(value, _EXACT_REPR):
        return _ADDRESS.sub("", text)
    if _ADDRESS.search(text) and hasattr(value, "__dict__"):
        # an object printed by its address: by its class and attributes
        return f"{type(value).__module__}.{type(value).__qualname__}{_text(vars(value))}"
    # a repr of its own may leave out what tells two objects apart (scipy's sparse matrices
    # print their shape and count of entries only)
    raise Unfingerprintable(f"a {type(value).__qualname__} in the graph prints as {text[:80]!r}")


#: Values whose repr says all they are: numbers (numpy's scalars print every digit), strings,
#: slices, PyTensor's types (dtype and static shape).
_EXACT_REPR = (
    str,
    bytes,
    bool,
    int,
    float,
    complex,
    type(None),
    np.generic,
    slice,
    type(...),
    Type,
)


def _array_text(data: np.ndarray) -> str:
    if data.dtype == object:
        return f"object{data.shape}[{','.join(_text(v) for v in data.ravel())}]"
    digest = hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=12).hexdigest()
    return f"{data.dtype}{data.shape}:{digest}"


def _op_text(op: Any) -> str:
    props = getattr(op, "__props__", None)
    name = f"{type(op).__module__}.{type(op).__qualname__}"
    inner = ""
    if hasattr(op, "inner_inputs") and hasattr(op, "inner_outputs"):  # Composite, OpFromGraph
        inner = "{" + graph_fingerprint(op.inner_inputs, op.inner_outputs) + "}"
    if props is None:
        if inner:
            return f"{name}:{_ADDRESS.sub('', str(op))}{inner}"
        if not isinstance(op, ScalarOp):
            raise Unfingerprintable(f"{name} has neither __props__ nor an inner graph")
        # scalar ops compare by class and attributes (output type rule, Cast's type)
        return f"{name}{_text(vars(op))}"
    return f"{name}({','.join(_text(getattr(op, p)) for p in props)}){inner}"


def config_key() -> tuple:
    """The global settings a compilation without an explicit mode depends on (part of
    :func:`pymc_lbp.compiling.pm_compile`'s key and of :func:`graph_fingerprint`)."""
    c = pytensor.config
    return (
        str(c.mode),
        c.linker,
        c.optimizer,
        c.optimizer_excluding,
        c.optimizer_including,
        c.floatX,
        c.cxx,
    )


def graph_fingerprint(
    inputs: Sequence[Variable],
    outputs: Iterable[Variable],
    options: dict | None = None,
    *,
    shared: list | None = None,
) -> str:
    """A hex digest equal for equal graphs compiled with equal options and settings, in this
    process and any other (see the module docstring); :class:`Unfingerprintable` for a graph it
    cannot tell from another.

    A shared variable (its value may change) raises too, unless a list is given as ``shared``:
    each one then counts by its type and its place among them, in the order they are met, and is
    appended to the list (a function compiled over them reads their values when called:
    :mod:`pymc_lbp.function_store`)."""
    outs = list(outputs)
    refs: dict[Variable, str] = {v: f"i{k}:{v.type}" for k, v in enumerate(inputs)}

    def ref(v: Variable) -> str:
        known = refs.get(v)
        if known is None:
            if isinstance(v, Constant):
                data = "None" if v.data is None else _text(np.asarray(v.data))
                known = f"c[{v.type}:{data}]"
            elif isinstance(v, SharedVariable):
                if shared is None:
                    raise Unfingerprintable(f"shared variable {v.name}: its value may change")
                known = f"s{len(shared)}[{v.type}]"
                shared.append(v)
            else:
                known = f"v[{v.type}:{v.name}]"
            refs[v] = known
        return known

    # PyTensor's version, the settings pm_compile keys on, the compiler's flags (C modules are
    # compiled per flags)
    settings = (pytensor.__version__, *config_key(), pytensor.config.gcc__cxxflags)
    h = hashlib.sha256(_text(settings).encode())
    h.update(_text(sorted((k, _text(v)) for k, v in (options or {}).items())).encode())
    for n, node in enumerate(io_toposort(list(inputs), outs)):
        h.update(f"{_op_text(node.op)}({','.join(ref(i) for i in node.inputs)})\n".encode())
        for j, out in enumerate(node.outputs):
            refs[out] = f"n{n}.{j}"
    h.update(",".join(ref(o) for o in outs).encode())
    return h.hexdigest()[:32]
