"""The suite's pytensor compile cache: one directory for every xdist worker, each C module
compiled outside the directory's lock (docs/architecture.md, "The suite's time").

pytensor's ``ModuleCache.module_from_key`` compiles a missing module while holding one lock on the
whole compile directory, so two workers sharing a directory take turns at the compiler; given a
directory each, they compile every module both need twice (630 of 2393 from empty caches) and
a later run is warm only once both directories hold everything. :func:`install` replaces that
method, for the test processes only, by one that holds the lock to look the module up and to
register it, but not while the compiler runs (``CLinker.compile_cmodule`` takes the lock around
the compiler too; :func:`_compile` is its body without it): each compile writes into its own
new folder (``dlimport_workdir``), as before. When both workers compiled the same module at
once, the one registered first is kept and the other folder removed.
"""

from __future__ import annotations

import shutil
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


def _compile(lnk, location: str):
    """``CLinker.compile_cmodule(location)`` without the directory lock it takes around the
    compiler (any other linker: its own ``compile_cmodule``)."""
    if not hasattr(lnk, "get_dynamic_module"):
        return lnk.compile_cmodule(location)
    mod = lnk.get_dynamic_module()
    try:
        return lnk.c_compiler().compile_str(
            module_name=mod.code_hash,
            src_code=mod.code(),
            location=location,
            include_dirs=lnk.header_dirs(),
            lib_dirs=lnk.lib_dirs(),
            libs=lnk.libraries(),
            preargs=lnk.compile_args(),
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
