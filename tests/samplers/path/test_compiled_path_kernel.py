"""The compiled path kernel (pymc_lbp.samplers.path.graph) against its references.

1. Move for move: given the same noise row, the compiled step makes the move that the numpy
   reference :func:`pymc_lbp.samplers.path.reference.path_step` makes, with the same acceptance
   probability, on binary, categorical and integer blocks, with first-order and
   exact differences.
2. In distribution: repeated single compiled steps from fixed states reproduce the rows of the
   independently enumerated mixture kernel of ``tests/samplers/path/test_path_auxiliary_kernel.py``
   (chi-square, independent repeats, so the test is exact at its level).
3. While tuning, the kernel's moves and path-length adaptation are those of the numpy reference
   steps with the Python adaptation update, from the same noise.
4. In ``pm.sample``: every draw, tuning included, is one compiled call, and the scale adapts.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.samplers.path import reference
from pymc_lbp.samplers.path.adaptation import AdaptState
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
    """One path step of the numpy reference, driven by one noise row."""
    return reference.path_step(
        x,
        logp,
        deltas,
        noise,
        scale,
        share=step.single_site_share,
        log_g=step.log_g,
        layout=step.layout,
        target=step.differences,
    )


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
    x = step.state_vector(model.initial_point())
    logp, deltas = step.differences(x)
    moved = 0
    for _ in range(STEPS):
        noise = kernel.draw_noise(rng, 1)
        ref = reference_step(step, x, logp, deltas, noise[0], scale)
        out = kernel(x, logp, deltas, noise, scale)
        np.testing.assert_array_equal(out.x, ref.x)
        np.testing.assert_allclose(out.sum_accept, ref.accept, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.logp, ref.logp, rtol=1e-12)
        np.testing.assert_allclose(out.deltas, ref.deltas, rtol=1e-10, atol=1e-12)
        assert (out.n_accepted, out.n_evaluated, out.sum_length) == (
            int(ref.accepted),
            int(ref.evaluated),
            ref.length,
        )
        moved += int(np.any(out.x != x))
        x, logp, deltas = out.x, out.logp, out.deltas
    # the comparison covers accepted moves and rejections
    assert STEPS / 10 < moved < STEPS, moved


@pytest.mark.parametrize(
    "mode", [None, "FAST_COMPILE", *OTHER_BACKENDS], ids=["c", "python", "jax", "numba"]
)
def test_race_and_path_probabilities_are_the_reference(mode):
    """The Ops of the race and the path probabilities (C, their numpy ``perform``, NUMBA, JAX):
    the first ``length`` entries of the order are the reference race's picks in its order (the
    whole a permutation), ``picked`` their mask, the forward and reverse log-probabilities the
    reference's, ``can_move`` whether ``length`` sites can move; sites that cannot move (weight
    0), paths of every length up to all the sites, a large block."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_lbp.samplers.path.ops import PathRace, ReversePathLogProb, register_backend

    if mode in ("JAX", "NUMBA"):
        modes(mode)
        register_backend(mode.lower())
    w, e, w_y = pt.vector("w"), pt.vector("e"), pt.vector("w_y")
    length = pt.scalar("length", dtype="int64")
    path, picked, log_q, can_move = PathRace()(w, e, length)
    log_q_rev = ReversePathLogProb()(w_y, path, picked, length)
    fn = pytensor.function(
        [w, e, length, w_y], [path, picked, log_q, can_move, log_q_rev], mode=mode
    )
    rng = np.random.default_rng(9)
    cases = [(1, 1), (6, 6), (50, 7), (3000, 40)] + [
        (int(n), int(rng.integers(1, n + 1))) for n in rng.integers(1, 40, 40)
    ]
    for n, size in cases:
        site_w = 3.0 * rng.normal(size=n)
        site_w[rng.random(n) < 0.2] = -np.inf
        site_w_y = rng.normal(size=n)
        noise = rng.standard_exponential(n)
        order, mask, lq, can, lq_rev = fn(site_w, noise, size, site_w_y)
        wx = reference.PathWeights.from_site_log_weights(site_w)
        assert bool(can) == (wx.n_movable >= size)
        assert order.dtype == np.int64 and np.array_equal(np.sort(order), np.arange(n))
        if not can:
            continue
        sites = reference.race(wx.lin, noise, size)
        np.testing.assert_array_equal(order[:size], sites)
        np.testing.assert_array_equal(np.flatnonzero(mask), np.sort(sites))
        np.testing.assert_allclose(lq, reference.log_prob_order(wx, sites), rtol=1e-10)
        wy = reference.PathWeights.from_site_log_weights(site_w_y)
        np.testing.assert_allclose(lq_rev, reference.log_prob_order(wy, sites[::-1]), rtol=1e-10)


def test_large_block_kernel_makes_the_reference_moves():
    """A block of 1,500 binary sites (the race's heap holds a path of 1 to 1,500 sites): the
    same moves as the reference, paths of every length."""
    from pymc_lbp.models.rbm import random_rbm_params, rbm_model

    model = rbm_model(random_rbm_params(1500, 4, seed=1), name="x")
    with model:
        step = PathAuxiliaryLBP([model["x"]])
    kernel = step.path_kernel
    rng = np.random.default_rng(17)
    x = step.state_vector(model.initial_point())
    logp, deltas = step.differences(x)
    for scale in (1.0, 2.4, 40.0, 1500.0):
        for _ in range(10):
            noise = kernel.draw_noise(rng, 1)
            ref = reference_step(step, x, logp, deltas, noise[0], scale)
            out = kernel(x, logp, deltas, noise, scale)
            np.testing.assert_array_equal(out.x, ref.x)
            np.testing.assert_allclose(out.sum_accept, ref.accept, rtol=1e-9, atol=1e-12)
            x, logp, deltas = out.x, out.logp, out.deltas


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
    those of the numpy reference steps (:func:`pymc_lbp.samplers.path.reference.path_steps`:
    ``PathLengthAdaptation.update`` on every path step, never on the single-site steps)."""
    model = build()
    with model:
        step = PathAuxiliaryLBP([model["x"]], differences="exact")
    kernel = step.path_kernel
    rng = np.random.default_rng(3)
    x0 = step.state_vector(model.initial_point())
    logp0, deltas0 = step.differences(x0)
    start = AdaptState(0.0, 0.0, 0, True)
    for _ in range(4):  # draws: the state goes from one call to the next
        noise = kernel.draw_noise(rng, 40)
        ref = reference.path_steps(
            x0,
            logp0,
            deltas0,
            noise,
            1.0,
            share=step.single_site_share,
            log_g=step.log_g,
            layout=step.layout,
            target=step.differences,
            adaptation=step.adaptation,
            adapt_state=start,
        )
        out = kernel(x0, logp0, deltas0, noise, 1.0, start)
        np.testing.assert_array_equal(out.x, ref.x)
        np.testing.assert_allclose(out.logp, ref.logp, rtol=1e-12)
        np.testing.assert_allclose(out.sum_accept, ref.sum_accept, rtol=1e-9)
        assert (out.n_accepted, out.sum_length, out.sum_moved) == (
            ref.n_accepted,
            ref.sum_length,
            ref.sum_moved,
        )
        np.testing.assert_allclose(out.adapt_state[:2], ref.adapt_state[:2], rtol=1e-12, atol=1e-14)
        assert out.adapt_state[2:] == tuple(ref.adapt_state[2:])
        x0, logp0, deltas0, start = out.x, out.logp, out.deltas, out.adapt_state
    assert start.count > 0 and not start.doubling and start.log_u > 0  # both phases were run


def test_sampling_runs_the_compiled_kernel_tuning_included():
    """Every draw, tuning included, is one compiled call and the scale adapts inside it;
    ``compiled`` is not an option (one execution path)."""
    model = categorical_model()
    with model:
        with pytest.raises(TypeError, match="compiled"):
            PathAuxiliaryLBP([model["x"]], compiled=True)
        step = PathAuxiliaryLBP([model["x"]])
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
    assert np.all(stats["sites_moved_per_step"].values <= stats["mean_path_length"].values + 1e-12)
    assert np.all(stats["path_scale"].values == stats["path_scale"].values[0, 0])
    tuned = idata.warmup_sample_stats["path_scale"].values[0]
    assert len(np.unique(tuned)) > 3  # the scale adapted inside the compiled tuning draws


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_other_backends_path_steps_make_the_same_moves(backend, c_path_runs):
    """PathAuxiliaryLBP under JAX (skipped without jax) and NUMBA makes the C backend's moves
    from the same seed with the compiled path kernel (under JAX compiled for the number of
    steps: JAX traces shapes as values), frozen and tuning (under JAX in chunks of powers of
    two: 20 steps run as 16 + 4). The C runs are made once for both backends."""
    _, mode = modes(backend)
    model, refs = c_path_runs
    for tuning in (False, True):
        if tuning not in refs:
            refs[tuning] = _backend_path_run(model, None, tuning)
        ref = refs[tuning]
        run = _backend_path_run(model, mode, tuning)
        np.testing.assert_array_equal(ref.x, run.x)
        assert ref.n_accepted == run.n_accepted > 3
        np.testing.assert_allclose(ref.logp, run.logp, rtol=1e-12)


@pytest.fixture(scope="module")
def c_path_runs():
    """The lattice the backends are compared on, and the C backend's runs by ``tuning``."""
    from pymc_lbp.models import ising_model

    return ising_model((3, 3), 0.4, 0.1), {}


def _backend_path_run(model, mode, tuning):
    """20 path steps from the zero state, seed 5, compiled with ``mode``: frozen at scale 2,
    or tuning from scale 1."""
    with model:
        step = PathAuxiliaryLBP(
            [model["x"]],
            path_scale=None if tuning else 2.0,
            steps_per_draw=20,
            differences="gradient",  # the scan kernel (a pairwise block would run numba's)
            compile_kwargs={"mode": mode} if mode else None,
        )
    if not tuning:
        step.stop_tuning()
    step.set_rng(np.random.default_rng(5))
    x0 = np.zeros(9, dtype=np.int64)
    logp, deltas = step.differences(x0)
    assert not step.pairwise_ready()
    run = step.run_steps(x0, logp, deltas, 20)
    assert step.path_kernel.runs.static_shapes == (mode == "JAX")
    if tuning:
        assert step.path_adapt_count > 0
    return run
