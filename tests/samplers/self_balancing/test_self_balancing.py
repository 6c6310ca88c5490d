"""SelfBalancing (LSB1/LSB2, exact and first-order): kernels, sampling, learning, state, errors."""

from __future__ import annotations

import re
import zlib

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.blocking import DictToArrayBijection

from pymc_lbp import LocallyBalanced, SelfBalancing
from pymc_lbp.models import potts_model
from pymc_lbp.samplers.self_balancing.learning import (
    MAX_LEARNING_BYTES,
    MAX_PARTICLES,
    learning_memory_bytes,
)
from tests.helpers.frequencies import max_z_score, state_z_scores
from tests.helpers.kernels import enumerate_states, neighbour_moves, stationary_error
from tests.helpers.kernels import log_g as kernel_log_g
from tests.samplers.self_balancing.test_learned_balancing import mixture_g, neural_log_g

BINARY_H = np.array([0.4, -0.7, 0.2, 0.9])
BINARY_J = 0.6
BINARY_A = 0.35  # weight of the non-multilinear term a * (sum x)^2
CAT_H = np.array([[0.3, -0.2, 0.5], [0.0, 0.8, -0.4], [-0.6, 0.1, 0.2]])
CAT_J = 0.7
CAT_A = 0.15


# -- the test models and their exact / first-order log-ratios, written independently --------------
def binary_model() -> pm.Model:
    with pm.Model() as m:
        x = pm.Bernoulli("x", logit_p=BINARY_H, shape=4)
        s = 2 * x - 1
        pm.Potential("c", BINARY_J * (s[1:] * s[:-1]).sum() + BINARY_A * x.sum() ** 2)
    return m


def binary_log_pi(x: np.ndarray) -> float:
    s = 2 * x - 1
    prior = np.sum(np.where(x == 1, -np.logaddexp(0, -BINARY_H), -np.logaddexp(0, BINARY_H)))
    return prior + BINARY_J * np.sum(s[1:] * s[:-1]) + BINARY_A * x.sum() ** 2


def binary_first_order(x: np.ndarray) -> np.ndarray:
    """(1 - 2 x_i) d f~/d v_i for the multilinear-prior + float-arithmetic relaxation."""
    s = 2 * x - 1
    nb = np.zeros(4)
    nb[1:] += s[:-1]
    nb[:-1] += s[1:]
    grad = BINARY_H + 2 * BINARY_J * nb + 2 * BINARY_A * x.sum()
    return (1 - 2 * x) * grad


def categorical_model() -> pm.Model:
    with pm.Model() as m:
        z = pm.Categorical("z", logit_p=CAT_H, shape=3)
        pm.Potential("c", CAT_J * pm.math.eq(z[1:], z[:-1]).sum() + CAT_A * z.sum() ** 2)
    return m


def categorical_log_pi(z: np.ndarray) -> float:
    logp = CAT_H - np.logaddexp.reduce(CAT_H, axis=1, keepdims=True)
    return logp[np.arange(3), z].sum() + CAT_J * np.sum(z[1:] == z[:-1]) + CAT_A * z.sum() ** 2


def categorical_first_order(z: np.ndarray) -> np.ndarray:
    """d f~/d O_{i,c} - d f~/d O_{i,z_i} with the one-hot relaxation (z = sum_c c O_c)."""
    logp = CAT_H - np.logaddexp.reduce(CAT_H, axis=1, keepdims=True)
    onehot = np.eye(3)[z]
    nb = np.zeros((3, 3))
    nb[1:] += onehot[:-1]
    nb[:-1] += onehot[1:]
    grad = logp + CAT_J * nb + 2 * CAT_A * z.sum() * np.arange(3)[None, :]
    return (grad - grad[np.arange(3), z][:, None]).ravel()


CASES = {
    "binary": (binary_model, [("binary",)] * 4, binary_log_pi, binary_first_order),
    "categorical": (
        categorical_model,
        [("cat", 3)] * 3,
        categorical_log_pi,
        categorical_first_order,
    ),
}


def independent_log_g(name: str, params: np.ndarray):
    if name == "lsb1":
        return lambda d: np.log(mixture_g(np.exp(d), params))
    form = "sum" if name == "lsb2" else "min"
    return lambda d: neural_log_g(d, params, form)


def independent_kernel(states, log_pi_fn, kinds, log_g, deltas_fn=None, correct=True):
    """T of the locally balanced MH chain with balancing ``log_g``; numpy only.

    ``deltas_fn(x)`` gives the log-ratios the proposal uses (exact by default). With
    ``correct=False`` the proposal ratio is dropped from the acceptance (a broken kernel that
    the pi T = pi check must catch).
    """
    index = {tuple(s): n for n, s in enumerate(states)}
    log_pi = np.array([log_pi_fn(s) for s in states])

    def exact(x):
        out = []
        for mv in neighbour_moves(x, kinds):
            if mv is None:
                out.append(-np.inf)
                continue
            y = x.copy()
            y[mv[0]] = mv[1]
            out.append(log_pi[index[tuple(y)]] - log_pi[index[tuple(x)]])
        return np.array(out)

    def q(x):
        d = np.asarray((deltas_fn or exact)(x), dtype=float)
        masked = np.array([mv is None for mv in neighbour_moves(x, kinds)])
        w = np.zeros(len(d))
        w[~masked] = np.exp(log_g(d[~masked]))
        return w / w.sum()

    n = len(states)
    T = np.zeros((n, n))
    for a, x in enumerate(states):
        qx = q(x)
        for s, mv in enumerate(neighbour_moves(x, kinds)):
            if mv is None:
                continue
            y = x.copy()
            y[mv[0]] = mv[1]
            b = index[tuple(y)]
            back = neighbour_moves(y, kinds).index((mv[0], x[mv[0]]))
            ratio = np.exp(log_pi[b] - log_pi[a])
            if correct:
                ratio *= q(y)[back] / qx[s]
            T[a, b] += qx[s] * min(1.0, ratio)
        T[a, a] = 1.0 - T[a].sum()
    return T, log_pi


def slot_rows(step, states) -> np.ndarray:
    """The step's own off-diagonal transition probabilities, as a matrix over states."""
    index = {tuple(s): n for n, s in enumerate(states)}
    T = np.zeros((len(states), len(states)))
    lay = step.layout
    for a, x in enumerate(states):
        probs = step.move_probabilities(x)
        for slot in np.flatnonzero(probs):
            y = x.copy()
            y[lay.slot_site[slot]] = lay.new_value(x, slot)
            T[a, index[tuple(y)]] += probs[slot]
        T[a, a] = 1.0 - T[a].sum()
    return T


# -- kernel-level exactness -----------------------------------------------------------------------
@pytest.mark.parametrize("case", ["binary", "categorical"])
@pytest.mark.parametrize("differences", ["exact", "gradient"])
@pytest.mark.parametrize("parametrization", ["lsb1", "lsb2", "lsb2_min"])
def test_frozen_kernel_is_pi_invariant_and_matches_enumeration(case, differences, parametrization):
    build, kinds, log_pi_fn, first_order = CASES[case]
    model = build()
    rng = np.random.default_rng(zlib.crc32(f"{case}-{differences}-{parametrization}".encode()))
    with model:
        step = SelfBalancing(
            family=parametrization, differences=differences, n_particles=2, rng=rng
        )
    step.stop_tuning()
    scale = 2.0 if parametrization == "lsb1" else 0.8
    step.lsb_params = rng.normal(scale=scale, size=step.lsb_params.size)  # arbitrary, frozen
    states = enumerate_states(kinds)
    deltas_fn = first_order if differences == "gradient" else None
    log_g = independent_log_g(parametrization, step.lsb_params)
    T, log_pi = independent_kernel(states, log_pi_fn, kinds, log_g, deltas_fn)
    assert np.all(T >= -1e-15) and np.allclose(T.sum(1), 1.0)
    assert stationary_error(T, log_pi) < 1e-12
    # the step implements exactly this kernel
    np.testing.assert_allclose(slot_rows(step, states), T, atol=1e-12)
    # and the check has power: dropping the proposal ratio breaks invariance
    T_bad, _ = independent_kernel(states, log_pi_fn, kinds, log_g, deltas_fn, correct=False)
    assert stationary_error(T_bad, log_pi) > 1e-4


def test_first_order_differences_are_not_exact_on_the_test_models():
    """Otherwise the 'gradient' kernel tests would not test anything beyond the exact ones."""
    for case in CASES.values():
        _, kinds, log_pi_fn, first_order = case
        x = enumerate_states(kinds)[5]
        exact = []
        for mv in neighbour_moves(x, kinds):
            if mv is None:
                exact.append(np.nan)
                continue
            y = x.copy()
            y[mv[0]] = mv[1]
            exact.append(log_pi_fn(y) - log_pi_fn(x))
        exact = np.array(exact)
        ok = np.isfinite(exact)
        assert np.max(np.abs(exact[ok] - first_order(x)[ok])) > 0.1


# -- step-level frequencies through pm.sample -----------------------------------------------------
def exact_probabilities(model, name, states):
    logp = model.compile_logp()
    lp = np.array([logp({f"{name}": s.reshape(model.initial_point()[name].shape)}) for s in states])
    p = np.exp(lp - lp.max())
    return p / p.sum()


def test_sample_frequencies_coupled_binary_lsb2_exact():
    with pm.Model() as model:
        x = pm.Bernoulli("x", logit_p=np.array([0.5, -0.3, 0.0, 0.8, -1.0]), shape=5)
        s = 2 * x - 1
        pm.Potential("coupling", 0.8 * (s[1:] * s[:-1]).sum() + 0.5 * s[0] * s[4])
        step = SelfBalancing(
            [x], family="lsb2", n_particles=6, differences="exact", steps_per_draw=1
        )
        params_seen = []

        def callback(trace, draw):
            params_seen.append((draw.tuning, step.lsb_params.copy()))

        # 3,500 draws: the smallest state indicator's ESS 214 at 2,500, the floor 200
        idata = pm.sample(
            tune=200, draws=3500, step=step, chains=2, cores=1, random_seed=11,
            progressbar=False, compute_convergence_checks=False, callback=callback,
        )  # fmt: skip
    states = enumerate_states([("binary",)] * 5)
    probs = exact_probabilities(model, "x", states)
    z, crit = max_z_score(idata.posterior["x"].values, states, probs)
    assert z < crit, (z, crit)
    # parameters moved during tune, and were constant afterwards (per chain)
    for chain in range(2):
        seen = params_seen[chain * 3700 : (chain + 1) * 3700]
        tuned = [p for t, p in seen if t]
        frozen = [p for t, p in seen if not t]
        assert not np.allclose(tuned[0], tuned[-1])
        assert all(np.array_equal(p, frozen[0]) for p in frozen)
    loss = idata.sample_stats["lsb_loss"].values
    assert np.all(np.isnan(loss))  # no learning after tune


def test_sample_frequencies_potts_lsb1_first_order():
    model = potts_model((2, 2), n_states=3, coupling=0.6, field=np.array([0.4, 0.0, -0.3]))
    with model:
        step = SelfBalancing(family="lsb1", differences="gradient", n_particles=6)
        idata = pm.sample(
            tune=200, draws=1000, step=step, chains=2, cores=1, random_seed=12,
            progressbar=False, compute_convergence_checks=False, discard_tuned_samples=False,
        )  # fmt: skip
    states = enumerate_states([("cat", 3)] * 4)
    probs = exact_probabilities(model, "z", states)
    samples = idata.posterior["z"].values.reshape(2, -1, 4)
    z, crit = max_z_score(samples, states, probs)
    assert z < crit, (z, crit)
    ss = idata.sample_stats
    weights = np.stack([ss[f"lsb_weight_{k}"].values for k in ("sqrt", "barker", "min", "max")])
    np.testing.assert_allclose(weights.sum(0), 1.0)
    assert np.all(weights == weights[:, :, :1])  # frozen after tune
    warm = idata.warmup_sample_stats
    assert np.all(np.isfinite(warm["lsb_loss"].values))


def test_sample_frequencies_detect_a_wrong_target():
    """The frequency check has power: the same chains fail against a tempered target."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", logit_p=np.array([0.5, -0.3, 0.0, 0.8, -1.0]), shape=5)
        s = 2 * x - 1
        pm.Potential("coupling", 0.8 * (s[1:] * s[:-1]).sum())
        step = SelfBalancing(
            [x], family="lsb1", n_particles=3, differences="exact", steps_per_draw=1
        )
        # 3,500 draws: the smallest state indicator's ESS 230 at 2,500, the floor 200
        idata = pm.sample(
            tune=100, draws=3500, step=step, chains=2, cores=1, random_seed=13,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    states = enumerate_states([("binary",)] * 5)
    probs = exact_probabilities(model, "x", states)
    samples = idata.posterior["x"].values
    z, threshold = max_z_score(samples, states, probs)
    assert z < threshold, (z, threshold)
    ess = state_z_scores(samples, states, probs)[1]
    # the alternative: the same model without its coupling (a sampler that ignores the
    # Potential); the check must be well powered against it at the measured ESS (expected z at
    # least the threshold + 3, i.e. a miss probability below ~0.1%) and reject it
    with pm.Model() as uncoupled:
        pm.Bernoulli("x", logit_p=np.array([0.5, -0.3, 0.0, 0.8, -1.0]), shape=5)
    alt = exact_probabilities(uncoupled, "x", states)
    assert np.max(np.abs(probs - alt) / np.sqrt(alt * (1 - alt) / ess)) > threshold + 3
    assert max_z_score(samples, states, alt)[0] > threshold


# -- learning -------------------------------------------------------------------------------------
def chain_target(n=8, J=1.0, h=1.0):
    with pm.Model() as model:
        x = pm.Bernoulli("x", logit_p=2 * h * np.linspace(-1, 1, n), shape=n)
        s = 2 * x - 1
        pm.Potential("coupling", J * (s[1:] * s[:-1]).sum())
    return model


def exact_mutual_information(log_g, states, kinds, log_pi_fn) -> float:
    """I(x_t; x_t+1) of the stationary locally balanced chain with balancing ``log_g``."""
    T, log_pi = independent_kernel(states, log_pi_fn, kinds, log_g)
    p = np.exp(log_pi - log_pi.max())
    p /= p.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(T > 0, T * np.log(T / p[None, :]), 0.0)
    return float(p @ terms.sum(1))


def test_learning_moves_lsb1_towards_the_best_function():
    """sqrt has clearly the lowest mutual information of the four functions on this chain.

    (By enumeration: sqrt 0.971, max 1.180, barker 1.185, min 1.231 nats; the untuned equal-weight
    mixture 0.988.) Learning must raise sqrt's weight to the top, lower max's (the worst of the
    four here... after min) and end with a kernel whose exact mutual information is below that of
    every fixed base function: the point of learning g.
    """
    n, J, h = 8, 1.0, 1.0
    kinds = [("binary",)] * n
    model = chain_target(n, J, h)
    states = enumerate_states(kinds)
    hv = 2 * h * np.linspace(-1, 1, n)

    def log_pi_fn(x):
        s = 2 * x - 1
        return x @ hv + J * np.sum(s[1:] * s[:-1])

    fixed = {
        name: exact_mutual_information(
            lambda d, name=name: kernel_log_g(name, d), states, kinds, log_pi_fn
        )
        for name in ("sqrt", "barker", "min", "max")
    }
    assert min(fixed, key=fixed.get) == "sqrt" and sorted(fixed.values())[1] - fixed["sqrt"] > 0.1
    with model:
        step = SelfBalancing(
            family="lsb1",
            n_particles=10,
            rng=np.random.default_rng(3),
            differences="exact",
            steps_per_draw=1,
        )
    mi_before = exact_mutual_information(step.balancing_function, states, kinds, log_pi_fn)
    q = DictToArrayBijection.map({"x": model.initial_point()["x"]})
    for _ in range(300):
        q, _ = step.astep(q)
    step.stop_tuning()
    weights = step.parametrization.weights(step.lsb_params)
    mi_after = exact_mutual_information(step.balancing_function, states, kinds, log_pi_fn)
    assert np.argmax(weights) == 0 and weights[0] > 0.25 and weights[3] < 0.25, weights
    assert mi_after < min(fixed.values()) < mi_before, (mi_before, mi_after, fixed)


# -- accounting, state, pickling, reset -----------------------------------------------------------
def test_learning_batch_records_are_consistent():
    """Each record pairs a state's differences with the move proposed from that state."""
    model = chain_target(6)
    with model:
        step = SelfBalancing(
            n_particles=5, rng=np.random.default_rng(2), differences="exact", steps_per_draw=1
        )
    batches = []
    update = step.learner.update

    def spy(state, batch):
        batches.append(batch)
        return update(state, batch)

    step.learner.update = spy
    q = DictToArrayBijection.map({"x": model.initial_point()["x"]})
    for _ in range(30):
        q, _ = step.astep(q)
    assert len(batches) == 30
    for b in batches:
        assert b.deltas_x.shape == (5, 6)  # the 5 particles x 6 slots
        # exact differences: the move's log-ratio is the state's difference at the slot, and
        # the reverse difference at the proposal is its negative
        rows = np.arange(len(b.slot))
        np.testing.assert_allclose(b.dlogp, b.deltas_x[rows, b.slot], atol=1e-9)
        np.testing.assert_allclose(b.dlogp, -b.deltas_y[rows, b.reverse], atol=1e-9)


def test_logp_evals_include_the_particles(general_paths):
    """Tuning draws count the particles' evaluations; frozen draws cost what a fixed-g step's do."""
    model = chain_target(4)
    counts = {}
    for name, make in (
        ("lb", lambda: LocallyBalanced(steps_per_draw=2, differences="exact")),
        ("sb", lambda: SelfBalancing(n_particles=5, steps_per_draw=2, differences="exact")),
    ):
        with model:
            idata = pm.sample(
                tune=3, draws=3, step=make(), chains=1, cores=1, random_seed=1,
                progressbar=False, compute_convergence_checks=False, discard_tuned_samples=False,
            )  # fmt: skip
        counts[name] = (
            idata.warmup_sample_stats["logp_evals"].values.ravel(),
            idata.sample_stats["logp_evals"].values.ravel(),
        )
    per_call = 4 + 1  # exact differences: every neighbour and the state itself
    # the chain's draw (its start and 2 proposals), then one learning step (ceil(2 / 5)): the 5
    # particles evaluated at its start and at their proposals
    np.testing.assert_array_equal(counts["lb"][0], per_call * (1 + 2))
    np.testing.assert_array_equal(counts["sb"][0], per_call * (1 + 2 + 5 * 2))
    np.testing.assert_array_equal(counts["sb"][1], counts["lb"][1])
    assert np.all(counts["lb"][1] >= per_call * 2)


def _tuned_step(model, **kwargs):
    with model:
        step = SelfBalancing(
            rng=np.random.default_rng(7),
            n_particles=4,
            differences="exact",
            steps_per_draw=1,
            **kwargs,
        )
    q = DictToArrayBijection.map({"x": model.initial_point()["x"]})
    for _ in range(15):
        q, _ = step.astep(q)
    return step, q


@pytest.mark.parametrize("parametrization", ["lsb1", "lsb2"])
def test_sampling_state_round_trip_and_pickle(parametrization):
    model = chain_target(5)
    step, q = _tuned_step(model, family=parametrization)
    assert not np.allclose(step.lsb_params, step._initial_params)
    state = step.sampling_state
    with model:
        other = SelfBalancing(
            rng=np.random.default_rng(99),
            n_particles=4,
            family=parametrization,
            differences="exact",
            steps_per_draw=1,
        )
    other.sampling_state = state
    np.testing.assert_array_equal(other.lsb_params, step.lsb_params)
    np.testing.assert_array_equal(other.lsb_particles, step.lsb_particles)
    restored = cloudpickle.loads(cloudpickle.dumps(step))
    np.testing.assert_array_equal(restored.lsb_params, step.lsb_params)
    for s in (step, other, restored):  # same state and rng: identical continuations
        s.stop_tuning()
    outs = [s.astep(q) for s in (step, other, restored)]
    for q_s, stats_s in outs[1:]:
        np.testing.assert_array_equal(q_s.data, outs[0][0].data)
        assert stats_s[0]["accept"] == outs[0][1][0]["accept"]


def test_reset_tuning_restores_the_untuned_parameters():
    model = chain_target(5)
    step, _ = _tuned_step(model, family="lsb2")
    initial = step._initial_params.copy()
    step.stop_tuning()
    assert step.lsb_particles is not None and not np.allclose(step.lsb_params, initial)
    step.reset_tuning()
    assert step.tune and step.lsb_particles is None and step.lsb_adam_t == 0.0
    np.testing.assert_array_equal(step.lsb_params, initial)
    np.testing.assert_array_equal(step.balancing_function(np.array([-2.0, 3.0])), [-1.0, 1.5])


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"family": "lsb3"}, "Unknown parametrization 'lsb3'"),
        ({"learning_rate": 0.0}, "learning_rate must be a positive"),
        ({"learning_rate": -1e-3}, "learning_rate must be a positive"),
        ({"learning_rate": float("nan")}, "learning_rate must be a positive"),
        ({"n_particles": 0}, "n_particles must be a positive int"),
        ({"n_particles": -3}, "n_particles must be a positive int"),
        ({"n_particles": 2.5}, "n_particles must be a positive int"),
        ({"hidden": 0}, "hidden must be a positive int"),
        ({"learning_steps": 0}, "learning_steps must be a positive int"),
        ({"learning_steps": 1.5}, "learning_steps must be a positive int"),
        ({"particle_weights": "best"}, "particle_weights must be one of"),
        ({"differences": "second"}, "differences must be one of"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, match):
    with chain_target(3):
        with pytest.raises(ValueError, match=match):
            SelfBalancing(**kwargs)


def test_continuous_variables_are_rejected():
    with pm.Model():
        pm.Normal("mu")
        with pytest.raises(ValueError, match="continuous"):
            SelfBalancing()


def test_exact_and_gradient_chains_coincide_on_a_multilinear_model(general_paths):
    """On an Ising chain first-order differences are exact: same seed, same chain (both on the
    compiled kernel; exact differences would otherwise take the pairwise numba kernel, which
    draws its uniforms differently)."""
    model = chain_target(6)
    runs = []
    for kind in ("exact", "gradient"):
        with model:
            step = SelfBalancing(differences=kind, n_particles=3, rng=np.random.default_rng(4))
        q = DictToArrayBijection.map({"x": model.initial_point()["x"]})
        trace = []
        for _ in range(40):
            q, _ = step.astep(q)
            trace.append(q.data.copy())
        runs.append((np.array(trace), step.lsb_params.copy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-9, atol=1e-12)


# -- size guards (issue #14, item 8) --------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_particles": 10**7}, r"n_particles=10000000 is out of range"),
        ({"n_particles": MAX_PARTICLES + 1}, r"n_particles=100001 is out of range"),
        (
            {"family": "lsb2", "hidden": 10**6},
            r"would need about \d+\.\d GiB .*1000000 hidden units",
        ),
    ],
)
def test_out_of_range_sizes_are_refused_at_construction(kwargs, match):
    with chain_target(3):
        with pytest.raises(ValueError, match=match):
            SelfBalancing(**kwargs)


def test_particle_memory_bound_names_the_largest_count_that_fits():
    """100000 particles on a 200-site binary block: 8 B x 100001 x (16 x 200 + 2 x 200) = 2.9 GB."""
    assert learning_memory_bytes(10**5, 200, 200) == 8 * (10**5 + 1) * (16 * 200 + 2 * 200)
    with pm.Model():
        pm.Bernoulli("x", 0.5, shape=200)
        with pytest.raises(ValueError, match=r"2\.7 GiB .*use n_particles <= (\d+)") as err:
            SelfBalancing(n_particles=10**5)
        fits = int(re.search(r"n_particles <= (\d+)", str(err.value)).group(1))
        assert learning_memory_bytes(fits, 200, 200) <= MAX_LEARNING_BYTES
        assert learning_memory_bytes(fits + 1, 200, 200) > MAX_LEARNING_BYTES
        assert SelfBalancing(n_particles=fits).n_particles == fits  # the advice is accepted


def test_sizes_within_range_are_accepted():
    with chain_target(3):
        # lsb1 has no network: hidden is ignored, whatever its size
        assert SelfBalancing(hidden=10**6).n_particles == 30
        assert SelfBalancing(family="lsb2", hidden=1000, n_particles=10**4)
