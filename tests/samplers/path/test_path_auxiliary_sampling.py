"""PathAuxiliaryLBP through ``pm.sample``: exactness with tuned-then-frozen R, adaptation, API.

Statistical checks compare Monte Carlo means of indicator statistics with exact expectations
(full enumeration) using z-scores ``(mean - exact) / MCSE``, with ArviZ's MCSE (it accounts for
autocorrelation and for the chains). The threshold is the two-sided normal quantile of a
family-wise false-alarm rate of 1e-3 with a Bonferroni correction over the statistics, so it
follows from the number of statistics, not from trial runs. Every such test also checks its
power: the same draws must reject the expectations of a perturbed model.
"""

from __future__ import annotations

import itertools
import warnings

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_lbp
from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.samplers.path.adaptation import PathLengthAdaptation
from tests.helpers.ess import checked_mcse

FAMILY_ALPHA = 1e-3


def z_threshold(n_stats: int) -> float:
    return float(stats.norm.isf(FAMILY_ALPHA / (2 * n_stats)))


def z_scores(samples: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """z-scores of the means of ``samples`` (chain, draw, stat) against ``exact`` (stat,), each
    MCSE from an ESS of at least MIN_ESS (asserted)."""
    means = samples.mean(axis=(0, 1))
    mcse = np.array(
        [checked_mcse(samples[..., k], f"statistic {k}") for k in range(samples.shape[-1])]
    )
    return (means - exact) / mcse


def assert_frozen_scale(idata):
    """After tuning the scale U is constant (per chain: each chain tunes its own) and every
    step's R is 1 (single-site steps), floor(U) or ceil(U) (path steps)."""
    u = idata.sample_stats.path_scale.values
    r = idata.sample_stats.mean_path_length.values
    assert np.all(u == u[:, :1]) and u.min() >= 1
    assert np.all((r == 1) | (r == np.floor(u)) | (r == np.ceil(u)))


def sample(model, step, *, draws, tune, seed, chains=2, **kwargs):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return pm.sample(
            draws=draws,
            tune=tune,
            step=step,
            chains=chains,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **kwargs,
        )


# ----------------------------------------------------------------------------- binary, coupled
N_B = 8
_rng = np.random.default_rng(7)
H_B = _rng.normal(0, 0.7, N_B)
# a ring with strong couplings plus weak long-range ones: a coupled, non-product target
J_B = np.triu(_rng.normal(0, 0.3, (N_B, N_B)), 2)
for i in range(N_B):
    J_B[min(i, (i + 1) % N_B), max(i, (i + 1) % N_B)] = 1.2


def binary_logp_table(J):
    states = np.array(list(itertools.product(range(2), repeat=N_B)), dtype=float)
    lp = states @ H_B + np.einsum("si,ij,sj->s", states, J, states)
    p = np.exp(lp - lp.max())
    return states, p / p.sum()


def binary_stats(x):
    """Indicators: every site, and every ring-neighbour pair both on."""
    ring = x * np.roll(x, -1, axis=-1)
    return np.concatenate([x, ring], axis=-1)


def test_visit_frequencies_binary_adaptive():
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=N_B)
        xf = pt.cast(x, "float64")
        pm.Potential("pot", pt.dot(H_B, xf) + pt.dot(xf, pt.dot(J_B, xf)))
    step = PathAuxiliaryLBP([x], model=model, steps_per_draw=1)
    idata = sample(model, step, draws=3000, tune=600, seed=11)
    assert step.differences_kind == "gradient"
    assert_frozen_scale(idata)
    draws = idata.posterior["x"].values.astype(float)
    samples = binary_stats(draws)
    states, p = binary_logp_table(J_B)
    exact = p @ binary_stats(states)
    crit = z_threshold(samples.shape[-1])
    z = z_scores(samples, exact)
    assert np.max(np.abs(z)) < crit, z
    # power: the expectations of a model with weaker ring couplings are rejected
    _, p_bad = binary_logp_table(J_B * 0.75)
    assert np.max(np.abs(z_scores(samples, p_bad @ binary_stats(states)))) > crit


# ----------------------------------------------------------------------------- Potts
K_P = 3
ROWS, COLS = 2, 3
EDGES = [(r * COLS + c, r * COLS + c + 1) for r in range(ROWS) for c in range(COLS - 1)] + [
    (r * COLS + c, (r + 1) * COLS + c) for r in range(ROWS - 1) for c in range(COLS)
]
H_P = np.random.default_rng(3).normal(0, 0.6, (ROWS * COLS, K_P))


def potts_table(beta):
    states = np.array(list(itertools.product(range(K_P), repeat=ROWS * COLS)))
    lp = H_P[np.arange(ROWS * COLS), states].sum(axis=1)
    for a, b in EDGES:
        lp = lp + beta * (states[:, a] == states[:, b])
    p = np.exp(lp - lp.max())
    return states, p / p.sum()


def potts_stats(x):
    onehot = (x[..., None] == np.arange(K_P)).reshape(*x.shape[:-1], -1)
    agree = np.stack([x[..., a] == x[..., b] for a, b in EDGES], axis=-1)
    return np.concatenate([onehot, agree], axis=-1).astype(float)


def test_visit_frequencies_potts_adaptive():
    beta = 1.0
    with pm.Model() as model:
        z = pm.Categorical("z", p=np.ones(K_P) / K_P, shape=ROWS * COLS)
        pot = pt.sum(pt.as_tensor(H_P)[np.arange(ROWS * COLS), z])
        for a, b in EDGES:
            pot = pot + beta * pt.eq(z[a], z[b])
        pm.Potential("pot", pot)
    step = PathAuxiliaryLBP([z], model=model, steps_per_draw=1)
    idata = sample(model, step, draws=3000, tune=600, seed=12)
    assert_frozen_scale(idata)
    samples = potts_stats(idata.posterior["z"].values)
    states, p = potts_table(beta)
    exact = p @ potts_stats(states)
    crit = z_threshold(samples.shape[-1])
    assert np.max(np.abs(z_scores(samples, exact))) < crit
    _, p_bad = potts_table(0.7 * beta)
    assert np.max(np.abs(z_scores(samples, p_bad @ potts_stats(states)))) > crit


# ----------------------------------------------------------------------------- mixed with NUTS
A_MIX = 0.8
Y_MIX = np.array([2.1, 3.4, 1.2, 2.8, 3.9])
N_Z = 4


def mixed_exact(a):
    """p(z | y) and E[mu | y] with mu ~ N(0, 1) integrated out (Gaussian conjugacy)."""
    n = Y_MIX.size
    cov = np.eye(n) + np.ones((n, n))
    prec = np.linalg.inv(cov)
    states = np.array(list(itertools.product(range(2), repeat=N_Z)), dtype=float)
    s = states.sum(axis=1)
    resid = Y_MIX[None, :] - a * s[:, None]
    lp = -0.5 * np.einsum("si,ij,sj->s", resid, prec, resid) + s * np.log(0.3 / 0.7)
    p = np.exp(lp - lp.max())
    p /= p.sum()
    mu_mean = p @ (resid.sum(axis=1) / (n + 1))
    return states, p, mu_mean


def test_mixed_model_with_nuts():
    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.3, shape=N_Z)
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu + A_MIX * pt.sum(z), 1.0, observed=Y_MIX)
    step = [PathAuxiliaryLBP([z], model=model, steps_per_draw=1), pm.NUTS([mu], model=model)]
    idata = sample(model, step, draws=1500, tune=500, seed=13)
    zs = idata.posterior["z"].values.astype(float)
    mus = idata.posterior["mu"].values
    states, p, mu_mean = mixed_exact(A_MIX)
    nz = zs.sum(axis=-1)
    samples = np.concatenate(
        [zs, (nz[..., None] == np.arange(N_Z + 1)).astype(float), mus[..., None]], axis=-1
    )
    counts = states.sum(axis=1)
    exact = np.concatenate([p @ states, [(p * (counts == k)).sum() for k in range(N_Z + 1)]])
    exact = np.append(exact, mu_mean)
    keep = np.append((exact[:-1] > 0.01) & (exact[:-1] < 0.99), True)
    crit = z_threshold(int(keep.sum()))
    assert np.max(np.abs(z_scores(samples[..., keep], exact[keep]))) < crit
    _, p_bad, mu_bad = mixed_exact(1.3 * A_MIX)
    bad = np.append(
        np.concatenate([p_bad @ states, [(p_bad * (counts == k)).sum() for k in range(N_Z + 1)]]),
        mu_bad,
    )
    assert np.max(np.abs(z_scores(samples[..., keep], bad[keep]))) > crit


# ----------------------------------------------------------------------------- adaptation
def product_model(d, seed=0):
    p = np.where(np.random.default_rng(seed).random(d) < 0.5, 0.15, 0.85)
    with pm.Model() as model:
        pm.Bernoulli("x", p=p, shape=d)
    return model


def test_adaptation_reaches_target_and_freezes():
    """On a large product model R grows from 1, moves during tune, is frozen after, and the
    realised acceptance of the path steps is near the target; the single-site steps (R = 1,
    told apart from path steps because U > 10) make up the share 0.1.

    Tolerance: 4 MCSE of the mean acceptance over the draws, plus 0.03 for the adaptation error.
    At the end of tuning (t ~ 1500) the gain is ~(1500)^-0.6 ~ 0.012; with acceptance variance
    ~0.1 and slope |da/dlog U| ~ 0.5 the stationary sd of log U is ~sqrt(0.012 * 0.1 / 1) ~ 0.035,
    i.e. ~0.02 in acceptance before averaging; rounding R (~100) to an integer adds < 0.005.
    """
    model = product_model(400)
    step = PathAuxiliaryLBP(model=model, target_accept=0.574, steps_per_draw=1)
    idata = sample(model, step, draws=800, tune=1500, seed=3, discard_tuned_samples=False)
    warm = idata.warmup_sample_stats.path_scale.values
    assert warm[:, 0].max() <= 2  # starts at U = 1 (then doubles)
    assert len(np.unique(warm)) > 10  # moves during tune
    assert_frozen_scale(idata)
    u = idata.sample_stats.path_scale.values[:, 0]
    assert u.min() > 10
    r = idata.sample_stats.mean_path_length.values
    single = r == 1
    # the single-site share: binomial, 4 standard errors
    assert abs(single.mean() - 0.1) < 4 * np.sqrt(0.1 * 0.9 / single.size)
    # unbiased rounding in the path steps: mean R per chain = U within 4 binomial SEs
    for c in range(r.shape[0]):
        path_r = r[c][~single[c]]
        frac = u[c] - np.floor(u[c])
        se = np.sqrt(frac * (1 - frac) / path_r.size)
        assert abs(path_r.mean() - u[c]) <= 4 * se + 1e-12
    # the tuning targets the path steps' acceptance; chain-wise series of path steps for MCSE
    accept = idata.sample_stats.accept.values
    n = int((~single).sum(axis=1).min())
    path_accept = np.stack([accept[c][~single[c]][:n] for c in range(accept.shape[0])])
    mcse = checked_mcse(path_accept, "path steps' acceptance")
    assert abs(path_accept.mean() - 0.574) < 4 * mcse + 0.03, (path_accept.mean(), mcse)
    # EJD is the efficiency measure: far above single-site LBP's (<= 1 per step)
    jumps = idata.sample_stats.sites_changed.values
    assert jumps.mean() > 10
    np.testing.assert_array_equal(idata.sample_stats.sites_moved_per_step.values, jumps)


def test_lower_target_gives_longer_paths():
    model = product_model(200, seed=1)
    lengths = []
    for target in (0.8, 0.3):
        step = PathAuxiliaryLBP(model=model, target_accept=target, steps_per_draw=1)
        idata = sample(model, step, draws=50, tune=800, seed=4, chains=1)
        lengths.append(float(idata.sample_stats.path_scale.values[0, 0]))
    assert lengths[1] > 1.5 * lengths[0]


def test_unbiased_rounding_in_steps():
    """With the scale held at U = 3.3 (zero gain), a share 0.1 of the tuning steps are
    single-site steps, the others have mean R = U, and only those update the adaptation: one
    tuning draw of 4000 steps of the compiled kernel, its lengths and updates counted exactly
    from the same noise (the path steps' R by the rule of the reference)."""
    import copy

    from pymc_lbp.samplers.path.reference import path_length

    model = product_model(50)
    step = PathAuxiliaryLBP(
        model=model, rng=np.random.default_rng(0), steps_per_draw=1, differences="gradient"
    )
    assert not step.pairwise_ready()  # the compiled kernel, not numba's
    step.adaptation = PathLengthAdaptation(0.574, 50, gamma0=0.0)
    step.path_log_u = float(np.log(3.3))
    step.path_doubling = False
    x = np.zeros(50, dtype=np.int64)
    logp, deltas = step.differences(x)
    noise = step.path_kernel.draw_noise(copy.deepcopy(step.rng), 4000)
    res = step.run_steps(x, logp, deltas, 4000)
    lengths = np.array([path_length(u[0], u[1], 3.3, 0.1, 50)[0] for u in noise])
    single = noise[:, 0] < 0.1
    assert res.extras["mean_path_length"] == [lengths.mean()]
    assert step.path_adapt_count == np.count_nonzero(~single)  # single-site steps do not adapt
    assert np.all(lengths[single] == 1) and set(np.unique(lengths[~single])) == {3, 4}
    assert abs(single.mean() - 0.1) < 4 * np.sqrt(0.1 * 0.9 / single.size)
    path = lengths[~single]
    assert abs(path.mean() - 3.3) < 4 * np.sqrt(0.3 * 0.7 / path.size)


def test_reset_tuning_and_sampling_state_round_trip():
    model = product_model(100)
    step = PathAuxiliaryLBP(model=model, rng=np.random.default_rng(1), steps_per_draw=1)
    fresh = step.sampling_state
    sample(model, step, draws=20, tune=200, seed=5, chains=1)
    assert step.path_scale > 1 and not step.tune and not step.path_doubling
    tuned = step.sampling_state
    assert tuned.path_log_u == step.path_log_u
    step.reset_tuning()
    assert step.tune and step.path_scale == 1 and step.path_adapt_count == 0
    assert step.path_doubling and step.path_log_u == fresh.path_log_u
    step.sampling_state = tuned
    assert step.path_log_u == tuned.path_log_u and not step.tune
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    assert clone.path_scale == step.path_scale


def test_fixed_path_scale_is_constant_and_reported():
    """path_scale=7: every path step has R = 7, mixed with single-site steps (R = 1); the
    draw's stat is the mean over its 3 steps; the scale is reported exactly."""
    model = product_model(60)
    step = PathAuxiliaryLBP(model=model, path_scale=7, steps_per_draw=3)
    idata = sample(model, step, draws=100, tune=30, seed=6, chains=1, discard_tuned_samples=False)
    for group in (idata.warmup_sample_stats, idata.sample_stats):
        r = group.mean_path_length.values
        assert set(np.unique(r)) <= {1, 3, 5, 7}  # means of three values in {1, 7}
    r = idata.sample_stats.mean_path_length.values
    n_steps = 3 * r.size
    se = 6 * np.sqrt(0.1 * 0.9 / n_steps)  # R = 1 + 6 * Bernoulli(0.9)
    assert abs(r.mean() - (0.1 + 0.9 * 7)) < 4 * se
    assert np.all(idata.sample_stats.path_scale.values == 7)
    # a product of Bernoullis is a pairwise binary block (without couplings): exact differences
    assert idata.sample_stats.exact_differences.values.all()
    for name in step.stats_dtypes_shapes:
        if name != "tune":  # ArviZ drops it (tuning draws are the warmup groups)
            assert {"model_logp": "lp"}.get(name, name) in idata.sample_stats


# ----------------------------------------------------------------------------- robustness
def test_fewer_movable_sites_than_path_stays_put():
    """Zero-probability neighbours are never proposed; a path longer than the movable sites is
    no proposal at all (the chain stays and the step reports acceptance 0), while the
    single-site steps still move the movable sites."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=3, initval=np.zeros(3, dtype=int))
        pm.Potential("forbid", pt.switch(pt.gt(x[0], 0), -np.inf, 0.0))
    step = PathAuxiliaryLBP([x], model=model, path_scale=3, differences="exact", steps_per_draw=1)
    idata = sample(model, step, draws=200, tune=0, seed=1, chains=1)
    assert np.all(idata.posterior["x"].values[..., 0] == 0)
    path_steps = idata.sample_stats.mean_path_length.values == 3
    assert path_steps.any() and (~path_steps).any()
    assert np.all(idata.sample_stats.accept.values[path_steps] == 0)
    assert idata.sample_stats.n_accepted.values[~path_steps].any()
    step2 = PathAuxiliaryLBP(
        [x], model=model, path_scale=2, steps_per_draw=1
    )  # first-order, floored log 0
    idata = sample(model, step2, draws=200, tune=0, seed=1, chains=1)
    assert np.all(idata.posterior["x"].values[..., 0] == 0)
    assert idata.sample_stats.n_accepted.values.mean() > 0.3


PARITY_P = np.array([0.2, 0.7, 0.4, 0.9, 0.3, 0.6, 0.5, 0.8])


@pytest.mark.parametrize("path_scale", [2, 2.0, None])
def test_parity_changes_for_every_path_scale(path_scale):
    """path_scale=2 and 2.0 mean the same (every path step has R = 2) and the single-site
    steps change the parity of the number of ones: P(sum even) is right, by MCSE z-score. Before
    the fix 2.0 gave R = 2 on every step without a warning and the parity never changed (so this
    test failed); the tuned sampler (None) is checked the same way."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=PARITY_P, shape=PARITY_P.size, initval=np.zeros(8, dtype=int))
    step = PathAuxiliaryLBP([x], model=model, path_scale=path_scale, steps_per_draw=1)
    idata = sample(model, step, draws=1500, tune=300, seed=3)
    even = (idata.posterior["x"].values.sum(axis=-1) % 2 == 0).astype(float)
    exact = 0.5 * (1 + np.prod(1 - 2 * PARITY_P))
    z = (even.mean() - exact) / checked_mcse(even, "parity")
    assert abs(z) < z_threshold(1), (even.mean(), exact, z)


def test_int_and_float_path_scale_are_one_setting():
    """3 and 3.0 build the same kernel: with the same seed the draws are identical."""
    model = product_model(12)
    runs = []
    for path_scale in (3, 3.0, np.int64(3)):
        step = PathAuxiliaryLBP(model=model, path_scale=path_scale, steps_per_draw=1)
        assert step.path_scale == 3.0 and step.fixed_path_scale == 3.0
        runs.append(sample(model, step, draws=100, tune=20, seed=8, chains=1).posterior["x"])
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].values, other.values)


def test_near_deterministic_posterior_is_not_trapped():
    """Issue #14: each of 5 sites is known to within ~e^-18 (observed +-3 with unit noise), so
    the posterior is the mode up to delta < 1e-6 (exact enumeration of the 32 states). Before the
    fix the tuning froze U near 2.2 and the chains sat one site from the mode with 0% of the
    draws at it (P(z=1) = [0.91 0.75 0.15 0.06 0.56] in the issue's run).

    Threshold: for a stationary chain the expected fraction of draws off the mode is delta, so
    by Markov's inequality P(fraction off the mode > 0.01) <= 100 delta < 1e-4; every marginal
    is then within 0.01 + delta of the exact one. (From any start the chain reaches the mode in
    a few steps: see the hitting times in test_path_auxiliary_kernel.py; tuning is 300 steps.)
    """
    rng = np.random.default_rng(1)
    datasets = [
        np.where(np.array([1, 1, 0, 0, 1]) == 1, 3.0, -3.0) + rng.normal(0, 0.3, 5)
        for _ in range(4)
    ]
    states = np.array(list(itertools.product(range(2), repeat=5)))
    for y in (datasets[1], datasets[3]):  # the two data sets that trapped the old sampler
        lp = -0.5 * ((y - np.where(states == 1, 3.0, -3.0)) ** 2).sum(axis=1)
        p = np.exp(lp - lp.max())
        p /= p.sum()
        delta = 1.0 - p.max()
        assert delta < 1e-6
        exact = p @ states
        with pm.Model() as model:
            z = pm.Bernoulli("z", 0.5, shape=5)
            pm.Normal("y", pt.switch(z, 3.0, -3.0), 1.0, observed=y)
        step = PathAuxiliaryLBP([z], model=model, steps_per_draw=1)
        idata = sample(model, step, draws=300, tune=300, seed=3, chains=2)
        zs = idata.posterior["z"].values
        off_mode = np.any(zs != states[np.argmax(p)], axis=-1).mean()
        assert off_mode <= 0.01, off_mode
        np.testing.assert_allclose(zs.mean(axis=(0, 1)), exact, atol=0.01 + delta)


def test_bad_inputs():
    model = product_model(5)
    for bad in (0.0, 1.0, -0.2, 1.5, "high", True):
        with pytest.raises(ValueError, match="target_accept"):
            PathAuxiliaryLBP(model=model, target_accept=bad)
    for bad in (0, -3, 0.5, "2", True, np.inf, np.nan):
        with pytest.raises(ValueError, match="path_scale"):
            PathAuxiliaryLBP(model=model, path_scale=bad)
    for bad in (0, 0.0, 1, 1.0, -0.1, 1.5, "0.1", True, None):
        with pytest.raises(ValueError, match="single_site_share"):
            PathAuxiliaryLBP(model=model, single_site_share=bad)
    with pytest.raises(ValueError, match="larger than the block"):
        PathAuxiliaryLBP(model=model, path_scale=5.5)
    with pytest.raises(ValueError, match="larger than the block"):
        PathAuxiliaryLBP(model=model, path_scale=6)
    with pytest.raises(ValueError, match="initial_path_scale"):
        PathAuxiliaryLBP(model=model, initial_path_scale=0.5)
    with pytest.raises(ValueError, match="balancing"):
        PathAuxiliaryLBP(model=model, balancing="cubic")
    with pm.Model() as mixed:
        pm.Bernoulli("b", 0.5, shape=2)
        mu = pm.Normal("mu")
    with pytest.raises(ValueError, match="continuous"):
        PathAuxiliaryLBP([mu], model=mixed)


def test_registered_auto_assignment_and_options():
    model = product_model(30)
    try:
        pymc_lbp.register(PathAuxiliaryLBP)
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            idata = pm.sample(
                draws=20,
                tune=10,
                chains=1,
                progressbar=False,
                compute_convergence_checks=False,
                random_seed=1,
                path_auxiliary_lbp={"path_scale": 5, "steps_per_draw": 1},
            )
    finally:
        pymc_lbp.unregister()
    assert set(np.unique(idata.sample_stats.mean_path_length.values)) <= {1, 5}
    assert np.all(idata.sample_stats.path_scale.values == 5)
