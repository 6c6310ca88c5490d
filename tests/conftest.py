"""Shared fixtures: the shipped UAI networks and tiny hand-written networks with brute force."""

from __future__ import annotations

import gc
import itertools
import math
import os
import shlex
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")

#: pytensor's own default ``compiledir_format`` (pytensor/configdefaults.py).
PYTENSOR_COMPILEDIR_FORMAT = (
    "compiledir_%(short_platform)s-%(processor)s-%(python_version)s-%(python_bitwidth)s"
)


def _test_compile_flags(flags: str) -> str:
    """The ``PYTENSOR_FLAGS`` the suite runs with: the given ones, then

    * ``gcc__cxxflags=-O1`` unless given: the suite's graphs are small, and with the
      precompiled header below a module compiles nearly as fast as at -O0, while what it runs
      (NUTS's logp and gradient, the steps' differences) runs about twice as fast: the GMM
      example's test 8.7 s warm at -O1, 9.8 s at pytensor's -O3 and 20.0 s at -O0; the whole
      suite's tests warm 5m17s against 5m52s at -O0, cold (every cache empty) 14m15s against
      14m20s (the machine's first run); what compiles most, tests/logp/test_relax.py (201
      modules, one process, cold), 42.9 s against 36.8 s;
    * ``traceback__limit=0`` unless given: PyTensor records the creation stack (8 frames, each
      line read through ``linecache``) of every variable and node it makes, rewrites included;
      two heavy files ran 55.7 s against 60.6 s without it. Set it in ``PYTENSOR_FLAGS`` to
      see where a failing graph's nodes were made. (The kernels clear these traces before
      compiling, ``pymc_lbp.samplers.traces``; with PyTensor's default the two-site integer
      jumps compile with traces of at most 2 entries either way.)
    * a compile directory of the suite's own (``<compiledir_format>-tests`` under pytensor's
      default base) unless one is given: the cache key holds the flags, so these modules would
      never serve your own -O3 runs; they stay apart from them.

    Every xdist worker shares the directory; :mod:`tests.helpers.compile_cache` lets them compile
    at the same time (docs/test_suite.md).
    """
    given: dict[str, str] = {}
    for pair in shlex.split(flags.replace(",", " ")):
        key, _, value = pair.partition("=")
        given[key] = value
    extra = []
    if "gcc__cxxflags" not in given:
        extra.append("gcc__cxxflags=-O1")
    if "traceback__limit" not in given:
        extra.append("traceback__limit=0")
    if not given.get("compiledir"):
        fmt = given.get("compiledir_format") or PYTENSOR_COMPILEDIR_FORMAT
        extra.append(f"compiledir_format={fmt}-tests")
    return ",".join([flags, *extra] if flags else extra)


if "pytensor" in sys.modules:  # pragma: no cover - a plugin imported it before this file
    raise RuntimeError("tests/conftest.py must set PYTENSOR_FLAGS before pytensor is imported")
#: ``PYTENSOR_FLAGS`` as the suite was started with (xdist workers inherit the controller's
#: environment: they read the flags it was given, not the ones it set).
GIVEN_PYTENSOR_FLAGS = os.environ.setdefault(
    "PYMC_LBP_TESTS_GIVEN_PYTENSOR_FLAGS", os.environ.get("PYTENSOR_FLAGS", "")
)
os.environ["PYTENSOR_FLAGS"] = _test_compile_flags(GIVEN_PYTENSOR_FLAGS)

#: XLA's backend optimisation level for the suite's JAX programs, unless ``XLA_FLAGS`` sets it:
#: LLVM's -O0. The suite's programs are small and run briefly; their compilation is most of
#: their cost from an empty cache. tests/whole_model/test_exact_posteriors.py with
#: JAX's cache empty (PyTensor's warm), one process: 63 s against 88 s at XLA's default; with
#: JAX's cache warm 30 s against 40 s. The cache key holds the flags: these programs never serve
#: a run of yours at the default level.
XLA_TEST_FLAG = "--xla_backend_optimization_level=0"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), XLA_TEST_FLAG]))

from tests.helpers import numba_settings  # noqa: E402 - imports neither numba nor pytensor

numba_settings.set_environment()

from tests.helpers import compile_cache  # noqa: E402 - imports pytensor: after the flags
from tests.helpers.backends import BACKEND_MODES  # noqa: E402

compile_cache.install()
numba_settings.use_suite_pytensor_cache()

from pymc_lbp.models.uai import NETWORKS  # noqa: E402

UAI_DIR = NETWORKS


def _jax_compilation_cache() -> None:
    """Every XLA program the suite compiles kept on disk: JAX's persistent compilation cache
    where ``pymc_lbp.sample`` keeps it (``$PYMC_LBP_JAX_CACHE``, default
    ``~/.cache/pymc_lbp/jax``), from the start of the session (the JAX-backend twin tests compile
    with PyTensor's JAX linker, which does not turn it on) and for programs of any compile time
    (JAX's default keeps only those that took a second or more: 61 s of the warm suite went to
    compiling small programs again)."""
    try:
        import jax
    except ImportError:  # a bare install: the JAX tests skip
        return
    from pymc_lbp.whole_model.sampling import use_compilation_cache

    if use_compilation_cache():
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


_jax_compilation_cache()


#: Thresholds of Python's cyclic collector during the tests (Python's default: 700, 10, 10).
SUITE_GC_THRESHOLDS = (10_000, 50, 100)


def pytest_collection_finish(session):
    """The collector tuned for a test process. With PyMC, PyTensor, JAX and ArviZ imported a
    process holds millions of objects, and every full collection walked them all: 16% of four
    test files' time went to the collector (20.7 of 130 s, 0.67 s per full collection). After
    collection (every test module and what it imports is loaded) the objects alive are moved
    out of the collector's sight (``gc.freeze``), and so are those alive at each test module's
    end (:func:`pytest_runtest_teardown`); collections run less often (``SUITE_GC_THRESHOLDS``).
    Garbage is still collected, once a module at the latest: the same four files spent 12.1 s
    in the collector, 117 s in all, peak memory 1.75 GB either way."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SUITE_GC_THRESHOLDS)


#: The xdist group of the tests that compile a sampler's graphs with another PyTensor backend
#: (:data:`tests.helpers.backends.OTHER_BACKENDS`): one worker runs them all, so each numba and
#: JAX op they share is compiled once.
BACKEND_TWINS_GROUP = "backend-twins"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The xdist groups of ``--dist loadgroup`` (the Makefile's): a test file's tests in one
    worker, as ``--dist loadfile`` would (its module fixtures built once), except the backend
    twins, which share :data:`BACKEND_TWINS_GROUP`."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        callspec = getattr(item, "callspec", None)
        twin = callspec is not None and callspec.params.get("backend") in BACKEND_MODES
        group = BACKEND_TWINS_GROUP if twin else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """At a test module's end (its fixtures torn down): collect its garbage, freeze what lives on
    (the compile caches, session fixtures)."""
    if nextitem is None or nextitem.module is not item.module:
        gc.collect()
        gc.freeze()


def pytest_unconfigure(config):
    """Skip the interpreter's last cyclic garbage collection over what a session compiled
    (pytensor graphs, JAX traces): nothing needs it at exit, and it took minutes of each
    process's (each xdist worker's) exit after the tests had finished."""
    gc.freeze()


@pytest.fixture(scope="session")
def uai_dir() -> Path:
    """The real UAI networks shipped with the package (``NETWORKS``, see its README).

    A missing folder is a failure, never a skip: every clone has the data.
    """
    if not UAI_DIR.is_dir():
        raise FileNotFoundError(
            f"UAI test data missing at {UAI_DIR}: it is part of the repository (git checkout data/)"
        )
    return UAI_DIR


@pytest.fixture
def general_paths(monkeypatch):
    """Switch the numba kernels off (as ``PYMC_LBP_NUMBA=0`` does): pairwise binary blocks then
    take the general differences and kernels, for tests of those on lattice models."""
    from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel

    monkeypatch.setattr(pairwise_kernel, "ENABLED", False)


@dataclass
class TinyNet:
    """A network written out by hand: ``tables[f]`` is the flat list as written in the file."""

    kind: str
    cards: list[int]
    scopes: list[tuple[int, ...]]
    tables: list[list[float]]

    def text(self) -> str:
        lines = [self.kind, str(len(self.cards)), " ".join(map(str, self.cards))]
        lines.append(str(len(self.scopes)))
        # tabs and odd spacing on purpose: only the token stream matters
        lines += ["\t".join(map(str, (len(s), *s))) for s in self.scopes]
        for table in self.tables:
            lines.append("")
            lines.append(str(len(table)))
            # two numbers per line, like the UAI'06 files
            lines += [" ".join(map(repr, table[i : i + 2])) for i in range(0, len(table), 2)]
        return "\n".join(lines) + "\n"

    def write(self, directory: Path, name: str) -> Path:
        path = directory / name
        path.write_text(self.text())
        return path

    def entry(self, f: int, state: tuple[int, ...]) -> float:
        """Table entry of factor f at a full state, via explicit row-major strides."""
        index = 0
        for v in self.scopes[f]:
            index = index * self.cards[v] + state[v]
        return self.tables[f][index]

    def weight(self, state: tuple[int, ...]) -> float:
        return math.prod(self.entry(f, state) for f in range(len(self.scopes)))

    def states(self, evidence: dict[int, int] | None = None):
        evidence = evidence or {}
        for state in itertools.product(*(range(k) for k in self.cards)):
            if all(state[v] == x for v, x in evidence.items()):
                yield state

    def brute_force(self, evidence: dict[int, int] | None = None):
        """(log Z, marginals) by enumeration."""
        z = 0.0
        marg = [np.zeros(k) for k in self.cards]
        for state in self.states(evidence):
            w = self.weight(state)
            z += w
            for v, x in enumerate(state):
                marg[v][x] += w
        return math.log(z), [m / z for m in marg]


# Five variables with cardinalities 2, 3, 2, 2, 3; an unsorted 3-variable scope, zeros, an
# empty-scope (constant) factor and a variable (0) that appears only in one factor's middle.
TINY_MARKOV = TinyNet(
    kind="MARKOV",
    cards=[2, 3, 2, 2, 3],
    scopes=[(3,), (2, 0, 1), (4, 3), (1, 4), (), (0, 3)],
    tables=[
        [0.5, 2.0],
        [1.0, 0.5, 2.0, 0.0, 1.5, 3.0, 0.2, 1.1, 0.0, 2.5, 0.7, 1.3],
        [1.0, 0.0, 2.0, 0.5, 0.0, 4.0],
        [1.0, 2.0, 0.0, 0.3, 1.0, 1.0, 2.0, 0.0, 0.6],
        [2.5],
        [1.2, 0.8, 0.4, 3.0],
    ],
)

# Five variables; CPTs listed out of topological order; unsorted parent scopes, deterministic
# rows and zeros. Layers: 0 -> 0, 3 -> 0, 1 -> 1, 2 -> 2, 4 -> 2 (2 and 4 have parents from
# different model variables, so their group is built from two stacked CPTs).
TINY_BAYES = TinyNet(
    kind="BAYES",
    cards=[2, 3, 2, 3, 2],
    scopes=[(3, 1, 4), (1, 0, 2), (0,), (0, 1), (3,)],
    tables=[
        # P(x4 | x3, x1): 3 x 3 rows of 2
        [0.9, 0.1, 0.5, 0.5, 0.0, 1.0, 0.3, 0.7, 1.0, 0.0, 0.2, 0.8, 0.6, 0.4, 0.1, 0.9, 0.5, 0.5],
        # P(x2 | x1, x0): 3 x 2 rows of 2
        [1.0, 0.0, 0.25, 0.75, 0.4, 0.6, 0.0, 1.0, 0.5, 0.5, 0.8, 0.2],
        # P(x0)
        [0.3, 0.7],
        # P(x1 | x0)
        [0.2, 0.5, 0.3, 0.6, 0.0, 0.4],
        # P(x3)
        [0.25, 0.25, 0.5],
    ],
)


@pytest.fixture
def tiny_markov() -> TinyNet:
    return TINY_MARKOV


@pytest.fixture
def tiny_bayes() -> TinyNet:
    return TINY_BAYES
