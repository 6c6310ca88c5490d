"""Compiled PyTensor functions kept on disk, so that a later process skips rewriting their graphs.

Building a step compiles a handful of PyTensor functions. With PyTensor's compile directory
warm (every C module already built), what is left of each compilation is rewriting the graph:
most of a warm construction and a large share of the test suite's time (docs/compiled.md,
docs/test_suite.md), spent again in every process for the same graphs. PyTensor can pickle a
compiled function and load it without rewriting (that is how functions travel to
``pm.sample``'s worker processes). So :func:`pymc_lbp.compiling.pm_compile`, for a graph compiled
in no earlier call of this process, first looks here: a function pickled under the
fingerprint of its graph before rewriting (:func:`pymc_lbp.fingerprint.graph_fingerprint`:
ops with their properties and inner graphs, constants' bytes, input types, PyTensor's version
and settings, compiler flags, PyMC's version and the compile options) is loaded instead of
compiled, and a function compiled is stored.

Shared variables (a step's copies of the model's other values) count in the fingerprint by their
types and their order in the graph, not their values: the loaded function is a copy of the
stored one over the caller's own shared variables (``Function.copy(swap=...)``), so it reads
their current values as the compiled one would. The store lives in PyTensor's
``config.compiledir`` (``pymc_lbp_functions/``), beside the C modules the functions link to, and
goes with them.

Files are zlib-compressed (a pickled function holds its graph and rewriting's leftovers: 0.1-5 MB,
a fifteenth of that compressed), touched when loaded, and removed once unused for as long as
PyTensor keeps an unused C module (``config.cmodule__age_thresh_use``, 24 days): checked once
per process and folder, when a file is written.

Not stored, compiled as before: graphs the fingerprint cannot stand for (an op known only by its
name), compile options other than plain values, and
functions that cannot be pickled. A file that cannot be loaded is replaced. Only the time
changes, never the function.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import pymc
import pytensor
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.utils import Scratchpad
from pytensor.tensor.type_other import NoneConst

from pymc_lbp.fingerprint import Unfingerprintable, graph_fingerprint

__all__ = [
    "STORE_FOLDER",
    "fingerprint",
    "load",
    "read",
    "save",
    "store_folder",
    "write_atomically",
]

_log = logging.getLogger("pymc_lbp")

STORE_FOLDER = "pymc_lbp_functions"
"""The store's folder inside PyTensor's ``config.compiledir``."""

_PLAIN = (str, bool, int, float, type(None))

#: The pickles' format, part of every key: files of an earlier format are never loaded.
#: 2: ``NoneConst`` pickled as PyTensor's own object (:class:`_FunctionPickler`).
STORE_FORMAT = 2


def store_folder(name: str = STORE_FOLDER) -> Path:
    """The folder ``name`` (default :data:`STORE_FOLDER`) in PyTensor's ``config.compiledir``:
    where this store and the JAX graphs' (:mod:`pymc_lbp.whole_model.jaxify`) keep their files."""
    return Path(pytensor.config.compiledir) / name


def fingerprint(
    inputs: list, outputs: list, options: dict[str, Any]
) -> tuple[str, list[SharedVariable]] | None:
    """The function's key in the store and the graph's shared variables in the order the key
    counts them; None for a function the store does not hold (see the module docstring)."""
    if not all(isinstance(value, _PLAIN) for value in options.values()):
        return None  # a Mode object or another option the fingerprint cannot print
    text = {name: repr(value) for name, value in options.items()}
    text["store_format"] = str(STORE_FORMAT)
    text["input_names"] = repr([getattr(v, "name", None) for v in inputs])  # fn(name=value)
    text["blas"] = repr(pytensor.config.blas__ldflags)  # BLAS ops are rewritten in where it links
    shared: list[SharedVariable] = []
    try:
        key = graph_fingerprint(inputs, outputs, {**text, "pymc": pymc.__version__}, shared=shared)
    except Unfingerprintable as err:
        _log.debug("Not storing a compiled function: %s", err)
        return None
    return key, shared


def load(key: str, shared: list[SharedVariable]):
    """The function stored under ``key``, over the caller's ``shared`` variables; None when none
    is stored or the file cannot be loaded."""
    path = store_folder() / key
    data = read(path)
    if data is None:
        return None
    try:
        fn, places, unpack_single = pickle.loads(data)
        stored = [fn.maker.inputs[k].variable for k in places]
        if len(stored) != len(shared) or any(
            s.type != live.type for s, live in zip(stored, shared, strict=True)
        ):
            raise ValueError("stored for other shared variables")
        if shared:
            fn = fn.copy(swap=dict(zip(stored, shared, strict=True)))
        # PyTensor's pickle forgets that a function of one output (not a list) returns it alone
        fn.unpack_single = fn.maker.unpack_single = unpack_single
        return fn
    except Exception as err:  # a damaged or foreign file: compiled again and replaced
        _log.debug("Ignoring the stored function %s: %s", path, err)
        return None


def save(key: str, fn, shared: list[SharedVariable]) -> None:
    """Store ``fn`` under ``key``, with the places of ``shared`` among its inputs; a function
    that cannot be pickled or a folder that cannot be written is skipped."""
    try:
        by_variable = {id(i.variable): k for k, i in enumerate(fn.maker.inputs)}
        places = [by_variable[id(s)] for s in shared]
        data = _dumps((fn, places, fn.unpack_single))
    except Exception as err:  # unpicklable ops, a shared variable the function does not read
        _log.debug("Not storing a compiled function: %s", err)
        return
    write_atomically(store_folder() / key, data)


def _none_const():
    return NoneConst


def _scratchpad(cls: type, state: dict) -> Scratchpad:
    pad = cls.__new__(cls)
    pad.__dict__.update(state)
    return pad


class _FunctionPickler(pickle.Pickler):
    """PyTensor's pickling of a function, with two mendings.

    Less what its nodes cache for their Python ``perform``: a ``Blockwise`` op without C code
    keeps a closure in its node's tag (``tag.gufunc``), which no pickle can hold; loading a
    function links it again, and linking remakes the closure (``Blockwise.prepare_node``).
    Without this, every function with such a node (the integer jumps' and SelfBalancing's
    batched graphs) was rewritten anew in every process.

    ``NoneConst`` loaded as itself, not a copy: PyTensor tells a free dimension or slice bound by
    ``is NoneConst``. Linking a loaded function with a copy made PyTensor's numba
    ``SpecifyShape(x, None, 2)`` assert dimension 0 against ``None``, which numba cannot compile
    (the integer jumps under ``compile_kwargs={"mode": "NUMBA"}`` failed so, whenever numba's
    cache did not already hold the linked function)."""

    def reducer_override(self, obj):
        if obj is NoneConst:
            return _none_const, ()
        if isinstance(obj, Scratchpad) and "gufunc" in obj.__dict__:
            state = {k: v for k, v in obj.__dict__.items() if k != "gufunc"}
            return _scratchpad, (type(obj), state)
        return NotImplemented


def _dumps(obj) -> bytes:
    buffer = io.BytesIO()
    _FunctionPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def read(path: Path) -> bytes | None:
    """The bytes :func:`write_atomically` wrote to ``path`` (the file touched: in use), or None
    when there is no such file or it is damaged."""
    try:
        data = zlib.decompress(path.read_bytes())
        os.utime(path)
    except (OSError, zlib.error) as err:
        if not isinstance(err, FileNotFoundError):
            _log.debug("Ignoring the stored file %s: %s", path, err)
        return None
    return data


_PRUNED: set[Path] = set()


def _prune(folder: Path) -> None:
    """Remove the files of ``folder`` unused for ``config.cmodule__age_thresh_use`` seconds (once
    per process and folder)."""
    if folder in _PRUNED:
        return
    _PRUNED.add(folder)
    oldest = time.time() - float(pytensor.config.cmodule__age_thresh_use)
    for path in folder.glob("*"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < oldest:
                path.unlink()


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` zlib-compressed to ``path`` through a temporary file in its folder
    (processes share the folder: a reader sees a whole file or none); an error is logged and the
    file left out. The folder's files unused for long are removed (:func:`_prune`)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _prune(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(zlib.compress(data, 6))
        os.replace(tmp, path)
    except OSError as err:  # pragma: no cover - a read-only compile directory
        _log.debug("Could not write %s: %s", path, err)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
