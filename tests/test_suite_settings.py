"""The compile settings tests/conftest.py gives the suite (docs/architecture.md, "The suite's
time"): each xdist worker its own pytensor compile directory, -O0 unless the flags say otherwise."""

from __future__ import annotations

import os

import pytensor

from tests.conftest import GIVEN_PYTENSOR_FLAGS, PYTENSOR_COMPILEDIR_FORMAT, _test_compile_flags


def test_flags_for_a_worker_and_for_a_plain_run():
    given = "blas__ldflags=-lopenblas"
    assert _test_compile_flags(given, None) == f"{given},gcc__cxxflags=-O0"
    assert _test_compile_flags(given, "gw1") == (
        f"{given},gcc__cxxflags=-O0,compiledir_format={PYTENSOR_COMPILEDIR_FORMAT}-gw1"
    )
    # an explicit compile directory (the cold-cache timing's) gets a folder per worker, and
    # explicit compiler flags are kept
    flags = _test_compile_flags("compiledir=/tmp/empty/,gcc__cxxflags=-O2", "gw0")
    assert flags == "compiledir=/tmp/empty/,gcc__cxxflags=-O2,compiledir=/tmp/empty/gw0"
    assert _test_compile_flags("", None) == "gcc__cxxflags=-O0"
    assert _test_compile_flags("compiledir_format=x", "gw3").endswith("compiledir_format=x-gw3")


def test_this_process_runs_with_them():
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    compiledir = str(pytensor.config.compiledir)
    if worker:
        assert compiledir.endswith(f"/{worker}") or compiledir.endswith(f"-{worker}"), compiledir
    flags = _test_compile_flags(GIVEN_PYTENSOR_FLAGS, worker)
    cxxflags = [f.partition("=")[2] for f in flags.split(",") if f.startswith("gcc__cxxflags=")]
    # pytensor appends its own defaults (-Wno-..., -fno-exceptions) to what it is given
    assert (
        pytensor.config.gcc__cxxflags.split()[: len(cxxflags[-1].split())] == cxxflags[-1].split()
    )
