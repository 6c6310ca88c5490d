"""Which graphs this compile directory has compiled before: a record kept next to PyTensor's cache.

A step has graphs a run may or may not need (the integer jumps' batched logp and their compiled
call, :mod:`pymc_lbp.samplers.integer.numpy_jumps`). Compiling one whose C modules PyTensor's
compile directory already holds costs a second or two; compiling one it has never seen costs
every new op signature's gcc run, tens of seconds on a new model, more than a first run of a few
hundred draws needs. What the step should do depends on which of the two it is, and PyTensor's
module cache cannot say before the graph is rewritten and linked (its keys are per op signature of
the rewritten graph). So the step asks this record: one empty file per graph compiled, named by a
fingerprint of the graph before rewriting, in ``<compiledir>/pymc_lbp_graphs/`` (PyTensor's
``config.compiledir``: the record lives and dies with the modules it speaks for); and, for a
graph not compiled yet, how many seconds runs have spent doing without it (``<fingerprint>.
numpy_seconds``), so that short runs one after another add up to a compile that pays.

The fingerprint is stable from one process to the next: the graph's ops (class and properties,
printed, memory addresses left out), its inputs' types, its constants' bytes, and the settings a
compilation depends on (PyTensor's version, mode, linker, rewrites, ``floatX``, compiler and its
flags, and the compile options). A graph recorded but whose modules PyTensor has since removed
(unused for weeks) compiles as it would have without the record; a graph never recorded whose
modules happen to be there (compiled by another graph) is treated as new. Either way only the
time changes, never a draw.

The rule the steps follow (:func:`compiling_pays`, ski rental): a graph compiled there before
is compiled once :data:`COMPILE_AFTER_SECONDS_WARM` of work without it has passed, a graph never
compiled there once runs have spent :data:`COMPILE_AFTER_SECONDS_COLD` without it, summed over
runs. The integer jumps do without theirs in numpy
(:mod:`pymc_lbp.samplers.integer.numpy_jumps`).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytensor
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.op import Op
from pytensor.graph.traversal import io_toposort
from pytensor.graph.type import Type
from pytensor.scalar.basic import ScalarOp

__all__ = [
    "COMPILE_AFTER_SECONDS_COLD",
    "COMPILE_AFTER_SECONDS_WARM",
    "RECORD_FOLDER",
    "Unfingerprintable",
    "add_numpy_seconds",
    "compiled_before",
    "compiling_pays",
    "config_key",
    "graph_fingerprint",
    "note_compiled",
    "numpy_seconds",
    "record_folder",
    "record_seconds",
]

_log = logging.getLogger("pymc_lbp")

#: The record's folder inside PyTensor's ``config.compiledir``.
RECORD_FOLDER = "pymc_lbp_graphs"

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class Unfingerprintable(ValueError):
    """A graph whose fingerprint could not tell it from another (:func:`graph_fingerprint` with
    ``strict=True``): an op with neither ``__props__`` nor an inner graph (other than a scalar op,
    known by its class and attributes) is known only by its printed name."""


def _text(value: Any, strict: bool = False) -> str:
    """``repr(value)`` without memory addresses (they differ from one process to the next);
    arrays, also inside tuples, lists and dicts, by their bytes (numpy prints them rounded and
    elided); ops (an ``Elemwise``'s scalar op) as the graph's ops are."""
    if isinstance(value, np.ndarray):
        return _array_text(value, strict)
    if isinstance(value, Op):
        return _op_text(value, strict)
    if isinstance(value, tuple | list):
        return f"{type(value).__name__}({','.join(_text(v, strict) for v in value)})"
    if isinstance(value, dict):
        items = (f"{_text(k, strict)}:{_text(v, strict)}" for k, v in value.items())
        return f"dict({','.join(items)})"
    if isinstance(value, Mapping):  # PyTensor's frozendict
        items = (f"{_text(k, strict)}:{_text(v, strict)}" for k, v in value.items())
        return f"{type(value).__name__}({','.join(items)})"
    if isinstance(value, type) or inspect.isfunction(value) or inspect.isbuiltin(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    text = repr(value)
    if not strict or isinstance(value, _EXACT_REPR):
        return _ADDRESS.sub("", text)
    if _ADDRESS.search(text) and hasattr(value, "__dict__"):
        # an object printed by its address: by its class and attributes
        return f"{type(value).__module__}.{type(value).__qualname__}{_text(vars(value), strict)}"
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


def _array_text(data: np.ndarray, strict: bool = False) -> str:
    if data.dtype == object:
        return f"object{data.shape}[{','.join(_text(v, strict) for v in data.ravel())}]"
    digest = hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=12).hexdigest()
    return f"{data.dtype}{data.shape}:{digest}"


def _op_text(op: Any, strict: bool) -> str:
    props = getattr(op, "__props__", None)
    name = f"{type(op).__module__}.{type(op).__qualname__}"
    inner = ""
    if hasattr(op, "inner_inputs") and hasattr(op, "inner_outputs"):  # Composite, OpFromGraph
        inner = "{" + graph_fingerprint(op.inner_inputs, op.inner_outputs, strict=strict) + "}"
    if props is None:
        if strict and not inner:
            if not isinstance(op, ScalarOp):
                raise Unfingerprintable(f"{name} has neither __props__ nor an inner graph")
            # scalar ops compare by class and attributes (output type rule, Cast's type)
            return f"{name}{_text(vars(op), strict)}"
        return f"{name}:{_ADDRESS.sub('', str(op))}{inner}"
    return f"{name}({','.join(_text(getattr(op, p), strict) for p in props)}){inner}"


def _constant_text(c: Constant, strict: bool) -> str:
    if c.data is None:
        return f"c[{c.type}:None]"
    return f"c[{c.type}:{_text(np.asarray(c.data), strict)}]"


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


def _settings_text() -> str:
    """PyTensor's version, the settings :func:`pymc_lbp.compiling.pm_compile` keys on, and the
    compiler's flags (C modules are compiled per flags)."""
    return _text((pytensor.__version__, *config_key(), pytensor.config.gcc__cxxflags))


def graph_fingerprint(
    inputs: Sequence[Variable],
    outputs: Iterable[Variable],
    options: dict | None = None,
    *,
    strict: bool = False,
    shared: list | None = None,
) -> str:
    """A hex digest equal for equal graphs compiled with equal options and settings, in this
    process and any other (see the module docstring).

    With ``strict=True`` (a fingerprint that stands for the graph itself, as
    :mod:`pymc_lbp.whole_model.jaxify`'s store of rewritten graphs needs) a graph with an op known
    only by its printed name raises :class:`Unfingerprintable`; otherwise (this record, which
    only times compilations) such an op counts by its name. A shared variable (its value may
    change) then raises too, unless a list is given as ``shared``: each one counts by its type and
    its place among them, in the order they are met, and is appended to the list (a function
    compiled over them reads their values when called: :mod:`pymc_lbp.function_store`)."""
    outs = list(outputs)
    refs: dict[Variable, str] = {v: f"i{k}:{v.type}" for k, v in enumerate(inputs)}

    def ref(v: Variable) -> str:
        known = refs.get(v)
        if known is None:
            if isinstance(v, Constant):
                known = _constant_text(v, strict)
            elif isinstance(v, SharedVariable):
                if shared is not None:
                    known = f"s{len(shared)}[{v.type}]"
                    shared.append(v)
                elif strict:
                    raise Unfingerprintable(f"shared variable {v.name}: its value may change")
                else:
                    known = f"s[{v.type}:{v.name}]"  # its value may change: not part of the graph
            else:
                known = f"v[{v.type}:{v.name}]"
            refs[v] = known
        return known

    h = hashlib.sha256(_settings_text().encode())
    h.update(_text(sorted((k, _text(v)) for k, v in (options or {}).items())).encode())
    for n, node in enumerate(io_toposort(list(inputs), outs)):
        h.update(f"{_op_text(node.op, strict)}({','.join(ref(i) for i in node.inputs)})\n".encode())
        for j, out in enumerate(node.outputs):
            refs[out] = f"n{n}.{j}"
    h.update(",".join(ref(o) for o in outs).encode())
    return h.hexdigest()[:32]


def record_folder() -> Path:
    """The record's folder: :data:`RECORD_FOLDER` in PyTensor's ``config.compiledir``."""
    return Path(pytensor.config.compiledir) / RECORD_FOLDER


def _record_path(fingerprint: str) -> Path:
    return record_folder() / fingerprint


def numpy_seconds(fingerprint: str) -> float:
    """Seconds earlier runs spent doing without the graph (in numpy) and recorded
    (:func:`add_numpy_seconds`); 0 when none did."""
    try:
        return float((record_folder() / f"{fingerprint}.numpy_seconds").read_text())
    except (OSError, ValueError):
        return 0.0


def add_numpy_seconds(fingerprint: str, seconds: float) -> None:
    """Add ``seconds`` spent without the graph to its record (what a graph not compiled yet has
    cost so far, over runs: :mod:`pymc_lbp.samplers.integer.numpy_jumps` compiles when that sum
    reaches a cold compile's cost)."""
    path = record_folder() / f"{fingerprint}.numpy_seconds"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(repr(numpy_seconds(fingerprint) + float(seconds)))
    except OSError as err:  # pragma: no cover - a read-only compile directory
        _log.debug("Could not record numpy seconds in %s: %s", path.parent, err)


def record_seconds(
    fingerprint: str, compiled: bool, seconds: float, recorded: float, force: bool = False
) -> float:
    """Add to the record of a graph not compiled there (``compiled`` False) the seconds spent
    without it not recorded yet (``seconds - recorded``), once they reach a quarter second or
    at once with ``force``; returns the seconds recorded now."""
    unsaved = seconds - recorded
    if not compiled and unsaved > 0 and (force or unsaved >= 0.25):
        add_numpy_seconds(fingerprint, unsaved)
        return seconds
    return recorded


def compiled_before(fingerprint: str) -> bool:
    """Whether a graph with this fingerprint was compiled into this compile directory."""
    return _record_path(fingerprint).exists()


def note_compiled(fingerprint: str) -> None:
    """Record that a graph with this fingerprint was compiled into this compile directory (a
    directory that cannot be written to is left as it is: the record only saves time)."""
    path = _record_path(fingerprint)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError as err:  # pragma: no cover - a read-only compile directory
        _log.debug("Could not record a compiled graph in %s: %s", path.parent, err)


COMPILE_AFTER_SECONDS_WARM = 0.5
"""Seconds of work without a graph its compile directory compiled before (a warm compile of
0.3-1.2 s on the gallery models) before a step compiles it: a switch point or a population size
compiles nothing in a short run, a block of 100 counts after some 50 draws."""

COMPILE_AFTER_SECONDS_COLD = 20.0
"""Seconds of work without a graph its compile directory never compiled, summed over runs (the
record's ``numpy_seconds``), before a step compiles it: about what that compile costs (a
ski-rental rule; with an empty compile directory 3-20 s on the gallery models on one 2-core
machine, up to 60 s on one three times slower). A long run, or a series of short ones, so pays
at most about twice what compiling at once would have cost, and a first run of a few hundred
draws compiles nothing of its own."""


def compiling_pays(seconds: float, seconds_before: float, compiled: bool) -> bool:
    """Whether a graph should be compiled now, after ``seconds`` of work without it in this run
    and ``seconds_before`` in earlier runs (``compiled``: the record has it)."""
    if compiled:
        return seconds >= COMPILE_AFTER_SECONDS_WARM
    return seconds_before + seconds >= COMPILE_AFTER_SECONDS_COLD
