"""pymc_lbp.sample under ``floatX="float32"`` (issue #25: "float32 allowed with acceptance ratios
kept in float64").

A Bernoulli indicator with a conjugate Normal coefficient, built and sampled under float32
(data float32, so the model's logp and gradient are float32): the posterior means against the
exact ones (both values of the indicator enumerated, the coefficient integrated in closed form)
within 4 Monte Carlo standard errors (ArviZ's ``mcse``, from an ESS of at least 200); NUTS's
values and step size float32; the Metropolis-Hastings rule and the discrete kernels' targets in
float64 (a ratio whose float32 sum would flip the decision decides as in float64); under the
default float64 the graphs carry no cast (unchanged, so the same draws for the same seed); and
the float types the program refuses, by name. One sampled model for the whole file.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.traversal import ancestors
from pytensor.scalar import Cast
from pytensor.tensor.elemwise import Elemwise
from scipy import stats

pytest.importorskip("blackjax", reason="pymc_lbp[jax] extra (jax, blackjax) not installed")

import pymc_lbp  # noqa: E402
from pymc_lbp.samplers.mh_graph import mh_accept, mh_log_ratio  # noqa: E402
from pymc_lbp.whole_model.sampling import (  # noqa: E402
    _require_jax,
    assign_steps,
    continuous_float_dtype,
)
from tests.helpers.ess import checked_mcse  # noqa: E402

F32 = {"floatX": "float32"}
Z_BOUND = 4.0  # |estimate - exact| / MCSE; P(|N(0,1)| > 4) = 6e-5 per quantity
X = np.array([-1.0, -0.5, 0.3, 0.8, 1.2], dtype=np.float32)
Y = np.array([-0.9, -0.1, -0.2, 0.9, 0.6], dtype=np.float32)
PRIOR, TAU = 0.3, 1.5


def indicator_model() -> pm.Model:
    """z ~ Bernoulli(0.3), beta ~ N(0, 1.5^2), y_i ~ N(z beta x_i, 1), in the current floatX."""
    with pm.Model() as model:
        z = pm.Bernoulli("z", PRIOR)
        beta = pm.Normal("beta", 0.0, TAU)
        pm.Normal("y", z * beta * X, 1.0, observed=Y)
    return model


def exact_means() -> tuple[float, float]:
    """``(P(z = 1 | y), E[beta | y])`` in float64 from the float32 data: the two marginal
    likelihoods (``y | z = 1 ~ N(0, I + tau^2 x x')``), and ``beta | z = 1`` conjugate with
    mean ``v x'y``, ``v = 1 / (1 / tau^2 + x'x)``; ``beta | z = 0`` is its prior (mean 0)."""
    x, y = X.astype(np.float64), Y.astype(np.float64)
    l0 = stats.multivariate_normal(np.zeros(5), np.eye(5)).logpdf(y)
    l1 = stats.multivariate_normal(np.zeros(5), np.eye(5) + TAU**2 * np.outer(x, x)).logpdf(y)
    p1 = 1 / (1 + np.exp(np.log(1 - PRIOR) + l0 - np.log(PRIOR) - l1))
    m1 = (x @ y) / (1 / TAU**2 + x @ x)
    return float(p1), float(p1 * m1)


@pytest.fixture(scope="module")
def sampled():
    """The model built and sampled under float32: two vectorised chains, fixed seed; the flag
    by the default single-site step, named (``z * beta`` would otherwise be paired, and the
    pair updates of a Gaussian conditional accept with probability 1)."""
    with pytensor.config.change_flags(**F32):
        model = indicator_model()
        with model:
            step = pymc_lbp.LocallyBalanced([model["z"]])
        idata = pymc_lbp.sample(
            1000,
            tune=300,
            chains=2,
            model=model,
            step=[step],
            random_seed=23,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return model, idata


def _within_mcse(draws: np.ndarray, exact: float) -> None:
    mcse = checked_mcse(draws, "q")
    assert abs(draws.mean() - exact) <= Z_BOUND * mcse, (draws.mean(), exact, mcse)


def test_float32_posterior_means_match_the_exact_ones(sampled):
    _, idata = sampled
    p1, e_beta = exact_means()
    _within_mcse(idata.posterior["z"].values, p1)
    _within_mcse(idata.posterior["beta"].values, e_beta)


def test_nuts_runs_in_float32_and_its_statistics_in_float64(sampled):
    model, idata = sampled
    _, continuous = assign_steps(model, None)
    assert continuous_float_dtype(model, continuous) == "float32"
    assert [v.dtype for v in model.value_vars] == ["int64", "float32"]
    assert idata.posterior["beta"].dtype == np.float32  # the chain's float32 positions
    step_size = idata.sample_stats["step_size"].values
    # recorded as float64, but the step size NUTS ran with is a float32 value
    np.testing.assert_array_equal(step_size.astype(np.float32).astype(np.float64), step_size)
    for name in ("lp", "energy", "acceptance_rate", "accept"):
        assert idata.sample_stats[name].dtype == np.float64, name
    # NUTS diverges only where its leapfrog is unstable, which float32 must not add to:
    # beta | z = 1 has sd 0.51, beta | z = 0 (the prior) 1.5, and the step size adapts to both
    # (a step unstable at sd 1.5 would be unstable at 0.51 in every draw with z = 1, far from the
    # acceptance 0.8 it is tuned for). Divergences where z = 1 depend on the adapted step (XLA at
    # -O0 drew a few, at -O3 none); one where z = 0 would be float32's doing.
    diverging = idata.sample_stats["diverging"].values
    assert np.all(idata.posterior["z"].values[diverging] == 1)


def test_pair_updates_under_float32_match_the_exact_means():
    """The same model with the defaults, which pair ``z`` with ``beta`` (samplers/laplace_pairs):
    under float32 the pair updates' statistics are float64, the means exact within 4 MCSE, and
    no trajectory diverges (NUTS's mass of ``beta`` follows ``z``)."""
    with pytensor.config.change_flags(**F32):
        model = indicator_model()
        idata = pymc_lbp.sample(
            1000,
            tune=300,
            chains=2,
            model=model,
            random_seed=24,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert idata.posterior.attrs["discrete_steps"] == ["LaplacePairs"]
    assert idata.posterior["beta"].dtype == np.float32
    assert idata.sample_stats["pair_accept"].dtype == np.float64
    assert int(idata.sample_stats["diverging"].sum()) == 0
    p1, e_beta = exact_means()
    _within_mcse(idata.posterior["z"].values, p1)
    _within_mcse(idata.posterior["beta"].values, e_beta)


def test_discrete_acceptance_probabilities_are_float64(sampled):
    """The discrete step's acceptance probabilities, from its float64 ratios: values strictly
    between 0 and 1 that no float32 holds (a float32 probability would be one)."""
    _, idata = sampled
    accept = idata.sample_stats["accept"].values
    inside = accept[(accept > 0) & (accept < 1)]
    assert inside.size > 100
    assert np.mean(inside.astype(np.float32).astype(np.float64) != inside) > 0.9


def test_discrete_targets_are_float64_under_float32(sampled):
    """The differences the kernels read (logp and one-site differences) are float64 graphs of
    the float32 model."""
    model, _ = sampled
    with pytensor.config.change_flags(**F32):
        steps, _ = assign_steps(model, None)
        (step,) = steps
        x = pt.vector("x", dtype="int64")
        logp, deltas = step.differences.graph(x)
    assert logp.dtype == deltas.dtype == "float64"


def _flip_inputs() -> tuple[np.ndarray, ...]:
    """A ratio ``logp_y - logp_x + log_q_rev - log_q_fwd`` of float32 terms that float32
    arithmetic sums to 0 (accept with probability 1) and float64 to about -1e-5, with a uniform
    between ``exp(-1e-5)`` and 1: float64 rejects, float32 would accept."""
    logp_x, logp_y, log_q_fwd, log_q_rev, u = (
        np.float32(v) for v in (1e-5, 1e4, 0.0, -1e4, 0.999995)
    )
    ratio32 = logp_y - logp_x + log_q_rev - log_q_fwd
    assert ratio32.dtype == np.float32 and ratio32 == 0.0  # float32 would accept
    ratio64 = np.float64(logp_y) - np.float64(logp_x) + np.float64(log_q_rev)
    assert u > np.exp(ratio64)  # float64 rejects
    return logp_x, logp_y, log_q_fwd, log_q_rev, u


def test_mh_rule_decides_in_float64_under_float32():
    """The one MH rule of every kernel in the program, built under float32 from float32 inputs:
    float64 ratio and probability, and the decision float64 makes, in the JAX conversion the
    program uses."""
    from pymc.sampling.jax import get_jaxified_graph

    _require_jax()
    values = _flip_inputs()
    with pytensor.config.change_flags(**F32):
        inputs = [pt.scalar(name, dtype="float32") for name in ("lx", "ly", "qf", "qr", "u")]
        ratio = mh_log_ratio(*inputs[:4])
        prob, accepted = mh_accept(ratio, inputs[4])
        assert ratio.dtype == prob.dtype == "float64"
        fn = get_jaxified_graph(inputs=inputs, outputs=[ratio, prob, accepted])
        out_ratio, out_prob, out_accepted = (np.asarray(v) for v in fn(*values))
    assert out_ratio.dtype == out_prob.dtype == np.float64
    np.testing.assert_allclose(out_ratio, -1e-5, rtol=1e-3)
    assert not bool(out_accepted)


def test_float64_graphs_carry_no_cast():
    """Under the default float64 the float64 casts are no-ops: the MH rule's graph has no Cast
    node, so the program (and its draws for a seed) are those of before."""
    inputs = [pt.scalar(name, dtype="float64") for name in ("lx", "ly", "qf", "qr", "u")]
    prob, accepted = mh_accept(mh_log_ratio(*inputs[:4]), inputs[4])
    casts = [
        v
        for v in ancestors([prob, accepted])
        if v.owner is not None
        and isinstance(v.owner.op, Elemwise)
        and isinstance(v.owner.op.scalar_op, Cast)
    ]
    assert casts == []
    model = indicator_model()
    _, continuous = assign_steps(model, None)
    assert continuous_float_dtype(model, continuous) == "float64"


def test_float_types_the_program_refuses():
    """float16 continuous variables, and continuous variables of two float types, are named
    before anything is compiled."""
    with pm.Model() as mixed:
        with pytensor.config.change_flags(**F32):
            pm.Normal("a", 0.0, 1.0)
        pm.Normal("b", 0.0, 1.0)
        pm.Bernoulli("z", 0.5)
    with pytest.raises(TypeError, match=r"mix float types.*'float32': \['a'\].*'float64': \['b'\]"):
        pymc_lbp.sample(10, tune=10, chains=1, model=mixed, progressbar=False)
    with pm.Model() as half:
        with pytensor.config.change_flags(floatX="float16"):
            pm.Normal("h", 0.0, 1.0)
    with pytest.raises(TypeError, match=r"'float16': \['h'\]"):
        pymc_lbp.sample(10, tune=10, chains=1, model=half, progressbar=False)
