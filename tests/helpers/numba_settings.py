"""Numba's optimisation level for the test processes, and numba caches of the suite's own.

Numba optimises every function it compiles with LLVM at ``NUMBA_OPT`` (default 3). From empty
caches the suite's NUMBA twin tests (the samplers' graphs compiled with PyTensor's numba
backend, ``compile_kwargs={"mode": "NUMBA"}``) spend minutes in numba; at level 1 SelfBalancing's
twin took 85 s against 109 s at level 3 (the test alone, every cache empty), and our own ``njit``
kernels run as fast. Level 0 saves no more (the twin's graphs alone: 83 s against 79 s at level 1
and 106 s at level 3) and numba caches nothing at it, so warm runs would compile again.

Neither numba's cache nor PyTensor's numba cache keys on the level: code the suite compiled at
level 1 would serve a user's own runs from the same cache. So the suite keeps both apart:

* PyTensor's numba cache (``<base_compiledir>/numba``) moves to
  ``<base_compiledir>/numba-tests-O<level>``;
* numba's own (our ``njit(cache=True)`` kernels; ``__pycache__`` beside the sources by default)
  moves to ``<NUMBA_CACHE_DIR>/pymc_lbp-tests-O<level>`` when ``NUMBA_CACHE_DIR`` is given, and to
  ``.pytest_cache/numba-tests-O<level>`` in the checkout otherwise.

A level given in ``NUMBA_OPT`` is used as given, in caches named after it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

#: numba's optimisation level in the test processes unless ``NUMBA_OPT`` is given.
NUMBA_TEST_OPT = "1"

#: ``NUMBA_OPT`` and ``NUMBA_CACHE_DIR`` as the suite was started with ("" when unset): xdist's
#: workers inherit the controller's environment, with the values it set.
_GIVEN_OPT = "PYMC_LBP_TESTS_GIVEN_NUMBA_OPT"
_GIVEN_CACHE_DIR = "PYMC_LBP_TESTS_GIVEN_NUMBA_CACHE_DIR"

ROOT = Path(__file__).resolve().parents[2]


def suite_environment(environ: MutableMapping[str, str]) -> dict[str, str]:
    """The numba variables a test process runs with, from the ones the suite was started with
    (read from ``environ``, the controller's record of them kept there for xdist's workers)."""
    given_opt = environ.setdefault(_GIVEN_OPT, environ.get("NUMBA_OPT", ""))
    given_dir = environ.setdefault(_GIVEN_CACHE_DIR, environ.get("NUMBA_CACHE_DIR", ""))
    opt = given_opt or NUMBA_TEST_OPT
    if given_dir:
        cache_dir = str(Path(given_dir) / f"pymc_lbp-tests-O{opt}")
    else:
        cache_dir = str(ROOT / ".pytest_cache" / f"numba-tests-O{opt}")
    return {"NUMBA_OPT": opt, "NUMBA_CACHE_DIR": cache_dir}


def set_environment() -> None:
    """Set the test processes' numba variables; before numba is imported (it reads them then)."""
    if "numba" in sys.modules:  # pragma: no cover - a plugin imported numba before conftest.py
        raise RuntimeError("tests/conftest.py must set NUMBA_OPT before numba is imported")
    os.environ.update(suite_environment(os.environ))


def pytensor_cache_path() -> Path:
    """PyTensor's numba cache for the suite's level, under PyTensor's base compile directory."""
    from pytensor import config

    return Path(config.base_compiledir) / f"numba-tests-O{os.environ['NUMBA_OPT']}"


def use_suite_pytensor_cache() -> None:
    """Point PyTensor's numba backend at :func:`pytensor_cache_path` (it reads the module's
    ``NUMBA_CACHE_PATH`` whenever it looks a function up; a PyTensor without it fails here)."""
    from pytensor.link.numba import cache

    if not hasattr(cache, "NUMBA_CACHE_PATH"):
        raise RuntimeError(f"pytensor's numba cache has no NUMBA_CACHE_PATH: update {__file__}")
    path = pytensor_cache_path()
    path.mkdir(parents=True, exist_ok=True)
    cache.NUMBA_CACHE_PATH = path
