"""SelfBalancing's learning steps (particles as one batch) and its chain kernel, against numpy.

The reference is :func:`pymc_lbp.samplers.self_balancing.learning.batch_moves` evaluating its
proposals row by row through the step's differences, followed by :meth:`BalancingLearner.update`.
The step's :meth:`learn` evaluates the particles in one compiled call
(:class:`pymc_lbp.logp.batched_rows.BatchedRows`, the one-row graph vectorised over the rows,
or scanned); given the same uniforms it must make the same moves, the same parameter updates and
report the same losses, on binary, categorical and integer blocks, exact and first-order
differences, every parametrization and both particle weightings. The chain's compiled kernel
(with the current, learned ``g``) makes the numpy ``mh_step``'s moves. A tuning draw is the
chain's steps followed by ``learning_steps`` updates.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_lbp import SelfBalancing
from pymc_lbp.samplers.self_balancing.learning import AdamState, batch_moves
from tests.helpers.backends import OTHER_BACKENDS, modes
from tests.samplers.single_site.test_kernels import MODELS, quadratic_binary_model

# learning steps of the twin test: the particles move, accept and reject, and Adam updates
LEARNING_STEPS = 20

CASES = [
    ("binary", "exact", "lsb1", "uniform"),
    ("binary", "gradient", "lsb2", "target"),
    ("categorical", "exact", "lsb2", "uniform"),
    ("categorical", "gradient", "lsb1", "target"),
    ("integer", "exact", "lsb1", "uniform"),
    ("quadratic", "gradient", "lsb2_min", "uniform"),
]


def _row_by_row(step):
    """``X -> (logp, deltas)`` of every row of ``X``, each evaluated alone by the step's
    differences."""

    def target_rows(X):
        evals = [step.differences(row) for row in X]
        return np.array([e[0] for e in evals]), np.stack([e[1] for e in evals])

    return target_rows


def _reference_steps(step, X, adam, U):
    """The numpy reference of ``len(U)`` learning steps, rows evaluated one at a time."""
    logp, deltas = _row_by_row(step)(X)
    losses = []
    for u in U:
        res = batch_moves(
            u, X, logp, deltas, adam.params,
            log_g=step.parametrization.log_g, layout=step.layout, target_rows=_row_by_row(step),
            particle_weights=step.particle_weights,
        )  # fmt: skip
        loss = np.nan
        if res.movable.any():
            new, loss, skipped = step.learner.update(adam, res.batch)
            if skipped:
                loss = np.nan
            else:
                adam = new
        losses.append(loss)
        X, logp, deltas = res.x, res.logp, res.deltas
    return X, adam, losses


class _Given:
    """A stand-in generator returning given uniform arrays in order."""

    def __init__(self, arrays):
        self.arrays = list(arrays)

    def random(self, size=None):
        out = self.arrays.pop(0)
        assert np.shape(out) == (size if size is not None else ())
        return out


@pytest.mark.parametrize("name, differences, parametrization, weights", CASES)
def test_learning_reproduces_the_numpy_reference(name, differences, parametrization, weights):
    factory = quadratic_binary_model if name == "quadratic" else MODELS[name]
    model, vars, _, states, log_pi, _ = factory()
    with model:
        step = SelfBalancing(
            vars, family=parametrization, differences=differences, n_particles=6,
            particle_weights=weights, learning_rate=0.05, steps_per_draw=1,
        )  # fmt: skip
    rng = np.random.default_rng(11)
    ok = np.flatnonzero(np.isfinite(log_pi))
    X = states[rng.choice(ok, size=6)].astype(np.int64)
    U = rng.random((LEARNING_STEPS, 6, 2))
    # the batched evaluation equals the row-by-row one
    logp_rows, deltas_rows = step.batched_rows(X)
    for row, lp, d in zip(X, logp_rows, deltas_rows, strict=True):
        ref_lp, ref_d = step.differences(row)
        np.testing.assert_allclose(lp, ref_lp, rtol=1e-12)
        np.testing.assert_allclose(d, ref_d, rtol=1e-12)
    adam = AdamState.fresh(step._initial_params)
    ref_X, ref_adam, losses = _reference_steps(step, X, adam, U)
    assert np.all(np.isfinite(losses)) and not np.allclose(ref_adam.params, adam.params)
    assert not np.array_equal(ref_X, X)  # the particles moved
    # the step's learning from the same particles, uniforms and optimiser state
    step.lsb_particles = X
    step.rng = _Given(list(U))
    got, evaluations = step.learn(X[0], LEARNING_STEPS)
    # the particles at the start and their proposals
    assert evaluations == 6 * (LEARNING_STEPS + 1)
    np.testing.assert_array_equal(step.lsb_particles, ref_X)
    np.testing.assert_allclose(got, losses, rtol=1e-9)
    np.testing.assert_allclose(step.lsb_params, ref_adam.params, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(step.lsb_adam_m, ref_adam.m, rtol=1e-9, atol=1e-14)
    assert step.lsb_adam_t == ref_adam.t == LEARNING_STEPS


def test_tuning_draw_is_the_chain_steps_then_the_learning_steps():
    """A tuning draw: the chain's steps (compiled kernel, current g), then learning_steps
    updates (default ceil(steps_per_draw / n_particles)); a frozen draw makes no update."""
    model, vars, _, states, log_pi, _ = MODELS["categorical"]()
    with model:
        step = SelfBalancing(vars, n_particles=3, steps_per_draw=7, differences="exact")
    assert not step.pairwise_ready()  # the compiled kernel (pairwise blocks: tests/test_pairwise)
    assert step.learning_steps == 3
    with model:
        fixed = SelfBalancing(vars, n_particles=3, steps_per_draw=7, learning_steps=5)
    assert fixed.learning_steps == 5
    x = states[int(np.argmax(log_pi))].copy()
    logp, deltas = step.differences(x)
    step.set_rng(np.random.default_rng(3))
    draw = step.run_steps(x, logp, deltas, 7)
    assert step.lsb_adam_t == 3 and draw.extras["learning_steps"] == [3]
    # the same uniforms through the kernel alone, then learn(): the same chain and parameters
    with model:
        other = SelfBalancing(vars, n_particles=3, steps_per_draw=7, differences="exact")
    other.set_rng(np.random.default_rng(3))
    chain = other.kernel(x, logp, deltas, other.rng.random((7, 2)))
    other.learn(chain.x, 3)
    np.testing.assert_array_equal(draw.x, chain.x)
    np.testing.assert_array_equal(other.lsb_params, step.lsb_params)
    step.stop_tuning()
    t = step.lsb_adam_t
    frozen = step.run_steps(draw.x, draw.logp, draw.deltas, 7)
    assert step.lsb_adam_t == t and frozen.extras == {}


def test_rows_without_a_move_are_left_out_of_the_update():
    """A row whose every neighbour is impossible stays, gets weight 0, and a batch with no
    movable row makes no update (loss NaN in the reference, no Adam step compiled)."""
    model, vars, _, states, log_pi, _ = MODELS["binary"]()
    with model:
        step = SelfBalancing(vars, n_particles=2, differences="exact", steps_per_draw=1)
    X = states[[0, 5, 9]].astype(np.int64)
    logp = np.array([step.differences(r)[0] for r in X])
    deltas = np.stack([step.differences(r)[1] for r in X])
    deltas[1] = -np.inf  # row 1 cannot move
    u = np.random.default_rng(0).random((3, 2))
    res = batch_moves(
        u, X, logp, deltas, step._initial_params,
        log_g=step.parametrization.log_g, layout=step.layout, target_rows=_row_by_row(step),
    )  # fmt: skip
    assert not res.movable[1] and res.batch.weights[1] == 0.0 and res.accept[1] == 0.0
    np.testing.assert_array_equal(res.x[1], X[1])
    np.testing.assert_allclose(res.batch.weights[[0, 2]], 0.5)
    assert np.all(np.isfinite(res.batch.deltas_x[1]))
    frozen = np.full_like(deltas, -np.inf)
    res = batch_moves(
        u, X, logp, frozen, step._initial_params,
        log_g=step.parametrization.log_g, layout=step.layout, target_rows=_row_by_row(step),
    )  # fmt: skip
    assert not res.movable.any() and np.all(res.batch.weights == 0)
    np.testing.assert_array_equal(res.x, X)


@pytest.mark.parametrize("name, differences", [("binary", "exact"), ("categorical", "gradient")])
def test_frozen_compiled_kernel_reproduces_numpy_moves(name, differences):
    """After tuning, the chain runs the compiled single-site kernel with the learned g: the same
    moves as the numpy ``mh_step`` given the same uniforms."""
    model, vars, _, states, log_pi, _ = MODELS[name]()
    with model:
        step = SelfBalancing(
            vars, family="lsb2", differences=differences, n_particles=3,
            steps_per_draw=1, rng=np.random.default_rng(4),
        )  # fmt: skip
    step.lsb_params = np.random.default_rng(5).normal(scale=0.5, size=step.lsb_params.size)
    step.stop_tuning()
    x = states[int(np.argmax(log_pi))].copy()
    logp, deltas = step.differences(x)
    U = np.random.default_rng(6).random((80, 2))

    n_acc = 0
    for u in U:
        comp = step.kernel(x, logp, deltas, u[None, :])
        step.rng = _Given(list(u))
        ref = step.mh_step(x.copy(), logp, deltas)
        np.testing.assert_array_equal(comp.x, ref.x)
        np.testing.assert_allclose(comp.sum_accept, ref.accept, rtol=1e-12, atol=1e-300)
        n_acc += int(ref.accepted)
        x, logp, deltas = ref.x, ref.logp, ref.deltas
    assert 0 < n_acc < len(U)  # accepted and rejected moves were both compared


@pytest.mark.parametrize("limit, vectorised", [(0, False), (10**9, True)])
def test_batched_rows_scan_and_vectorised_agree(monkeypatch, limit, vectorised):
    """Above the memory limit the rows are scanned; both evaluations equal the one-row one."""
    from pymc_lbp.logp import batched_rows

    monkeypatch.setattr(batched_rows, "VECTORISED_ELEMENTS", limit)
    model, vars, _, states, log_pi, _ = MODELS["categorical"]()
    with model:
        step = SelfBalancing(vars, differences="exact", n_particles=8, steps_per_draw=1)
    assert step.differences.method == "batched"
    assert step.batched_rows.vectorised is vectorised
    X = states[np.random.default_rng(2).choice(len(states), size=8)].astype(np.int64)
    logp, deltas = step.batched_rows(X)
    for row, lp, d in zip(X, logp, deltas, strict=True):
        ref_lp, ref_d = step.differences(row)
        np.testing.assert_allclose(lp, ref_lp, rtol=1e-12)
        np.testing.assert_array_equal(np.isinf(d), np.isinf(ref_d))
        np.testing.assert_allclose(d[np.isfinite(d)], ref_d[np.isfinite(ref_d)], rtol=1e-12)


def _tuning_and_frozen_draws(model, vars, x, mode):
    """Two tuning draws and a frozen one of SelfBalancing (LSB2, 4 particles, 15 steps a draw)
    compiled with ``mode``, seed 8: (state, accepted, parameters) after each."""
    with model:
        step = SelfBalancing(
            vars, family="lsb2", n_particles=4, steps_per_draw=15,
            compile_kwargs={"mode": mode} if mode else None,
        )  # fmt: skip
    step.set_rng(np.random.default_rng(8))
    out = []
    for tune in (True, True, False):
        step.tune = tune
        logp, deltas = step.differences(x)
        draw = step.run_steps(x, logp, deltas, step.steps_per_draw)
        x = draw.x
        out.append((draw.x.copy(), draw.n_accepted, step.lsb_params.copy()))
    return out


@pytest.fixture(scope="module")
def c_backend_draws():
    """The C backend's draws that every other backend must reproduce, computed once."""
    model, vars, _, states, log_pi, _ = MODELS["categorical"]()
    x = states[int(np.argmax(log_pi))].copy()
    runs = _tuning_and_frozen_draws(model, vars, x, None)
    assert sum(r[1] for r in runs) > 5  # a comparison with teeth: the chain moved
    return model, vars, x, runs


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_other_backends_make_the_same_tuning_and_frozen_moves(backend, c_backend_draws):
    """compile_kwargs={"mode": "JAX"} (jax optional: skipped without it) or "NUMBA": the batched
    rows, the learning update and the frozen kernel compile with the backend and make the C
    backend's moves and parameter updates from the same seed."""
    _, mode = modes(backend)
    model, vars, x, ref = c_backend_draws
    other = _tuning_and_frozen_draws(model, vars, x, mode)
    for (x_c, n_c, p_c), (x_j, n_j, p_j) in zip(ref, other, strict=True):
        np.testing.assert_array_equal(x_j, x_c)
        assert n_j == n_c
        np.testing.assert_allclose(p_j, p_c, rtol=1e-9, atol=1e-12)
