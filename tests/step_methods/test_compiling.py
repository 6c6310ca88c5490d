"""pymc_lbp.compiling: PyMC's compile with the garbage collector paused, and restored."""

from __future__ import annotations

import gc

import numpy as np
import pytensor.tensor as pt
import pytest

from pymc_lbp.compiling import gc_paused, pm_compile


def test_compiles_the_same_function_and_restores_the_collector():
    x = pt.vector("x")
    assert gc.isenabled()
    fn = pm_compile([x], (x**2).sum())
    assert gc.isenabled()
    assert fn(np.array([1.0, 2.0])) == 5.0
    gc.disable()
    try:
        pm_compile([x], x + 1)
        assert not gc.isenabled()  # a paused collector stays paused
    finally:
        gc.enable()


def test_the_collector_is_restored_on_error():
    with pytest.raises(RuntimeError):
        with gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()
    x = pt.vector("x")
    with pytest.raises(TypeError):
        pm_compile([x], x, no_such_option=1)
    assert gc.isenabled()
