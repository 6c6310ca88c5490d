"""The suite's pytensor compile cache: one directory for every xdist worker, each C module
compiled outside the directory's lock (docs/test_suite.md).

pytensor's ``ModuleCache.module_from_key`` compiles a missing module while holding one lock on the
whole compile directory, so two workers sharing a directory take turns at the compiler; given a
directory each, they compile every module both need twice (630 of 2393 from empty caches) and
a later run is warm only once both directories hold everything. :func:`install` replaces that
method, for the test processes only, by one that holds the lock to look the module up and to
register it, but not while the compiler runs (``CLinker.compile_cmodule`` takes the lock around
the compiler too; :func:`_compile` is its body without it): each compile writes into its own
new folder (``dlimport_workdir``), as before. When both workers compiled the same module at
once, the one registered first is kept and the other folder removed.

Each module is also compiled faster: its first lines always include the same large headers
(Python's, NumPy's, pytensor's helper, ``<vector>``, ``<algorithm>``), which g++ parsed anew for
every module. :func:`precompiled_header` compiles them once per compile directory and compiler
flags into a GCC precompiled header, and each module is compiled with ``-include`` of it (its own
includes of the same headers are then no-ops: every one has an include guard) and without debug
information (``-g0`` after pytensor's ``-g``), linked by gold where binutils has it: measured
on 30 of the suite's modules, 0.17 s a module against 0.52 s (-g0 alone: 0.41 s; with the
header 0.23 s). A module whose source does not start with those includes is compiled as
pytensor compiles it; if the header cannot be built, no module uses it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

#: A file in a folder being compiled, so that another process's cache cleanup (which removes
#: empty folders) leaves it alone until the compiler writes its source there.
COMPILING_MARK = "compiling.mark"


def module_from_key(self, key, lnk):
    """``ModuleCache.module_from_key`` with the compiler run outside the directory lock."""
    from pytensor.compile.compilelock import lock_ctx
    from pytensor.link.c.cmodule import dlimport_workdir, get_module_hash

    module = self._get_from_key(key)
    if module is not None:
        return module
    module_hash = get_module_hash(lnk.get_src_code(), key)
    module = self._get_from_hash(module_hash, key)
    if module is not None:
        return module
    with lock_ctx():
        module = _registered(self, key, module_hash)  # another worker may have registered it
        if module is not None:
            return module
        location = dlimport_workdir(self.dirname)
        (Path(location) / COMPILING_MARK).touch()
    try:
        module = _compile(lnk, location)
    except BaseException:
        shutil.rmtree(location, ignore_errors=True)
        raise
    (Path(location) / COMPILING_MARK).unlink(missing_ok=True)
    with lock_ctx():
        registered = _registered(self, key, module_hash)
        if registered is not None:  # compiled by the other worker meanwhile: keep theirs
            shutil.rmtree(location, ignore_errors=True)
            return registered
        self.module_from_name[module.__file__] = module
        self.module_hash_to_key_data[module_hash] = self._add_to_cache(module, key, module_hash)
    self.stats[2] += 1
    return module


def _registered(cache, key, module_hash: str):
    """The module of ``key`` (or of its source's hash) as the directory holds it now, or None;
    called holding the lock."""
    cache.refresh(cleanup=False)
    return cache._get_from_key(key) or cache._get_from_hash(module_hash, key)


#: The includes every CLinker module starts with (pytensor/link/c/cmodule.py, DynamicModule
#: and CLinker's headers), in their order, and the C++ headers most of them add; the
#: precompiled header holds them all.
MODULE_PREFIX = '#include <Python.h>\n#include "pytensor_mod_helper.h"\n'
HEADER_LINES = (
    "#include <Python.h>",
    '#include "pytensor_mod_helper.h"',
    "#include <math.h>",
    "#include <numpy/arrayobject.h>",
    "#include <numpy/arrayscalars.h>",
    "#include <numpy/npy_math.h>",
    "#include <vector>",
    "#include <algorithm>",
)

#: The faster linker, where binutils has it (it links a module in about 40 ms less).
_LINKER = ["-fuse-ld=gold"] if shutil.which("ld.gold") else []

#: Precompiled headers found or built (None: g++ could not build one) in this process.
_HEADERS: dict[Path, Path | None] = {}


def _header_flags(preargs: list[str], include_dirs: list[str]) -> list[str]:
    """The flags of GCC_compiler.compile_str that decide whether a precompiled header fits a
    module: its preargs (less -O flags where pytensor drops them) and include directories."""
    from pytensor import config
    from pytensor.link.c.cmodule import std_include_dirs

    if config.cmodule__remove_gxx_opt:
        preargs = [p for p in preargs if not p.startswith("-O")]
    dirs = [d for d in include_dirs if d] + std_include_dirs()
    return [*preargs, *(f"-I{d}" for d in dirs), "-fvisibility=hidden"]


def precompiled_header(compiledir: str, flags: list[str]) -> Path | None:
    """The header of :data:`HEADER_LINES`, precompiled by g++ with ``flags`` and ``-g0``, in
    ``<compiledir>/pch-<hash of the compiler and flags>/``, or None if g++ cannot build it.

    Built once per directory: in a temporary folder beside the compile directory (pytensor's
    cache cleanup removes empty folders inside it), then renamed into place; when two
    processes build it at once, the first rename wins and the other uses that one.
    """
    from pytensor import config

    digest = hashlib.sha256("\0".join([config.cxx, *flags]).encode()).hexdigest()[:16]
    folder = Path(compiledir) / f"pch-{digest}"
    header = folder / "pytensor_module_headers.h"
    if folder not in _HEADERS:
        _HEADERS[folder] = header if _build_header(folder, header.name, flags) else None
    return _HEADERS[folder]


def _build_header(folder: Path, name: str, flags: list[str]) -> bool:
    """Whether ``folder`` holds the precompiled header ``name`` (building it if not)."""
    from pytensor import config

    if (folder / f"{name}.gch").exists():
        return True
    building = Path(tempfile.mkdtemp(dir=folder.parent.parent, prefix=f".{folder.name}-"))
    try:
        (building / name).write_text("\n".join(HEADER_LINES) + "\n")
        out = building / f"{name}.gch"
        cmd = [config.cxx, *flags, "-g0", "-x", "c++-header", "-o", str(out), str(building / name)]
        if subprocess.run(cmd, capture_output=True, check=False).returncode != 0:
            return False
        try:
            os.rename(building, folder)
        except OSError:  # built by another process meanwhile
            pass
        return (folder / f"{name}.gch").exists()
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _compile(lnk, location: str):
    """``CLinker.compile_cmodule(location)`` without the directory lock it takes around the
    compiler, with the precompiled header and no debug information where the module starts
    with its includes (any other linker: its own ``compile_cmodule``)."""
    if not hasattr(lnk, "get_dynamic_module"):
        return lnk.compile_cmodule(location)
    mod = lnk.get_dynamic_module()
    src, preargs, include_dirs = mod.code(), lnk.compile_args(), lnk.header_dirs()
    if src.startswith(MODULE_PREFIX):
        header = precompiled_header(
            str(Path(location).parent), _header_flags(preargs, include_dirs)
        )
        if header is not None:
            preargs = [*preargs, "-g0", "-include", str(header), *_LINKER]
    try:
        return lnk.c_compiler().compile_str(
            module_name=mod.code_hash,
            src_code=src,
            location=location,
            include_dirs=include_dirs,
            lib_dirs=lnk.lib_dirs(),
            libs=lnk.libraries(),
            preargs=preargs,
        )
    except Exception as err:
        err.args += (str(lnk.fgraph),)
        raise


def install() -> None:
    """Use :func:`module_from_key` in this process (the pytensor methods it calls must exist:
    a pytensor without them fails here, loudly, rather than compiling differently)."""
    from pytensor.link.c.cmodule import ModuleCache

    needed = ("_get_from_key", "_get_from_hash", "_add_to_cache", "refresh", "module_from_key")
    missing = [n for n in needed if not hasattr(ModuleCache, n)]
    if missing:
        raise RuntimeError(f"pytensor's ModuleCache lacks {missing}: update {__file__}")
    ModuleCache.module_from_key = module_from_key
