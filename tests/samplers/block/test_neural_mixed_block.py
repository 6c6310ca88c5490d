"""NeuralMixedBlock and the flag-value motif (issue #12.3, #12.5: mixed blocks).

Checked here:

* the training target's exact draws follow its density (flag frequencies and the
  Dvoretzky-Kiefer-Wolfowitz bound on the CDF of the value), and the density integrates to 1;
* the step's one-pair transition keeps the exact posterior of a conjugate toy model stationary:
  from exact posterior draws, one step gives the enumerated flag probabilities and the closed-form
  conditional moments of the value, with the shipped proposal and with an untrained one (whose
  proposals are poor, so the MH correction is what makes it right); with the proposal terms
  dropped from the ratio the same check fails (the check can fail);
* through ``pm.sample`` next to NUTS, two pairs match the closed-form posterior;
* bad input is refused at construction with specific messages; the step pickles.
"""

from __future__ import annotations

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from scipy.stats import multivariate_normal

import pymc_lbp.samplers.block.step_mixed as nmb
from pymc_lbp import NeuralProposal, load_proposal
from pymc_lbp.samplers.block.motifs.flag_value import (
    HALF_WIDTH,
    draw_from_target,
    flag_value_log_density,
    flag_value_motif,
    flag_value_samples,
)
from pymc_lbp.samplers.block.step_mixed import NeuralMixedBlock
from tests.helpers.backends import OTHER_BACKENDS, modes
from tests.helpers.ess import checked_ess

Y = np.array([1.3, 0.7, 1.9])
P_ON, PRIOR_SD = 0.4, 2.0


def test_target_draws_follow_the_target_density():
    rng = np.random.default_rng(0)
    _, _, params = flag_value_samples(rng, 6, 32)
    n = 20000
    # DKW: P(sup |F_n - F| > eps) <= 2 exp(-2 n eps^2); eps for a 1e-4 bound at this n
    t_grid = np.linspace(-HALF_WIDTH, HALF_WIDTH, 20001)
    for row in params:
        p = np.repeat(row[None], t_grid.size, axis=0)
        dens = [np.exp(flag_value_log_density(p, np.full(t_grid.size, f), t_grid)) for f in (0, 1)]
        mass = [np.trapezoid(d, t_grid) for d in dens]
        assert abs(sum(mass) - 1.0) < 1e-4
        x = draw_from_target(rng, np.repeat(row[None], n, axis=0))
        on = x[:, 0] == 1
        se = np.sqrt(mass[1] * (1 - mass[1]) / n)
        assert abs(on.mean() - mass[1]) < 4.5 * se + 1e-12
        for f in (0, 1):
            sel = x[x[:, 0] == f, 1]
            if sel.size < 500:
                continue
            cdf = np.cumsum(dens[f])
            cdf /= cdf[-1]
            emp = np.searchsorted(np.sort(sel), t_grid, side="right") / sel.size
            eps = np.sqrt(np.log(2 / 1e-4) / (2 * sel.size))
            assert np.max(np.abs(emp - cdf)) < eps + 1e-3


def toy_model():
    """b ~ Bernoulli(P_ON), v ~ N(0, PRIOR_SD^2), y_i ~ N(b v, 1): a conjugate flag-value pair."""
    with pm.Model() as model:
        b = pm.Bernoulli("b", P_ON)
        v = pm.Normal("v", 0.0, PRIOR_SD)
        pm.Normal("y", b * v, 1.0, observed=Y)
    return model, b, v


def toy_posterior():
    """Exact p(b = 1 | y) and the Gaussian v | b, y for each flag."""
    n = Y.size
    lik0 = multivariate_normal(np.zeros(n), np.eye(n)).logpdf(Y)
    lik1 = multivariate_normal(np.zeros(n), np.eye(n) + PRIOR_SD**2).logpdf(Y)
    log_odds = np.log(P_ON / (1 - P_ON)) + lik1 - lik0
    p1 = 1 / (1 + np.exp(-log_odds))
    prec = 1 / PRIOR_SD**2 + n
    return p1, {0: (0.0, PRIOR_SD), 1: (Y.sum() / prec, prec**-0.5)}


def one_step_from_stationarity(step, n, rng):
    """Apply one pair update to ``n`` exact posterior draws; returns the new (b, v) rows."""
    p1, cond = toy_posterior()
    out = np.empty((n, 2))
    for i in range(n):
        b = int(rng.random() < p1)
        m, s = cond[b]
        q = np.array([b, m + s * rng.standard_normal()])
        q, *_ = step.pair_update(q, float(step._logp_fn(q)), 0)
        out[i] = q
    return out


def stationarity_z_scores(out):
    """z-scores of the flag frequency and the conditional mean and variance of v per flag."""
    p1, cond = toy_posterior()
    n = out.shape[0]
    on = out[:, 0] == 1
    z = [(on.mean() - p1) / np.sqrt(p1 * (1 - p1) / n)]
    for f in (0, 1):
        v = out[out[:, 0] == f, 1]
        m, s = cond[f]
        z.append((v.mean() - m) / (s / np.sqrt(v.size)))
        z.append((np.mean((v - m) ** 2) - s**2) / (s**2 * np.sqrt(2 / v.size)))
    return np.array(z)


@pytest.mark.parametrize("which", ["shipped", "untrained"])
def test_one_step_keeps_the_exact_posterior(which):
    model, b, v = toy_model()
    proposal = (
        load_proposal("flag-value-g32")
        if which == "shipped"
        else NeuralProposal.create(flag_value_motif(32), n_components=3, hidden=16, seed=5)
    )
    with model:
        step = NeuralMixedBlock([b, v], proposal=proposal, rng=np.random.default_rng(1))
    # the shipped proposal's network is the cost of each update: fewer outputs (the z-scores'
    # scale follows n; the untrained proposal, the harder case for the MH correction, keeps 3000)
    n = 1500 if which == "shipped" else 3000
    out = one_step_from_stationarity(step, n, np.random.default_rng(2))
    z = stationarity_z_scores(out)
    # five z-scores of independent one-step outputs; 4.5 sd: a false alarm ~ 3e-5
    assert np.all(np.abs(z) < 4.5), z
    # the step moves: most outputs differ from their inputs' flags or values
    assert np.mean(np.abs(np.diff(out[:, 1]))) > 0


def test_dropping_the_proposal_terms_is_detected(monkeypatch):
    """Without q(x)/q(y) the kernel targets pi x q; the same check must fail."""
    model, b, v = toy_model()
    proposal = NeuralProposal.create(flag_value_motif(32), n_components=3, hidden=16, seed=5)
    with model:
        step = NeuralMixedBlock([b, v], proposal=proposal, rng=np.random.default_rng(1))

    def without_q(logp_x, logp_y, log_q_x, log_q_y):
        return float(logp_y - logp_x) if np.isfinite(logp_y) else -np.inf

    monkeypatch.setattr(nmb, "flag_value_log_ratio", without_q)
    out = one_step_from_stationarity(step, 3000, np.random.default_rng(2))
    assert np.max(np.abs(stationarity_z_scores(out))) > 4.5


def test_pm_sample_matches_the_closed_form_posterior():
    """Two pairs y_i ~ N(b1 v1 + b2 v2, 1): p(b | y) and E[v_k | y] in closed form."""
    n = Y.size
    with pm.Model():
        b = pm.Bernoulli("b", P_ON, shape=2)
        v = pm.Normal("v", 0.0, PRIOR_SD, shape=2)
        pm.Normal("y", b[0] * v[0] + b[1] * v[1], 1.0, observed=Y)
        idata = pm.sample(
            400,  # the standard errors come from each quantity's ESS, checked to be >= 200
            tune=200,
            chains=2,
            cores=1,
            step=[NeuralMixedBlock([b, v]), pm.NUTS([v])],
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    configs = [(0, 0), (0, 1), (1, 0), (1, 1)]
    log_post, mean_v = [], []
    for c in configs:
        k = sum(c)
        cov = np.eye(n) + PRIOR_SD**2 * k
        log_post.append(
            sum(np.log(P_ON if ci else 1 - P_ON) for ci in c)
            + multivariate_normal(np.zeros(n), cov).logpdf(Y)
        )
        gain = PRIOR_SD**2 * np.ones(n) @ np.linalg.solve(cov, Y)
        mean_v.append([gain * ci for ci in c])
    post = np.exp(np.array(log_post) - np.logaddexp.reduce(log_post))
    bs = idata.posterior["b"].values.reshape(-1, 2)
    vs = idata.posterior["v"].values.reshape(-1, 2)
    code = bs[:, 0] * 2 + bs[:, 1]
    for j, p in enumerate(post):
        ind = (idata.posterior["b"].values[..., 0] * 2 + idata.posterior["b"].values[..., 1]) == j
        ess = checked_ess(ind, f"b = state {j}", method="bulk")
        se = np.sqrt(p * (1 - p) / ess)
        assert abs(np.mean(code == j) - p) < 4.5 * se + 0.005, (j, np.mean(code == j), p)
    exact_mean_v = post @ np.array(mean_v)
    for k in range(2):
        ess = checked_ess(idata.posterior["v"].values[..., k], f"v[{k}]", method="bulk")
        se = np.std(vs[:, k]) / np.sqrt(ess)
        assert abs(vs[:, k].mean() - exact_mean_v[k]) < 4.5 * se, (k, vs[:, k].mean())
    assert idata.sample_stats["accept"].mean() > 0.3
    # the stats the other samplers have too (issue #26.4): entries moved, no gradients
    jumps = idata.sample_stats["sites_changed"].values
    assert jumps.min() >= 0 and jumps.max() <= 4 and jumps.mean() > 0
    assert (idata.sample_stats["grad_evals"].values == 0).all()


def test_bad_input_is_refused():
    with pm.Model():
        b = pm.Bernoulli("b", 0.5, shape=3)
        v = pm.Normal("v", 0, 1, shape=3)
        w = pm.Normal("w", 0, 1, shape=2)
        c = pm.Categorical("c", [0.2, 0.3, 0.5], shape=3)
        with pytest.raises(ValueError, match="needs vars"):
            NeuralMixedBlock(None)
        with pytest.raises(ValueError, match="exactly two variables"):
            NeuralMixedBlock([b])
        with pytest.raises(ValueError, match="one Bernoulli variable and one continuous"):
            NeuralMixedBlock([c, v])
        with pytest.raises(ValueError, match="sizes must match"):
            NeuralMixedBlock([b, w])
        with pytest.raises(ValueError, match="needs a flag-value proposal"):
            NeuralMixedBlock([b, v], proposal="chain-k2-b4")
        with pytest.raises(ValueError, match="scale must be positive"):
            NeuralMixedBlock([b, v], scale=0.0)
        with pytest.raises(ValueError, match="one entry per pair"):
            NeuralMixedBlock([b, v], loc=[0.0, 1.0])
        with pytest.raises(ValueError, match="steps_per_draw must be a positive int"):
            NeuralMixedBlock([b, v], steps_per_draw=0)


def test_default_grid_from_the_prior_and_pickling():
    with pm.Model():
        b = pm.Bernoulli("b", 0.5, shape=2)
        v = pm.Normal("v", 5.0, 2.0, shape=2)
        pm.Normal("y", (b * v).sum(), 1.0, observed=[4.0])
        step = NeuralMixedBlock([b, v])
    np.testing.assert_allclose(step.loc, 5.0, atol=0.3)
    # central 99% of N(5, 2) is +-2.576 sd: scale = 2 * 2.576 * 2 / 6
    np.testing.assert_allclose(step.scale, 2 * 2.576 * 2.0 / 6, rtol=0.1)
    back = cloudpickle.loads(cloudpickle.dumps(step))  # as pm.sample(cores > 1)
    q = np.array([1.0, 0.0, 4.0, 5.0])
    new, lp, prob, _ = back.pair_update(q, float(back._logp_fn(q)), 0)
    assert np.isfinite(lp) and 0 <= prob <= 1 and new.shape == q.shape


def test_gmm_example_finds_the_clusters(tmp_path):
    """examples/gmm_neural_mixed_block.py --quick: from one active component the chains find the
    three clusters (the posterior mode of the count is 3, active means sit on the clusters)."""
    from examples import gmm_neural_mixed_block

    out = gmm_neural_mixed_block.main(["--quick", "--out", str(tmp_path / "gmm.png")])
    assert max(out["counts"], key=out["counts"].get) == 3
    assert out["median_mean_error"] < 0.3  # cluster sd 0.6, 30 points: mean error ~0.1
    assert 0.2 < out["accept"] <= 1
    assert (tmp_path / "gmm.png").stat().st_size > 0


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_other_backends_make_the_same_moves(backend):
    """compile_kwargs={"mode": "JAX"} (jax optional: skipped without it) or "NUMBA": the pair's
    logp and its grid profiles compile with the backend and the step makes the C backend's moves
    from the same seed."""
    model, b, v = toy_model()
    finals = []
    for mode in modes(backend):
        with model:
            step = NeuralMixedBlock(
                [b, v], rng=np.random.default_rng(1),
                compile_kwargs={"mode": mode} if mode else None,
            )  # fmt: skip
        point = model.initial_point()
        moves = 0
        for _ in range(40):
            new, _ = step.step(point)
            moves += int(new["b"] != point["b"])
            point = new
        finals.append((point, moves))
    for name in finals[0][0]:
        np.testing.assert_allclose(finals[1][0][name], finals[0][0][name], rtol=1e-9)
    assert finals[0][1] == finals[1][1] > 3
