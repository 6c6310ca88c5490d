"""pymc_lbp.sample's contract (issue #25): pm.sample's groups and names, chains, seeds, errors."""

from __future__ import annotations

import logging

import numpy as np
import pymc as pm
import pytest

pytest.importorskip("blackjax", reason="pymc_lbp[jax] extra (jax, blackjax) not installed")

import pymc_lbp  # noqa: E402
from pymc_lbp.whole_model import NotInProgramError, assign_steps  # noqa: E402

Y = np.array([0.1, 1.2, 0.3, -0.4])


def mixed_model() -> pm.Model:
    """Coupled binary sites (a chain of agreements), a mean, an sd, a deterministic; dims."""
    with pm.Model(coords={"obs": range(4)}) as model:
        z = pm.Bernoulli("z", 0.5, dims="obs")
        pm.Potential("agree", 0.8 * pm.math.sum(pm.math.eq(z[1:], z[:-1])))
        mu = pm.Normal("mu", 0.0, 1.0)
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("y", mu + z, sd, observed=Y, dims="obs")
        pm.Deterministic("twice", 2 * mu)
    return model


def run(model, **kwargs):
    options = dict(draws=30, tune=20, model=model, random_seed=5, progressbar=False)
    options.update(kwargs)
    options.setdefault("compute_convergence_checks", False)
    return pymc_lbp.sample(**options)


@pytest.fixture(scope="module")
def vectorized():
    """The mixed model and its two vectorised chains, warmup kept: one compiled program for the
    groups test and the chain-method comparisons (``discard_tuned_samples`` changes only which
    groups are written, not the program or its draws)."""
    model = mixed_model()
    return model, run(model, chains=2, discard_tuned_samples=False)


def test_groups_names_dims_and_stats_as_pm_sample(vectorized):
    model, idata = vectorized
    assert set(idata.groups()) >= {
        "posterior",
        "sample_stats",
        "observed_data",
        "warmup_posterior",
        "warmup_sample_stats",
    }
    post = idata.posterior
    assert set(post.data_vars) == {"z", "mu", "sd", "twice"}
    assert post["z"].dims == ("chain", "draw", "obs")
    assert post["z"].dtype == np.int64 and post.sizes == {"chain": 2, "draw": 30, "obs": 4}
    np.testing.assert_allclose(post["twice"], 2 * post["mu"])
    assert float(post["sd"].min()) > 0  # untransformed
    stats = idata.sample_stats
    for name in ("diverging", "tree_depth", "step_size", "energy", "lp", "tune", "accept"):
        assert name in stats, name
    assert not stats["tune"].any() and idata.warmup_sample_stats["tune"].all()
    assert idata.warmup_posterior.sizes["draw"] == 20
    # lp is the model's logp at the recorded draw
    logp = model.compile_logp()
    point = {
        "z": post["z"].values[1, 7],
        "mu": post["mu"].values[1, 7],
        "sd_log__": np.log(post["sd"].values[1, 7]),
    }
    np.testing.assert_allclose(float(stats["lp"].values[1, 7]), logp(point), rtol=1e-10)


def test_seeds_chains_and_chain_methods(vectorized):
    """Sequential chains are the chains run alone, bit for bit: chain 0 of two is one chain's
    run, chain 1 one chain's run from its seed (docs/whole_model.md, ``random_seed``); one
    chain on a device (pmap) is the chain alone too. Vectorised chains share their warmup's
    adaptation (the next test); without a warmup they equal sequential ones with the same seed
    over these 30 draws, the discrete draws exactly, the continuous ones to rounding
    (``vmap``'s batched arithmetic rounds differently: over longer runs a last-bit difference
    flips a decision and the chains part, the same in distribution)."""
    from pymc_lbp.whole_model.sampling import chain_seeds

    model, vec = vectorized
    seq = run(model, chains=2, chain_method="sequential")
    one = run(model, chains=1)  # one chain: run as "sequential" runs it
    second = run(model, chains=1, random_seed=chain_seeds(5, 2)[1:])
    for name in ("z", "mu", "sd"):
        np.testing.assert_array_equal(one.posterior[name].values[0], seq.posterior[name].values[0])
        np.testing.assert_array_equal(
            second.posterior[name].values[0], seq.posterior[name].values[1]
        )
    par = run(model, chains=1, chain_method="parallel")  # pmap over the one CPU device
    assert par.posterior.sizes["chain"] == 1
    np.testing.assert_array_equal(one.posterior["z"].values, par.posterior["z"].values)
    vec0, seq0 = (
        run(model, chains=2, chain_method=m, tune=0).posterior for m in ("vectorized", "sequential")
    )
    np.testing.assert_array_equal(vec0["z"].values, seq0["z"].values)
    for name in ("mu", "sd"):
        np.testing.assert_allclose(
            one.posterior[name].values, par.posterior[name].values, rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(vec0[name].values, seq0[name].values, rtol=1e-9, atol=1e-12)
    assert not np.allclose(vec.posterior["mu"].values[0], vec.posterior["mu"].values[1])


def test_vectorised_chains_share_one_adaptation(vectorized):
    """Batched chains adapt one step size and one mass matrix (pymc_lbp.whole_model.warmup):
    every chain's step size is the same at every draw, and replaying Stan's dual averaging on
    the chains' mean acceptance, restarted at the slow windows' ends of Stan's schedule, gives
    the recorded step sizes of the warmup and, averaged, of the draws."""
    from blackjax.adaptation.step_size import dual_averaging_adaptation

    from pymc_lbp.whole_model.warmup import schedule

    _, vec = vectorized
    warm, draws = vec.warmup_sample_stats, vec.sample_stats
    for stats in (warm, draws):
        sizes = stats["step_size"].values
        np.testing.assert_array_equal(sizes, np.broadcast_to(sizes[:1], sizes.shape))
    init, update, final = dual_averaging_adaptation(0.8)
    state = init(1.0)
    acceptance = warm["acceptance_rate"].values.mean(axis=0)
    for i, (_, window_end) in enumerate(schedule(acceptance.size)):
        np.testing.assert_allclose(warm["step_size"].values[0, i], np.exp(state.log_step_size))
        state = update(state, acceptance[i])
        if window_end:
            state = init(final(state))
    np.testing.assert_allclose(draws["step_size"].values[0, 0], final(state))
    assert not np.allclose(warm["acceptance_rate"].values[0], warm["acceptance_rate"].values[1])


def test_continuous_only_model_is_plain_nuts():
    """No discrete step; the draws match the conjugate posterior of a Normal mean."""
    y = np.array([0.3, -0.2, 1.1, 0.7, 0.4])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=y)
    steps, continuous = assign_steps(model, None)
    assert steps == [] and continuous == [0]
    idata = run(model, chains=4, draws=1000, tune=500)
    assert "accept" not in idata.sample_stats and "diverging" in idata.sample_stats
    draws = idata.posterior["mu"].values
    exact_mean, exact_sd = y.sum() / 6, np.sqrt(1 / 6)
    se = float(pm.stats.mcse(idata, var_names=["mu"])["mu"])
    assert abs(draws.mean() - exact_mean) < 4 * se
    # with an ESS over 1000 the sd's relative standard error is about 2%: 10% is 5 of them
    assert float(pm.stats.ess(idata, var_names=["mu"])["mu"]) > 1000
    assert abs(draws.std() / exact_sd - 1) < 0.1


def test_max_treedepth_caps_nuts_trees_in_warmup_and_draws():
    """``max_treedepth=2``: no tree deeper than 2, so at most 2**2 - 1 = 3 leapfrog steps a
    transition, warmup included; the cap binds (the default reaches depth 3 on this model)."""
    idata = run(mixed_model(), chains=1, max_treedepth=2, discard_tuned_samples=False)
    for group in ("warmup_sample_stats", "sample_stats"):
        stats = idata[group]
        assert int(stats["tree_depth"].max()) == 2
        assert int(stats["n_steps"].max()) <= 3


def test_discrete_only_model_has_no_nuts_part():
    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.5, shape=3)
        pm.Potential("agree", 0.5 * pm.math.sum(pm.math.eq(z[1:], z[:-1])))
    idata = run(model, chains=1, progressbar=True)  # the bar's callbacks inside the scans
    assert "diverging" not in idata.sample_stats and "lp" in idata.sample_stats


def test_user_step_options_are_kept(vectorized):
    model = vectorized[0]  # the shared model: graphs compiled for it before are reused
    with model:
        step = pymc_lbp.LocallyBalanced([model["z"]], balancing="barker", steps_per_draw=3)
    idata = run(model, chains=1, step=[step])
    assert (idata.sample_stats["mh_steps"] == 3).all()
    assert idata.posterior.attrs["discrete_steps"] == "LocallyBalanced" or list(
        np.atleast_1d(idata.posterior.attrs["discrete_steps"])
    ) == ["LocallyBalanced"]


def test_the_default_step_is_built_at_the_first_chains_start(vectorized, monkeypatch):
    """As pm.sample builds its steps at the first chain's (jittered) start: the default step
    starts from the discrete values given by ``initvals`` and sees the jittered continuous
    values, not the model's initial point (z all 0, mu = 0)."""
    import pymc_lbp.whole_model.sampling as sampling

    model = vectorized[0]
    built = []

    def spy(*args, **kwargs):
        steps, continuous = assign_steps(*args, **kwargs)
        built.extend(steps)
        return steps, continuous

    monkeypatch.setattr(sampling, "assign_steps", spy)
    run(model, chains=1, draws=2, tune=2, initvals={"z": np.array([1, 1, 0, 1])})
    (step,) = built
    np.testing.assert_array_equal(step._x0, [1, 1, 0, 1])
    assert float(step.shared["mu"].get_value()) != 0.0


def test_clear_errors(vectorized):
    model = vectorized[0]
    with model:
        metropolis = pm.Metropolis([model["mu"]])
        # a step class the program does not know (here a user's subclass of one it knows)
        custom = type("MyLocallyBalanced", (pymc_lbp.LocallyBalanced,), {})([model["z"]])
    with pytest.raises(TypeError, match="not a pymc_lbp discrete step"):
        run(model, step=[metropolis])
    with pytest.raises(NotInProgramError, match="MyLocallyBalanced"):
        run(model, step=[custom])
    with pytest.raises(ValueError, match="chain_method"):
        run(model, chain_method="threads")
    with pytest.raises(ValueError, match="draws"):
        run(model, draws=0)
    with pytest.raises(ValueError, match="chains"):
        run(model, chains=True)
    import jax

    # one chain more than there are devices (the check comes after the chains' starts are built)
    with pytest.raises(ValueError, match="one chain per device"):
        run(model, chains=jax.local_device_count() + 1, chain_method="parallel")
    with pytest.raises(ValueError, match="not a value of 'z'"):
        run(model, initvals={"z": np.array([0, 2, 0, 1])})
    # summing z out: a bad value; z's coupled sites, which no exact draw given mu and sd
    # recovers; z taken by a step of the user's
    with pytest.raises(ValueError, match="marginalize must be 'auto', True or False"):
        run(model, marginalize="yes")
    with pytest.raises(ValueError, match=r"marginalize=True, but .* not conditionally indep"):
        run(model, marginalize=True)
    with model:
        step = pymc_lbp.LocallyBalanced([model["z"]])
    with pytest.raises(ValueError, match="but no discrete variable is left to the default"):
        run(model, step=[step], marginalize=True)


def test_blocks_the_random_scan_cannot_update_are_named():
    """BlockGibbs' elimination blocks (a read_uai model) and NeuralBlock's chain blocks updated
    by random-scan steps (an HMM's states, ``steps_per_draw`` not a whole number of sweeps) are
    refused by name before anything is compiled."""
    from pymc_lbp.models.uai import UAINetwork, read_uai

    network = UAINetwork(
        "MARKOV", [2, 2, 2], [(0, 1), (1, 2)], [np.array([[2.0, 1.0], [1.0, 2.0]])] * 2
    )
    uai = read_uai(network)
    with uai:
        elimination = pymc_lbp.BlockGibbs()
    with pytest.raises(NotInProgramError, match=r"BlockGibbs .* elimination blocks"):
        run(uai, step=[elimination])
    with pm.Model() as hmm:
        p = pm.Dirichlet("p", np.ones(2), shape=(2, 2))
        s = pm.Categorical("s", p[0], shape=12)
        pm.Potential("chain", pm.math.sum(pm.math.log(p[s[:-1], s[1:]])))
        pm.Normal("y", s, 1.0, observed=np.linspace(0, 1, 12))
        swept = pymc_lbp.NeuralBlock([s])
        chain = pymc_lbp.NeuralBlock([s], steps_per_draw=len(swept.units) + 1)
    assert chain.colours is not None and not chain.scan_compilable
    with pytest.raises(NotInProgramError, match=r"NeuralBlock .* chain blocks without colour"):
        run(hmm, step=[chain])


@pytest.mark.parametrize("cls", ["SelfBalancing", "PathAuxiliaryLBP"])
def test_a_block_of_integer_sites_records_every_stat_of_its_step(cls):
    """A draw without single-site or path steps (integer sites only: their jumps) records the
    step's other stats as zeros, as pm.sample does (SelfBalancing: its description too)."""
    with pm.Model() as model:
        lam = pm.Gamma("lam", 3.0, 0.5)
        n = pm.Poisson("N", lam, shape=2)
        pm.Binomial("y", n, 0.6, observed=[5, 3])
        step = getattr(pymc_lbp, cls)([n])
    idata = run(model, chains=1, step=[step])
    stats = idata.sample_stats
    for name in step.stats_dtypes_shapes:
        if name not in ("tune", "model_logp"):
            assert name in stats, name
    assert (stats["mh_steps"] == 0).all() and (stats["integer_accept"] > 0).any()


def test_summing_out_needs_pymc_extras(monkeypatch):
    """Without pymc-extras, ``marginalize="auto"`` samples the joint model and says why;
    ``True`` is an error naming the extra to install."""
    import sys

    from pymc_lbp.whole_model.marginal import marginal_choice

    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.5, shape=3)
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        pm.Normal("y", mu[z], 1.0, observed=Y[:3])
    steps, _ = assign_steps(model, None)
    assert steps[0].independent_sites
    assert marginal_choice(model, steps, 0, "auto")[0] == ["z"]
    monkeypatch.setitem(sys.modules, "pymc_extras", None)  # import fails
    names, reason, logp = marginal_choice(model, steps, 0, "auto")
    assert names == [] and logp is None and "pymc-extras is not installed" in reason
    with pytest.raises(ValueError, match=r"pymc-extras is not installed \(pip install"):
        marginal_choice(model, steps, 0, True)


def test_what_runs_is_logged_as_pm_sample_logs_it(vectorized, caplog):
    """INFO on the ``pymc_lbp`` logger: each discrete step with its variables, NUTS's
    variables, the chains and chain method, the build time and the sampling time, in
    ``pm.sample``'s words."""
    model = vectorized[0]
    with caplog.at_level(logging.INFO, logger="pymc_lbp"):
        run(model, chains=1, draws=2, tune=2)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "pymc_lbp")
    assert ">LocallyBalanced: [z]\n>NUTS (BlackJAX): [mu, sd]" in text
    assert "1 chain, chain_method='vectorized'" in text
    assert "Built in " in text
    assert "Sampling 1 chain for 2 tune and 2 draw iterations (2 + 2 draws total) took" in text


def test_the_package_logger_shows_info_where_logging_is_not_configured():
    """As ``import pymc`` does for its logger: a handler at INFO on ``pymc_lbp`` when the
    application configured none, none where it did (no line printed twice)."""
    import subprocess
    import sys

    code = (
        "import logging, sys\n"
        "if sys.argv[1] == 'configured': logging.basicConfig()\n"
        "import pymc_lbp\n"
        "log = logging.getLogger('pymc_lbp')\n"
        "print(len(log.handlers), log.getEffectiveLevel())\n"
    )
    for case, expected in (("bare", f"1 {logging.INFO}"), ("configured", f"0 {logging.WARNING}")):
        out = subprocess.run(
            [sys.executable, "-c", code, case], capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == expected.split(), (case, out.stdout, out.stderr)
