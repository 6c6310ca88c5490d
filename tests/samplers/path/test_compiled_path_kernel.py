"""The compiled path kernel (pymc_lbp.samplers.path.graph) against its references.

1. Move for move: given the same noise row, the compiled step makes the move that the numpy path
   functions of :mod:`pymc_lbp.samplers.path.reference` (the sampler's Python reference) make, with
   the same acceptance probability, on binary, categorical and integer blocks, with first-order and
   exact differences.
2. In distribution: repeated single compiled steps from fixed states reproduce the rows of the
   independently enumerated mixture kernel of ``tests/samplers/path/test_path_auxiliary_kernel.py``
   (chi-square, independent repeats, so the test is exact at its level).
3. While tuning, the kernel's moves and path-length adaptation are those of the numpy step
   followed by the Python adaptation update, from the same noise.
4. In ``pm.sample``: every draw, tuning included, is one compiled call, and the scale adapts.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest

from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.samplers.common import mh_log_ratio
from pymc_lbp.samplers.path.graph import AdaptState
from pymc_lbp.samplers.path.reference import log_prob_path, path_weights
from pymc_lbp.step_methods.path_auxiliary import KERNEL_AFTER_STEPS
from tests.helpers.backends import OTHER_BACKENDS, modes
from tests.samplers.path.test_path_auxiliary_kernel import (
    ALPHA,
    STATES_BIN,
    STATES_CAT,
    binary_model,
    binary_nonlinear_model,
    categorical_model,
    chi_square_pvalue,
    exact_deltas,
    integer_model,
    logp_bin,
    logp_cat,
    mixture_kernel,
    moves_bin,
    moves_cat,
)


def reference_step(step, x, logp, deltas, noise, scale):
    """One path step from the numpy path functions, driven by one noise row."""
    lay = step.layout
    n = lay.n_sites
    if noise[0] < step.single_site_share:
        length = 1
    else:
        lo = math.floor(scale)
        length = int(min(max(lo + (noise[1] < scale - lo), 1), n))
    w = path_weights(deltas, step.log_g, lay)
    if w.n_movable < length:
        return x, logp, deltas, 0.0
    with np.errstate(divide="ignore"):
        keys = noise[3 : 3 + n] / w.lin
    sites = np.argsort(keys, kind="stable")[:length]
    if w.within is None:
        slots = lay.site_offset[sites]
    else:
        stops = np.append(lay.site_offset, lay.n_slots)
        gumbel = w.within - np.log(noise[3 + n : 3 + n + lay.n_slots])
        slots = np.array(
            [
                lay.site_offset[i] + int(np.argmax(gumbel[lay.site_offset[i] : stops[i + 1]]))
                for i in sites
            ]
        )
    new, back = lay.moves_of(slots, x[sites])
    y = x.copy()
    y[sites] = new
    logp_y, deltas_y = step.differences(y)
    fwd = log_prob_path(w, sites, slots)
    wy = path_weights(deltas_y, step.log_g, lay)
    rev = log_prob_path(wy, sites[::-1], back[::-1])
    ratio = mh_log_ratio(logp, logp_y, fwd, rev)
    prob = math.exp(min(ratio, 0.0)) if math.isfinite(ratio) else 0.0
    if noise[2] < prob:
        return y, logp_y, deltas_y, prob
    return x, logp, deltas, prob


# twin steps (compiled against the numpy reference from the same noise): enough to compare
# accepted and rejected moves, which the test asserts
STEPS = 60


@pytest.fixture(scope="module")
def path_steps():
    """Steps built once per module, by (model builder, differences)."""
    return {}


@pytest.mark.parametrize(
    ("build", "differences"),
    [
        (binary_model, "gradient"),
        (binary_nonlinear_model, "gradient"),
        (categorical_model, "exact"),
        (categorical_model, "gradient"),
        (integer_model, "exact"),
    ],
    ids=["binary", "binary-first-order-approx", "categorical-exact", "categorical", "integer"],
)
@pytest.mark.parametrize("scale", [1.0, 2.4])
def test_compiled_path_step_makes_the_reference_move(build, differences, scale, path_steps):
    # the scale is an input of the compiled kernel: one step (one compile) serves both scales
    key = (build, differences)
    if key not in path_steps:
        model = build()
        with model:
            step = PathAuxiliaryLBP(
                [model["x" if "x" in model.named_vars else "k"]], differences=differences
            )
        path_steps[key] = model, step
    model, step = path_steps[key]
    kernel = step.path_kernel
    rng = np.random.default_rng(7)
    x = step._state_vector(model.initial_point())
    logp, deltas = step.differences(x)
    moved = 0
    for _ in range(STEPS):
        noise = kernel.draw_noise(rng, 1)
        ref = reference_step(step, x, logp, deltas, noise[0], scale)
        out = kernel(x, logp, deltas, noise, scale)
        np.testing.assert_array_equal(out.x, ref[0])
        np.testing.assert_allclose(out.sum_accept, ref[3], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.logp, ref[1], rtol=1e-12)
        np.testing.assert_allclose(out.deltas, ref[2], rtol=1e-10, atol=1e-12)
        moved += int(np.any(out.x != x))
        x, logp, deltas = out.x, out.logp, out.deltas
    # the comparison covers accepted moves and rejections
    assert STEPS / 10 < moved < STEPS, moved


@pytest.mark.parametrize(
    ("build", "states", "logp", "moves"),
    [
        (binary_model, STATES_BIN, logp_bin, moves_bin),
        (categorical_model, STATES_CAT, logp_cat, moves_cat),
    ],
    ids=["binary", "categorical"],
)
def test_compiled_steps_reproduce_the_enumerated_mixture_kernel(build, states, logp, moves):
    """Rows of the exact kernel (scale 2.4, share 0.1) from 3 starts, 3000 one-step repeats
    each; chi-square at level ALPHA per row."""
    model = build()
    with model:
        step = PathAuxiliaryLBP([model["x"]], differences="exact")
    kernel = step.path_kernel
    T = mixture_kernel(states, logp, moves, exact_deltas(logp, moves), 2.4, step.single_site_share)
    index = {s: k for k, s in enumerate(states)}
    rng = np.random.default_rng(11)
    for start in (states[0], states[len(states) // 2], states[-1]):
        x = np.array(start, dtype=np.int64)
        lp, d = step.differences(x)
        counts = np.zeros(len(states))
        for _ in range(3000):
            out = kernel(x, lp, d, kernel.draw_noise(rng, 1), 2.4)
            counts[index[tuple(int(v) for v in out.x)]] += 1
        assert chi_square_pvalue(counts, T[index[start]]) > ALPHA, start


@pytest.mark.parametrize("build", [binary_model, categorical_model], ids=["binary", "categorical"])
def test_compiled_tuning_steps_make_the_reference_moves_and_updates(build):
    """While tuning, the compiled kernel carries the path-length adaptation: from the same noise
    its moves and its adaptation state (doubling phase, then Robbins-Monro on ``log U``) are
    those of the numpy reference step followed by ``PathLengthAdaptation.update`` on every path
    step (never on the single-site steps)."""
    model = build()
    with model:
        step = PathAuxiliaryLBP([model["x"]], differences="exact")
    kernel, adaptation, share = step.path_kernel, step.adaptation, step.single_site_share
    rng = np.random.default_rng(3)
    x0 = step._state_vector(model.initial_point())
    logp0, deltas0 = step.differences(x0)
    start = AdaptState(0.0, 0.0, 0, True)
    for _ in range(4):  # draws: the state goes from one call to the next
        noise = kernel.draw_noise(rng, 40)
        x, logp, deltas, state = x0, logp0, deltas0, start
        for row in noise:
            x, logp, deltas, prob = reference_step(step, x, logp, deltas, row, math.exp(state[0]))
            if row[0] >= share:
                state = adaptation.update(state[0], state[1], state[2], prob, state[3])
        out = kernel(x0, logp0, deltas0, noise, 1.0, start)
        np.testing.assert_array_equal(out.x, x)
        np.testing.assert_allclose(out.logp, logp, rtol=1e-12)
        np.testing.assert_allclose(out.adapt_state[:2], state[:2], rtol=1e-12, atol=1e-14)
        assert out.adapt_state[2:] == tuple(state[2:])
        x0, logp0, deltas0, start = out.x, out.logp, out.deltas, out.adapt_state
    assert start.count > 0 and not start.doubling and start.log_u > 0  # both phases were run


def test_sampling_runs_the_compiled_kernel_tuning_included():
    """compiled=True: every draw, tuning included, is one compiled call and the scale
    adapts inside it. The default "auto" runs the Python loop for the step's first
    KERNEL_AFTER_STEPS steps, then the kernel, on categorical blocks (binary ones keep the loop);
    bad values are refused."""
    with categorical_model():
        step = PathAuxiliaryLBP()
        assert step.compiled == "auto" and not step.uses_compiled_kernel
        step.loop_steps = KERNEL_AFTER_STEPS
        assert step.uses_compiled_kernel
    with binary_model():
        step = PathAuxiliaryLBP()
        step.loop_steps = KERNEL_AFTER_STEPS
        assert not step.uses_compiled_kernel  # binary blocks keep the loop with "auto"
        assert PathAuxiliaryLBP(compiled=True).uses_compiled_kernel
        assert not PathAuxiliaryLBP(compiled=False).uses_compiled_kernel
        for bad in ("yes", "AUTO", None):
            with pytest.raises(ValueError, match="compiled must be 'auto', True or False"):
                PathAuxiliaryLBP(compiled=bad)
    model = categorical_model()
    with model:
        step = PathAuxiliaryLBP([model["x"]], compiled=True)
        assert step.uses_compiled_kernel
        calls = {"n": 0}
        kernel = step.path_kernel
        original = kernel.__call__

        class Counting:
            def __getattr__(self, name):
                return getattr(kernel, name)

            def __call__(self, *args):
                calls["n"] += 1
                return original(*args)

        step._path_kernel = Counting()
        idata = pm.sample(
            draws=30,
            tune=25,
            chains=1,
            step=[step],
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    assert calls["n"] == 55  # one compiled call per draw, tuning draws included
    stats = idata.sample_stats
    assert np.all(stats["mean_path_length"].values >= 1)
    assert np.all(stats["step_jump_distance"].values <= stats["mean_path_length"].values + 1e-12)
    assert np.all(stats["path_scale"].values == stats["path_scale"].values[0, 0])
    tuned = idata.warmup_sample_stats["path_scale"].values[0]
    assert len(np.unique(tuned)) > 3  # the scale adapted inside the compiled tuning draws


def test_auto_switches_to_the_compiled_kernel_after_its_steps_and_keeps_the_count(caplog):
    """With "auto" the draws run the Python loop until the step has made KERNEL_AFTER_STEPS
    steps, then the kernel; the count is part of the sampling state (a restored state replays
    the same draws)."""
    model = categorical_model()
    with model:
        step = PathAuxiliaryLBP([model["x"]], steps_per_draw=10)
    step.loop_steps = KERNEL_AFTER_STEPS - 25  # three more loop draws, then the kernel
    state = step.sampling_state
    point = model.initial_point()
    used = []
    with caplog.at_level("INFO", logger="pymc_lbp"):
        for _ in range(6):
            used.append(step.uses_compiled_kernel)
            point, _ = step.step(point)
    assert used == [False, False, False, True, True, True]
    assert "compiling the path kernel after 20005 steps" in caplog.text  # the pause is said
    assert step.loop_steps == KERNEL_AFTER_STEPS + 5
    step.sampling_state = state
    assert step.loop_steps == KERNEL_AFTER_STEPS - 25


@pytest.mark.parametrize("compiled", [True, False], ids=["path-kernel", "python-loop"])
@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_other_backends_path_steps_make_the_same_moves(backend, compiled, c_path_runs):
    """PathAuxiliaryLBP under JAX (skipped without jax) and NUMBA makes the C backend's moves
    from the same seed, with the compiled path kernel (under JAX compiled for the number of
    steps: JAX traces shapes as values) and with the default Python loop of path steps (its
    differences compiled with the backend). The C runs are made once for both backends."""
    _, mode = modes(backend)
    model, refs = c_path_runs
    if compiled not in refs:
        refs[compiled] = _backend_path_run(model, None, compiled)
    ref = refs[compiled]
    run = _backend_path_run(model, mode, compiled)
    np.testing.assert_array_equal(ref.x, run.x)
    assert ref.n_accepted == run.n_accepted > 3
    np.testing.assert_allclose(ref.logp, run.logp, rtol=1e-12)


@pytest.fixture(scope="module")
def c_path_runs():
    """The lattice the backends are compared on, and the C backend's runs by ``compiled``."""
    from pymc_lbp.models import ising_model

    return ising_model((3, 3), 0.4, 0.1), {}


def _backend_path_run(model, mode, compiled):
    """20 frozen path steps from the zero state, seed 5, compiled with ``mode``."""
    with model:
        step = PathAuxiliaryLBP(
            [model["x"]],
            path_length=2.0,
            steps_per_draw=20,
            differences="gradient",  # the scan kernel (a pairwise block would run numba's)
            compiled=compiled,
            compile_kwargs={"mode": mode} if mode else None,
        )
    step.stop_tuning()
    step.set_rng(np.random.default_rng(5))
    x0 = np.zeros(9, dtype=np.int64)
    logp, deltas = step.differences(x0)
    assert not step.pairwise_ready()
    run = step.run_steps(x0, logp, deltas, 20)
    if compiled:
        assert step.path_kernel.static_shapes == (mode == "JAX")
    return run
