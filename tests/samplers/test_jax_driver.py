"""The one JAX driver (:func:`pymc_lbp.samplers.jax_driver.scan_kernel`): a kernel's state after
its steps and the sums of what the steps report, from stacked inputs or a function of the step."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from pymc_lbp.samplers.jax_driver import scan_kernel  # noqa: E402


def _kernel(u, state):
    """A walk on the integers: step ``u`` up; reports ``u`` (float), whether it moved (bool)
    and ``u`` rounded (int32), each of another dtype than the sums it goes into."""
    moved = u > 0.5
    info = (u, moved, jnp.round(u * 10).astype(jnp.int32))
    return (state[0] + moved.astype(jnp.int64), state[1] * 2), info


def test_scan_kernel_sums_the_info_in_its_dtypes_and_carries_the_state():
    jax.config.update("jax_enable_x64", True)
    us = np.array([0.1, 0.7, 0.9, 0.3, 0.6])
    start = (jnp.int64(0), jnp.float64(1.0))
    (count, doubled), (total, n_moved, tenths) = scan_kernel(_kernel, start, jnp.asarray(us))
    assert int(count) == 3 and float(doubled) == 32.0
    assert float(total) == pytest.approx(us.sum(), abs=1e-12) and total.dtype == jnp.float64
    assert int(n_moved) == 3 and n_moved.dtype == jnp.int64
    assert int(tenths) == int(np.round(us * 10).sum()) and tenths.dtype == jnp.int64

    # the same steps from a function of the step's index, their number traced
    run = jax.jit(lambda n: scan_kernel(_kernel, start, lambda i: jnp.asarray(us)[i], n))
    (count_f, doubled_f), (total_f, n_moved_f, tenths_f) = run(len(us))
    assert (int(count_f), float(doubled_f), int(n_moved_f)) == (3, 32.0, 3)
    assert float(total_f) == pytest.approx(float(total), abs=1e-12)
    assert int(tenths_f) == int(tenths)
    with pytest.raises(ValueError, match="need n_steps"):
        scan_kernel(_kernel, start, lambda i: jnp.asarray(us)[i])
