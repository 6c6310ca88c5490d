"""The compiled single-site kernel (pymc_lbp.samplers.single_site) against its numpy reference.

The exact-kernel tests (test_kernels.py) check the compiled kernel's transition probabilities
against independent enumeration. Here: the one MH accept on non-finite inputs; the compiled
kernel and the numpy reference (``single_site_steps`` of ``samplers/single_site/reference.py``)
make the same moves given the same uniforms, step by step and over a whole draw of many steps in
one call; the slot draw never
returns a zero-weight slot; custom balancing callables; the NUMBA backend; seeding.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.models import ising_model
from pymc_lbp.samplers.common import mh_accept as np_mh_accept
from pymc_lbp.samplers.common import mh_accept_probs, mh_log_ratios
from pymc_lbp.samplers.common import mh_log_ratio as np_mh_log_ratio
from pymc_lbp.samplers.mh_graph import mh_accept, mh_log_ratio
from pymc_lbp.samplers.single_site.graph import draw_slot
from pymc_lbp.samplers.single_site.reference import single_site_steps
from tests.helpers.backends import OTHER_BACKENDS, modes
from tests.samplers.single_site.test_kernels import MODELS, quadratic_binary_model

INF, NAN = np.inf, np.nan
# twin tests (compiled kernel against the numpy reference from the same uniforms): enough steps
# to compare accepted and rejected moves, which each test asserts
STEPS = 80


def test_one_mh_accept_rejects_non_finite_ratios_never_nan():
    a, b, c, d, u = (pt.scalar(n, dtype="float64") for n in "abcdu")
    r = mh_log_ratio(a, b, c, d)
    prob, acc = mh_accept(r, u)
    fn = pytensor.function([a, b, c, d, u], [r, prob, acc])
    cases = [
        (0.0, -INF, 0.0, 0.0),  # proposal of zero probability
        (0.0, 1.0, 0.0, -INF),  # impossible reverse move
        (0.0, 1.0, -INF, 0.0),  # impossible forward move
        (0.0, NAN, 0.0, 0.0),
        (0.0, 1.0, NAN, 0.0),
        (0.0, INF, 0.0, 0.0),
        (0.0, 1.0, 0.0, INF),
    ]
    for args in cases:
        ratio, p, accepted = fn(*args, 0.0)
        assert ratio == -INF and p == 0.0 and not accepted, args
        assert np_mh_log_ratio(*args) == -INF  # the numpy reference agrees
    # the row-wise numpy version (SelfBalancing's particles) follows the same rule
    cols = [np.array(c) for c in zip(*cases, strict=True)]
    ratios = mh_log_ratios(*cols)
    assert np.all(ratios == -INF) and np.all(mh_accept_probs(ratios) == 0)
    # from an impossible current state a possible proposal is accepted, by every version
    ratio, p, accepted = fn(-INF, 1.0, 0.0, 0.0, 0.999)
    assert ratio == INF and p == 1.0 and accepted
    assert np_mh_log_ratio(-INF, 1.0, 0.0, 0.0) == INF
    assert np_mh_accept(INF, 0.999) == (1.0, True)
    assert mh_log_ratios(*(np.array([v]) for v in (-INF, 1.0, 0.0, 0.0)))[0] == INF
    assert mh_accept_probs(np.array([INF, -INF, NAN])).tolist() == [1.0, 0.0, 0.0]
    assert [float(v) for v in fn(NAN, 1.0, 0.0, 0.0, 0.0)[:2]] == [-INF, 0.0]  # NaN: rejected
    assert np_mh_log_ratio(NAN, 1.0, 0.0, 0.0) == -INF
    rows = np.random.default_rng(1).normal(scale=3, size=(4, 50))
    ref = np.array([np_mh_log_ratio(*r) for r in rows.T])
    np.testing.assert_allclose(mh_log_ratios(*rows), ref, rtol=1e-12)
    np.testing.assert_allclose(mh_accept_probs(ref), np.minimum(1.0, np.exp(ref)), rtol=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(50):
        args = tuple(rng.normal(scale=3, size=4))
        u = rng.random()
        ratio, p, accepted = fn(*args, u)
        ref = np_mh_log_ratio(*args)
        np.testing.assert_allclose(ratio, ref, rtol=1e-12)
        np.testing.assert_allclose(p, min(1.0, np.exp(ref)), rtol=1e-12)
        assert bool(accepted) == (u < min(1.0, np.exp(ref)))


def test_slot_draw_never_returns_zero_weight_slot():
    cdf = pt.vector("cdf")
    u = pt.scalar("u")
    fn = pytensor.function([cdf, u], draw_slot(cdf, u))
    c = np.array([0.0, 0.3, 0.3, 1.0, 1.0, 1.0])  # slots 0, 2, 4, 5 have zero weight
    below_one = np.nextafter(1.0, 0.0)
    assert fn(c, below_one) == 3
    assert fn(c, 0.0) == 1
    assert fn(c, 0.3 - 1e-15) == 1
    assert fn(c, 0.3) == 3
    # rounding of u * cdf[-1] up to cdf[-1]: clipped to the last slot of positive weight
    assert fn(np.array([0.2, 0.7, 0.7]), 1.0) == 1


# one case per model and differences (the balancing is only a formula inside the same graph;
# every balancing's compiled kernel is enumerated against its definition in test_kernels.py)
CASES = [
    ("binary", "sqrt", "exact"),
    ("categorical", "barker", "exact"),
    ("categorical", "sqrt", "gradient"),
    ("integer", "min", "exact"),
    ("integer", "sqrt", "gradient"),
    ("quadratic", "barker", "gradient"),
]


@pytest.mark.parametrize("name, balancing, differences", CASES)
def test_compiled_kernel_reproduces_numpy_reference_moves(name, balancing, differences):
    factory = quadratic_binary_model if name == "quadratic" else MODELS[name]
    model, vars, _, states, log_pi, _ = factory()
    with model:
        step = LocallyBalanced(vars, balancing=balancing, differences=differences)
    rng = np.random.default_rng(7)
    x = states[int(np.argmax(log_pi))].copy()
    logp, deltas = step.differences(x)
    U = rng.random((STEPS, 2))
    evaluate, prepare = step.differences.evaluate, step.proposal_weights
    n_acc = 0
    xs = []
    for u in U:
        comp = step.kernel(x, logp, deltas, u[None, :])
        ref = single_site_steps(x.copy(), logp, deltas, prepare, step.layout, evaluate, u[None])
        assert ref.n_evaluated == 1
        np.testing.assert_array_equal(comp.x, ref.x)
        np.testing.assert_allclose(comp.logp, ref.logp, rtol=1e-12)
        np.testing.assert_allclose(comp.deltas, ref.deltas, rtol=1e-12)
        np.testing.assert_allclose(comp.sum_accept, ref.sum_accept, rtol=1e-12, atol=1e-300)
        assert comp.n_accepted == ref.n_accepted
        n_acc += ref.n_accepted
        x, logp, deltas = ref.x, ref.logp, ref.deltas
        xs.append(x)
    # both branches of the MH decision were compared: the chain moved, and not always
    assert 0 < n_acc < STEPS
    assert len({tuple(v) for v in xs}) > 3
    # all the steps in one call end where the step-by-step chain ended, in the kernel and in
    # the reference
    x0 = states[int(np.argmax(log_pi))].copy()
    logp0, deltas0 = step.differences(x0)
    whole = step.kernel(x0, logp0, deltas0, U)
    np.testing.assert_array_equal(whole.x, x)
    assert whole.n_accepted == n_acc
    assert whole.n_evaluated == STEPS
    numpy_run = single_site_steps(x0, logp0, deltas0, prepare, step.layout, evaluate, U)
    np.testing.assert_array_equal(numpy_run.x, x)
    assert (numpy_run.n_accepted, numpy_run.n_evaluated) == (n_acc, STEPS)
    np.testing.assert_allclose(numpy_run.sum_accept, whole.sum_accept, rtol=1e-9)
    np.testing.assert_allclose(numpy_run.logp, whole.logp, rtol=1e-12)


def test_draw_stats_from_the_compiled_kernel():
    model = ising_model((3, 3), 0.4, 0.1)
    with model:
        step = GibbsWithGradients(
            [model["x"]], steps_per_draw=10, differences="gradient", rng=np.random.default_rng(1)
        )
    point = model.initial_point()
    for _ in range(5):
        point, (stats,) = step.step(point)
        assert 0 <= stats["n_accepted"] <= 10
        assert stats["mh_steps"] == 10 and stats["tune"]
        assert 0.0 <= stats["accept"] <= 1.0
        assert stats["sites_changed"] <= 10
        # one evaluation per step, plus the draw's initial one
        assert stats["grad_evals"] == 11
        assert stats["logp_evals"] == stats["grad_evals"]


def test_custom_balancing_callable_in_the_compiled_kernel():
    model, vars, kinds, states, log_pi, _ = MODELS["categorical"]()
    from tests.helpers import kernels

    with model:
        step = LocallyBalanced(vars, balancing=lambda d: d / 2)
    T = kernels.locally_balanced_kernel(states, log_pi, kinds, "sqrt")
    np.testing.assert_allclose(kernels.compiled_step_kernel(step, states, kinds), T, atol=1e-10)

    def numpy_only(d):
        return 0.5 * np.asarray(d, dtype=float)

    with model, pytest.raises(ValueError, match="cannot be applied to a pytensor tensor"):
        LocallyBalanced(vars, balancing=numpy_only)


def _final_state(model, seed: int, mode: str | None):
    x0 = np.zeros(9, dtype=np.int64)
    with model:
        step = GibbsWithGradients(
            [model["x"]],
            steps_per_draw=50,
            differences="gradient",  # the scan kernel (a pairwise block would run numba's)
            compile_kwargs={"mode": mode} if mode else None,
        )
    step.set_rng(np.random.default_rng(seed))
    logp, deltas = step.differences(x0)
    return step.run_steps(x0, logp, deltas, step.steps_per_draw)


def test_same_rng_same_draw():
    model = ising_model((3, 3), 0.4, 0.1)
    a, b, c = (_final_state(model, seed, None) for seed in (42, 42, 43))
    np.testing.assert_array_equal(a.x, b.x)
    assert a.n_accepted == b.n_accepted > 5
    assert not np.array_equal(a.x, c.x) or a.n_accepted != c.n_accepted


def _lb_run(step):
    """40 steps of LocallyBalanced's scan kernel from the zero state, seed 7."""
    x0 = np.zeros(9, dtype=np.int64)
    step.set_rng(np.random.default_rng(7))
    logp, deltas = step.differences(x0)
    assert not step.pairwise_ready()
    return step.run_steps(x0, logp, deltas, step.steps_per_draw)


@pytest.fixture(scope="module")
def c_backend_moves():
    """The C backend's moves the other backends must make, computed once for all of them:
    ``(model, GibbsWithGradients' final state, LocallyBalanced's run, its step)``, with
    numba's pairwise kernel off (as ``general_paths`` does), so the lattice takes the scan
    kernel."""
    from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel

    model = ising_model((3, 3), 0.4, 0.1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pairwise_kernel, "ENABLED", False)
        gwg = _final_state(model, 42, None)
        with model:
            step = LocallyBalanced([model["x"]], steps_per_draw=40)
        lb = _lb_run(step)
    return model, gwg, lb, step


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_other_backends_make_the_same_moves(backend, general_paths, c_backend_moves):
    """compile_kwargs={"mode": "JAX"} (jax is optional: skipped without it) or "NUMBA": the
    compiled steps (under JAX built for the shapes of their arguments: JAX traces shapes as
    values) make the C backend's moves from the same uniforms, for GibbsWithGradients and
    LocallyBalanced's scan kernel (numba's pairwise kernel off, so the lattice takes it)."""
    _, mode = modes(backend)
    model, ref, ref_lb, ref_step = c_backend_moves
    other = _final_state(model, 42, mode)
    np.testing.assert_array_equal(other.x, ref.x)
    assert other.n_accepted == ref.n_accepted > 5
    np.testing.assert_allclose(other.logp, ref.logp, rtol=1e-12)
    with model:
        lb = LocallyBalanced([model["x"]], steps_per_draw=40, compile_kwargs={"mode": mode})
    run = _lb_run(lb)
    np.testing.assert_array_equal(run.x, ref_lb.x)
    assert run.n_accepted == ref_lb.n_accepted > 5
    assert lb._kernel is not None and ref_step._kernel is not None  # the compiled kernels ran
    assert lb.kernel.runs.static_shapes == (mode == "JAX")
    assert not ref_step.kernel.runs.static_shapes


def _integer_and_independent_model():
    """Two Poisson counts sharing a term (they jump) and two independent binary sites: the
    smallest block with every op of the jumps and of the independent sites' draws."""
    import pymc as pm

    with pm.Model() as model:
        k = pm.Poisson("k", 20.0, shape=2)
        g = pm.Bernoulli("g", 0.4, shape=2)
        pm.Normal("y", k.sum() * 0.1, 1.0, observed=7.0)
        pm.Normal("z", g * 1.5, 1.0, observed=[1.0, 0.0])
    return model


def _integer_and_independent_draws(model, mode):
    """20 draws of the two steps (k, g) compiled with ``mode`` from the first draw."""
    with model:
        steps = [
            LocallyBalanced([model["k"]], compile_kwargs={"mode": mode} if mode else None),
            LocallyBalanced([model["g"]], compile_kwargs={"mode": mode} if mode else None),
        ]
    assert steps[1].independent_sites  # the sites of g share no term
    p = dict(model.initial_point())
    for i, step in enumerate(steps):
        step.set_rng(np.random.default_rng(3 + i))
    seen = []
    for _ in range(20):
        for step in steps:
            p, _ = step.step(p)
        seen.append(np.concatenate([p["k"], p["g"]]))
    assert all(step.integer_moves.is_compiled for step in steps)  # the compiled calls ran
    return p, seen


@pytest.fixture(scope="module")
def c_backend_integer_draws():
    """The C backend's draws of the integer and independent sites, computed once."""
    model = _integer_and_independent_model()
    final, seen = _integer_and_independent_draws(model, None)
    # a comparison with teeth: both blocks moved
    assert len({s[:2].tobytes() for s in seen}) > 2 and len({s[2:].tobytes() for s in seen}) > 2
    return model, final


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_other_backends_for_integer_jumps_and_independent_sites(backend, c_backend_integer_draws):
    """The integer jumps (and the full-conditional draws of independent sites, which share their
    compiled call) with the input shapes fixed under JAX: under JAX and NUMBA they make the C
    backend's moves (compiled at the first draw)."""
    _, mode = modes(backend)
    model, ref = c_backend_integer_draws
    final, _ = _integer_and_independent_draws(model, mode)
    for name in ("k", "g"):
        np.testing.assert_array_equal(final[name], ref[name])
