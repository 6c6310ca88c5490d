"""The compile settings tests/conftest.py gives the suite (docs/test_suite.md): one compile
directory of the suite's own for every xdist worker, its modules compiled outside the
directory's lock, -O1 unless the flags say otherwise; XLA's backend at -O0; numba at level 1
with caches of the suite's own."""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytensor
import pytest
from pytensor.link.c import cmodule
from pytensor.link.c.cmodule import ModuleCache

from tests.conftest import (
    BACKEND_TWINS_GROUP,
    GIVEN_PYTENSOR_FLAGS,
    PYTENSOR_COMPILEDIR_FORMAT,
    _test_compile_flags,
)
from tests.helpers import compile_cache, numba_settings
from tests.helpers.backends import BACKEND_MODES


def test_flags_for_a_plain_run_and_a_given_directory():
    given = "blas__ldflags=-lopenblas"
    assert _test_compile_flags(given) == (
        f"{given},gcc__cxxflags=-O1,traceback__limit=0,"
        f"compiledir_format={PYTENSOR_COMPILEDIR_FORMAT}-tests"
    )
    # an explicit compile directory (the cold-cache timing's) is used as given, and explicit
    # compiler flags and trace limits are kept
    flags = _test_compile_flags("compiledir=/tmp/empty/,gcc__cxxflags=-O2,traceback__limit=8")
    assert flags == "compiledir=/tmp/empty/,gcc__cxxflags=-O2,traceback__limit=8"
    assert _test_compile_flags("compiledir_format=x").endswith("compiledir_format=x-tests")


def test_this_process_runs_with_them():
    flags = _test_compile_flags(GIVEN_PYTENSOR_FLAGS)
    if "compiledir=" not in GIVEN_PYTENSOR_FLAGS:  # once, in xdist's workers too
        assert str(pytensor.config.compiledir).endswith("-tests")
        assert not str(pytensor.config.compiledir).endswith("-tests-tests")
    cxxflags = [f.partition("=")[2] for f in flags.split(",") if f.startswith("gcc__cxxflags=")]
    # pytensor appends its own defaults (-Wno-..., -fno-exceptions) to what it is given
    assert (
        pytensor.config.gcc__cxxflags.split()[: len(cxxflags[-1].split())] == cxxflags[-1].split()
    )
    assert ModuleCache.module_from_key is compile_cache.module_from_key
    if "traceback__limit" not in GIVEN_PYTENSOR_FLAGS:
        assert pytensor.config.traceback__limit == 0
    # XLA's backend at -O0 (read by JAX when its CPU backend starts: in this process, later)
    assert "--xla_backend_optimization_level=" in os.environ["XLA_FLAGS"]


def test_numba_settings_for_a_plain_run_and_given_ones(tmp_path):
    plain: dict[str, str] = {}
    assert numba_settings.suite_environment(plain) == {
        "NUMBA_OPT": "1",
        "NUMBA_CACHE_DIR": str(numba_settings.ROOT / ".pytest_cache" / "numba-tests-O1"),
    }
    # a given level is kept, and numba's cache is a folder of the suite's inside a given one
    given = {"NUMBA_OPT": "3", "NUMBA_CACHE_DIR": str(tmp_path)}
    assert numba_settings.suite_environment(given) == {
        "NUMBA_OPT": "3",
        "NUMBA_CACHE_DIR": str(tmp_path / "pymc_lbp-tests-O3"),
    }
    # an xdist worker inherits what the controller set, and the record of what it was given
    worker = {**given, **numba_settings.suite_environment(given)}
    assert numba_settings.suite_environment(worker) == numba_settings.suite_environment(given)


def test_this_process_runs_numba_with_them():
    """Numba at the suite's level; neither numba's cache nor PyTensor's numba cache is the one
    a user's own runs read (neither keys on the level)."""
    import numba
    from pytensor.link.numba import cache

    expected = numba_settings.suite_environment(dict(os.environ))
    assert numba.config.OPT == int(expected["NUMBA_OPT"])
    assert numba.config.CACHE_DIR == expected["NUMBA_CACHE_DIR"]
    assert cache.NUMBA_CACHE_PATH == numba_settings.pytensor_cache_path()
    assert cache.NUMBA_CACHE_PATH != Path(pytensor.config.base_compiledir) / "numba"


def test_xdist_groups_are_the_files_and_the_backend_twins(request):
    """Every test is in one xdist group (``make test`` runs ``--dist loadgroup``): its file's,
    or, for a test compiled with another PyTensor backend, the backend twins' group."""
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "pytest -q -n auto --dist loadgroup\n" in makefile
    twins = 0
    for item in request.session.items:
        groups = [m.args[0] for m in item.iter_markers("xdist_group")]
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") in BACKEND_MODES:
            assert groups == [BACKEND_TWINS_GROUP], item.nodeid
            twins += 1
        else:
            assert groups == [item.nodeid.split("::")[0].split("@")[0]], item.nodeid
    if len(request.session.items) > 1000:  # the whole suite: every backend twin is there
        assert twins >= 12


#: A fresh process: the suite's cache patch, then one small graph compiled and evaluated.
#: It also prints, for each graph module it compiled, whether it held the compile lock then and
#: whether the module was compiled with the precompiled header.
CHILD = """
from tests.helpers import compile_cache
compile_cache.install()
import numpy as np, pytensor, pytensor.tensor as pt
from pytensor.compile import compilelock
from pytensor.link.c.cmodule import GCC_compiler
compile_str, held = GCC_compiler.compile_str, []
def probe(*args, **kwargs):
    if kwargs.get("module_name", args[0] if args else None) not in ("lazylinker_ext", "cutils_ext"):
        held.append((bool(compilelock.local_mem._locks), "-include" in kwargs["preargs"]))
    return compile_str(*args, **kwargs)
GCC_compiler.compile_str = staticmethod(probe)
x = pt.dvector("x")
f = pytensor.function([x], pt.exp(x) * 3.25 + pt.log1p(x) ** 2, mode="FAST_RUN")
print(repr(f(np.array([0.5, 1.5])).tolist()))
print(repr(held))
"""


def _start(compiledir) -> subprocess.Popen:
    env = dict(os.environ, PYTENSOR_FLAGS=f"compiledir={compiledir},gcc__cxxflags=-O0")
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, "-c", CHILD], env=env, cwd=root, stdout=subprocess.PIPE, text=True
    )


def _result(proc: subprocess.Popen) -> tuple[np.ndarray, list[bool]]:
    """The child's function value, and for each module it compiled whether it held the lock
    and whether it used the precompiled header."""
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0
    value, held = out.strip().splitlines()[-2:]
    return np.array(ast.literal_eval(value)), ast.literal_eval(held)


def _module_folders(compiledir) -> list[str]:
    return sorted(p.parent.name for p in compiledir.glob("*/key.pkl"))


def test_two_processes_compile_into_one_directory(tmp_path):
    """Two fresh processes compile the same graph into one directory at the same time: both
    get a working function, neither holds the directory lock while its compiler runs, each
    module is registered once, no half-built folder stays, every module is compiled with the
    one precompiled header; a third process compiles nothing."""
    results = [_result(p) for p in [_start(tmp_path), _start(tmp_path)]]
    x = np.array([0.5, 1.5])
    for value, held in results:
        np.testing.assert_allclose(value, np.exp(x) * 3.25 + np.log1p(x) ** 2)
        assert not any(lock for lock, _ in held), "a module compiled holding the directory lock"
        assert all(header for _, header in held), "a module compiled without the header"
    assert sum(len(held) for _, held in results) > 0, "nothing compiled"
    folders = _module_folders(tmp_path)
    assert folders, "nothing compiled"
    hashes = [pickle.loads((tmp_path / f / "key.pkl").read_bytes()).module_hash for f in folders]
    assert len(hashes) == len(set(hashes)), "a module registered twice"
    leftover = [p.name for p in tmp_path.glob("tmp*") if not (p / "key.pkl").exists()]
    assert not leftover, leftover
    assert not list(tmp_path.glob(f"*/{compile_cache.COMPILING_MARK}"))
    assert len(list(tmp_path.glob("pch-*/*.h.gch"))) == 1
    assert not list(tmp_path.parent.glob(".pch-*")), "a header's build folder left"
    value, held = _result(_start(tmp_path))
    np.testing.assert_allclose(value, results[0][0])
    assert held == [] and _module_folders(tmp_path) == folders


def test_a_failing_compile_leaves_no_folder(tmp_path, monkeypatch):
    cache = ModuleCache(str(tmp_path), check_for_broken_eq=False, do_refresh=False)

    class Broken:
        def get_src_code(self):
            return "not c++"

        def compile_cmodule(self, location):
            assert os.path.exists(os.path.join(location, compile_cache.COMPILING_MARK))
            raise RuntimeError("compiler failed")

    monkeypatch.setattr(cmodule, "get_module_hash", lambda src, key: "a hash")
    key = ((1,), ("a test key",))
    with pytest.raises(RuntimeError, match="compiler failed"):
        compile_cache.module_from_key(cache, key, Broken())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tmp")]


def test_a_header_g_plus_plus_cannot_build_is_not_used(tmp_path):
    """Flags g++ refuses: no header (modules compile as pytensor compiles them), nothing left."""
    assert compile_cache.precompiled_header(str(tmp_path), ["-fno-such-option-at-all"]) is None
    assert not list(tmp_path.iterdir()) and not list(tmp_path.parent.glob(".pch-*"))
