"""Integer jumps span their support (issue #28 item 2: jumps stopped at +-1024).

1. On a finite support the exponent is ``ceil(log2(width))`` with no cap below 62: a support of
   width 10^6 gets ``J = 20`` and its largest offset reaches the far end; the compiled jumps and
   the numpy reference make the same moves from the same uniforms there.
2. No offset overflows ``int64`` into the support: near the int64 limit, on a target positive on
   the whole line, the reference and the compiled jumps exclude the offsets that would wrap.
3. Through ``pm.sample``: the issue's DiscreteUniform(0, 10^6) with a Normal likelihood (R-hat 2.26
   and mean 502717 instead of 700000 before) against its closed form; an unbounded count started
   millions of values from its posterior reaches it while tuning (the exponent grows, logged,
   each chain from its own start) and matches the posterior summed over a grid; the grown
   exponent survives pickling.

Thresholds: the posterior mean within 5 Monte Carlo standard errors (``5 sd / sqrt(ESS)``, ESS
from ArviZ) of the exact mean, R-hat below 1.05.
"""

from __future__ import annotations

import logging
import math

import arviz as az
import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_lbp import LocallyBalanced
from pymc_lbp.samplers.balancing import log_sqrt
from pymc_lbp.samplers.integer.graph import CompiledJumps
from pymc_lbp.samplers.integer.reference import (
    LARGEST_SCALE_EXPONENT,
    MAX_SCALE_EXPONENT,
    grown_exponent,
    jump,
    neighbourhood_log_weights,
    offsets,
    scale_exponent,
    start_exponent,
)
from pymc_lbp.samplers.single_site.graph import graph_balancing
from tests.helpers.ess import checked_ess

SAMPLE = dict(cores=1, progressbar=False, compute_convergence_checks=False)
N_MCSE = 5.0
INT64_MAX = int(np.iinfo(np.int64).max)


class _Uniforms:
    """A stand-in generator handing out given uniforms in order (the reference's draws)."""

    def __init__(self, values):
        self._values = list(values)

    def random(self):
        return self._values.pop(0)


def _within_mcse(draws: np.ndarray, mean: float, sd: float) -> tuple[bool, str]:
    """Whether the draws' mean is within N_MCSE standard errors ``sd / sqrt(ESS)`` of ``mean``,
    from an ESS of at least MIN_ESS (asserted: a smaller one makes the bound unreliable)."""
    ess = checked_ess(draws, "draws")
    err = abs(float(draws.mean()) - mean)
    limit = N_MCSE * sd / math.sqrt(ess)
    return err < limit, f"mean {draws.mean():.1f} vs {mean:.1f}: |error| {err:.1f}, ESS {ess:.0f}"


# -- the exponent ----------------------------------------------------------------------------------
def test_exponent_spans_wide_finite_supports_and_starts_unbounded_ones_at_their_magnitude():
    assert scale_exponent(0, 1_000_000) == 20
    assert offsets(scale_exponent(0, 1_000_000)).max() >= 1_000_000  # reaches the far end
    assert -offsets(20).min() >= 1_000_000
    assert scale_exponent(0, 2**40) == 40
    assert scale_exponent(-(2**62), 2**62) == LARGEST_SCALE_EXPONENT == 62  # int64 offsets
    assert scale_exponent(0, 1000) == 10 and scale_exponent(0, np.inf) == MAX_SCALE_EXPONENT
    assert offsets(62).max() == 2**62
    with pytest.raises(ValueError, match="int64"):
        offsets(63)
    # unbounded supports start at 10, or at the bits of the start's distance from the bound + 1
    assert start_exponent(5, 0, np.inf) == MAX_SCALE_EXPONENT
    assert start_exponent(10**9, 0, np.inf) == 31  # 10^9 < 2^30
    assert start_exponent(-(10**9), -np.inf, 0) == 31
    assert start_exponent(0, 0, 10**7) == 24  # a finite support spanned
    assert start_exponent(INT64_MAX, -np.inf, np.inf) == 62
    assert [grown_exponent(j) for j in (10, 20, 40, 62)] == [20, 40, 62, 62]


# -- a wide finite support: the model ------------------------------------------------------
def wide_model() -> pm.Model:
    with pm.Model() as model:
        k = pm.DiscreteUniform("k", 0, 1_000_000)
        pm.Normal("y", k, 40_000, observed=700_000)
    return model


@pytest.fixture(scope="module")
def wide():
    model = wide_model()
    with model:
        step = LocallyBalanced([model["k"]])
    return model, step


def test_compiled_jumps_span_a_wide_support_and_make_the_reference_decisions(wide):
    """Support 0 .. 10^6: the step's offsets reach 2^20, fixed (no tuning on a finite support),
    and from the same uniforms the compiled call moves as the numpy reference with
    ``scale_exponent``'s J, accepting jumps far beyond the old cap of 1024."""
    _, step = wide
    assert step.integer_moves.jump_sites.tolist() == [0]  # too wide for the full-conditional draw
    assert not step.integer_moves.exponent_grows
    jumps = step.integer_moves.jumps
    assert jumps.d.max() == 2**20
    support = (0.0, 1_000_000.0)
    rng = np.random.default_rng(28)
    x = np.array([500_000], dtype=np.int64)
    far = 0
    for _ in range(150):
        u = rng.random((1, 2))
        res = jumps(x, u)
        ref = jump(
            step.integer_moves.site_logp,
            x,
            0,
            scale_exponent(*support),
            log_sqrt,
            _Uniforms(u[0]),
            support,
        )
        np.testing.assert_array_equal(res.x, ref.x)
        np.testing.assert_allclose(res.logp, ref.logp, rtol=1e-12)
        far += int(abs(int(res.x[0]) - int(x[0])) > 1024)
        assert 0 <= res.x[0] <= 1_000_000
        x = res.x
        if rng.random() < 0.3:  # now and then a fresh state anywhere in the support
            x = rng.integers(0, 1_000_001, size=1).astype(np.int64)
    assert far > 20


def test_wide_discrete_uniform_matches_its_closed_form(wide):
    """The issue's reproduction: k ~ DiscreteUniform(0, 10^6), y ~ Normal(k, 40000) observed at
    700000: the posterior is a Normal(700000, 40000) discretised and truncated to the support
    (mean from the exact sum over the support). Before: mean 502717, R-hat 2.26."""
    model, step = wide
    with model:
        idata = pm.sample(draws=1500, tune=300, chains=2, step=[step], random_seed=28, **SAMPLE)
    support = np.arange(0, 1_000_001, dtype=np.float64)
    w = stats.norm.logpdf(700_000, support, 40_000)
    w = np.exp(w - w.max())
    w /= w.sum()
    mean = float(w @ support)
    sd = math.sqrt(float(w @ (support - mean) ** 2))
    assert abs(mean - 700_000) < 1 and abs(sd - 40_000) < 1
    draws = idata.posterior["k"].values.astype(np.float64)
    ok, msg = _within_mcse(draws, mean, sd)
    assert ok, msg
    assert float(az.rhat(idata)["k"]) < 1.05


# -- int64 overflow --------------------------------------------------------------------------------
SCALE = 2.0**61


def _line_logp(v):
    """A target positive on every int64, wide as the whole line (numpy or graph)."""
    return -0.5 * (v / SCALE) ** 2


def _numpy_site_logp(x, sites, values):
    return float(_line_logp(float(x[0]))), _line_logp(np.asarray(values, dtype=np.float64))


def _graph_site_logp(x, sites, values):
    return _line_logp(pt.cast(x[0], "float64")), _line_logp(pt.cast(values, "float64"))


def test_offsets_that_would_overflow_int64_are_outside_the_support():
    """A site 3 below the int64 maximum with J = 62 on an unbounded support: +4 .. +2^62 would
    overflow (before, they wrapped around to about -2^63, inside the support, and were proposed
    and accepted). They weigh 0 in the reference; the compiled jumps make the reference's
    decisions from the same uniforms and never wrap either."""
    x = np.array([INT64_MAX - 3], dtype=np.int64)
    d = offsets(LARGEST_SCALE_EXPONENT)
    _, log_w = neighbourhood_log_weights(_numpy_site_logp, x, 0, d, log_sqrt)
    assert np.all(np.isfinite(log_w[d <= 2])) and np.all(log_w[d > 2] == -np.inf)
    jumps = CompiledJumps(
        np.array([0]),
        LARGEST_SCALE_EXPONENT,
        _graph_site_logp,
        None,
        graph_balancing("sqrt", log_sqrt),
        n_sites=1,
    )
    rng = np.random.default_rng(62)
    moved = 0
    for i in range(200):
        start = x if i % 2 == 0 else -x - 1  # near the maximum, and near the minimum
        u = rng.random((1, 2))
        res = jumps(start, u)
        ref = jump(_numpy_site_logp, start, 0, LARGEST_SCALE_EXPONENT, log_sqrt, _Uniforms(u[0]))
        np.testing.assert_array_equal(res.x, ref.x)
        step = int(res.x[0]) - int(start[0])  # exact in Python integers
        assert step == 0 or abs(step) in {2**j for j in range(63)}, step
        moved += int(step != 0)
    assert moved > 50


# -- an unbounded support: J grows while tuning ----------------------------------------------------
Y, SIGMA, MU, ALPHA = 5_000_000, 2000.0, 5.0, 0.01


def far_count_model() -> pm.Model:
    """n ~ NegativeBinomial(mu=5, alpha=0.01), started at its initval (4); y ~ Normal(n, 2000)
    observed at 5*10^6: the posterior is about Normal(4992007, 2000), 5*10^6 away from the start
    (4900 jumps of the old 1024)."""
    with pm.Model() as model:
        n = pm.NegativeBinomial("n", mu=MU, alpha=ALPHA)
        pm.Normal("y", n, SIGMA, observed=Y)
    return model


def far_count_posterior() -> tuple[float, float]:
    grid = np.arange(Y - 200_000, Y + 50_000, dtype=np.float64)
    lp = stats.nbinom.logpmf(grid, ALPHA, ALPHA / (MU + ALPHA)) + stats.norm.logpdf(Y, grid, SIGMA)
    w = np.exp(lp - lp.max())
    assert w[0] < 1e-30 and w[-1] < 1e-30  # the grid holds the whole posterior
    w /= w.sum()
    mean = float(w @ grid)
    return mean, math.sqrt(float(w @ (grid - mean) ** 2))


def test_unbounded_count_far_from_its_start_grows_its_jumps_while_tuning(caplog):
    """Each chain starts at J = 10 from n = 4, grows J when a tuning jump uses the largest
    offset (10 -> 20 -> 40, logged), reaches the posterior during tuning, and its frozen draws
    match the posterior summed over a grid. Then the step pickles with its grown exponent, and
    the copy's jumps move as the original's."""
    model = far_count_model()
    assert model.initial_point()["n"] < 10
    with model:
        step = LocallyBalanced([model["n"]])
        assert (
            step.integer_moves.exponent_grows and step.integer_moves.exponent == MAX_SCALE_EXPONENT
        )
        with caplog.at_level(logging.INFO, logger="pymc_lbp"):
            # 2,000 draws a chain: the ESS of n was 146 from 1,000
            idata = pm.sample(draws=2000, tune=300, chains=2, step=[step], random_seed=5, **SAMPLE)
    grown = [r.getMessage() for r in caplog.records if "integer jumps now reach" in r.getMessage()]
    # each chain tunes its own J from its start, as a pickled copy under cores > 1 does
    assert sum("J 10 -> 20" in m for m in grown) == 2, grown
    assert (
        step.integer_moves.exponent >= 20
        and step.integer_moves.jumps.d.max() == 2**step.integer_moves.exponent
    )
    mean, sd = far_count_posterior()
    draws = idata.posterior["n"].values.astype(np.float64)
    assert draws.min() > mean - 10 * sd  # every kept draw is in the posterior
    ok, msg = _within_mcse(draws, mean, sd)
    assert ok, msg
    assert float(az.rhat(idata)["n"]) < 1.05

    clone = cloudpickle.loads(cloudpickle.dumps(step))
    assert clone.integer_moves.exponent == step.integer_moves.exponent
    u = np.random.default_rng(1).random((1, 2))
    x = np.array([4_000_000], dtype=np.int64)
    np.testing.assert_array_equal(
        clone.integer_moves.jumps(x, u).x, step.integer_moves.jumps(x, u).x
    )


def test_chains_tune_their_exponent_alike_in_sequence_and_in_parallel():
    """Every chain tunes its own ``J`` from its start: PyMC restores only the step's sampling
    state between sequential chains, and under ``cores > 1`` runs a pickled copy of the step in
    each process. A step whose ``J`` grew in an earlier run starts the next run's chains afresh
    (same seed, same draws), and a fresh step gives those draws in parallel as well."""
    model = far_count_model()
    quick = dict(draws=60, tune=60, chains=2, random_seed=11, progressbar=False)
    quick["compute_convergence_checks"] = False
    with model:
        step = LocallyBalanced([model["n"]])
        first = pm.sample(step=[step], cores=1, **quick).posterior["n"].values
        assert step.integer_moves.exponent > MAX_SCALE_EXPONENT  # grown in the last chain
        again = pm.sample(step=[step], cores=1, **quick).posterior["n"].values
        fresh = LocallyBalanced([model["n"]])
        parallel = pm.sample(step=[fresh], cores=2, **quick).posterior["n"].values
    assert first.min() > Y - 100_000  # both chains reached the posterior while tuning
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(parallel, first)
