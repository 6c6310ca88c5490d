"""Informed multiscale jumps of integer sites (pymc_lbp.samplers.integer.reference, issue #13.1).

1. The jump kernel enumerated independently (plain loops over the offsets, written from the
   definition) is a stochastic matrix with ``pi T = pi`` and irreducible, on a bounded toy and on a
   site whose support is set by another site of the block;
2. ``jump`` itself draws from the enumerated rows (chi-square on independent repeats);
3. ``pm.sample`` with default options matches closed forms and enumeration where +-1 moves are
   hopeless: PyMC's Poisson check (mu from 1 to 10^4) and a population size with support 0..1000.

Thresholds: chi-square at ALPHA = 1e-4 per row; sample means and variances as z-scores against
ArviZ's MCSE (|z| < 4, two-sided 6e-5 per check when the MCSE is right).
"""

from __future__ import annotations

import math

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy import stats
from scipy.special import gammaln

from pymc_lbp import GibbsWithGradients, LocallyBalanced, PathAuxiliaryLBP
from pymc_lbp.samplers.balancing import log_barker, log_sqrt
from pymc_lbp.samplers.integer.reference import (
    SUPPORT_GIBBS_MAX_VALUES,
    jump,
    offsets,
    scale_exponent,
    support_gibbs,
)
from tests.helpers.ess import mcse_z
from tests.helpers.integer_jumps import reference_jumps

ALPHA = 1e-4
Z_MAX = 4.0
# twin tests (compiled against reference moves from the same uniforms): enough calls to hit
# every branch, which each test asserts (accepted and rejected moves, every slot type)
STEPS = 60
# a step's draws on the moving-supports model before its jumps are compared with the reference
N_DRAWS = 15
SAMPLE = dict(cores=1, progressbar=False, compute_convergence_checks=False)


def test_offsets_and_scale():
    assert list(offsets(2)) == [-4, -2, -1, 1, 2, 4]
    assert scale_exponent(0, 12) == 4
    assert scale_exponent(0, 1000) == 10
    assert scale_exponent(0, 1) == 1
    assert scale_exponent(0, np.inf) == 10


# -- exact kernel ------------------------------------------------------------------------------
def toy_logp(v: int) -> float:
    """DiscreteUniform(0, 12) with a bimodal potential: modes at 2 and 10."""
    if not 0 <= v <= 12:
        return -np.inf
    return float(np.logaddexp(-0.5 * (v - 2) ** 2, -0.5 * (v - 10) ** 2 / 2.0))


def enumerated_kernel(logp, values, exponent, log_g):
    """T[x, y] of the jump, from the definition, for a site taking ``values``."""
    index = {v: i for i, v in enumerate(values)}
    steps = [s * 2**j for j in range(exponent + 1) for s in (-1, 1)]

    def weights(x):
        w = {}
        for d in steps:
            lp = logp(x + d)
            w[d] = 0.0 if lp == -np.inf else math.exp(log_g(np.array(lp - logp(x))))
        return w, sum(w.values())

    T = np.zeros((len(values), len(values)))
    for x in values:
        w, z = weights(x)
        for d, wd in w.items():
            if wd == 0.0:
                continue
            y = x + d
            wy, zy = weights(y)
            ratio = math.exp(logp(y) - logp(x)) * (wy[-d] / zy) / (wd / z)
            T[index[x], index[y]] += (wd / z) * min(1.0, ratio)
        T[index[x], index[x]] += 1.0 - T[index[x]].sum()
    return T


def stationary(logp, values):
    lp = np.array([logp(v) for v in values])
    p = np.exp(lp - lp.max())
    return p / p.sum()


@pytest.mark.parametrize("log_g", [log_sqrt, log_barker], ids=["sqrt", "barker"])
def test_enumerated_jump_kernel_is_exact_and_irreducible(log_g):
    values = list(range(13))
    T = enumerated_kernel(toy_logp, values, scale_exponent(0, 12), log_g)
    pi = stationary(toy_logp, values)
    assert np.all(T >= -1e-15)
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    reach = np.linalg.matrix_power((T > 0).astype(int) + np.eye(len(values), dtype=int), 13)
    assert np.all(reach > 0)
    # it jumps between the modes in one step (+-1 moves need ~8 steps through a valley)
    assert T[2, 10] > 0.01


def _numpy_site_logp(logp_block):
    def fn(x, sites, values):
        out = []
        for s, v in zip(sites, values, strict=True):
            y = x.copy()
            y[s] = v
            out.append(logp_block(y))
        return logp_block(x), np.array(out)

    return fn


@pytest.mark.parametrize("start", [0, 2, 7, 12])
def test_jump_draws_follow_the_enumerated_rows(start):
    values = list(range(13))
    T = enumerated_kernel(toy_logp, values, 4, log_sqrt)
    site_logp = _numpy_site_logp(lambda x: toy_logp(int(x[0])))
    rng = np.random.default_rng(start)
    counts = np.zeros(len(values))
    for _ in range(4000):
        res = jump(site_logp, np.array([start]), 0, 4, log_sqrt, rng)
        counts[int(res.x[0])] += 1
    expected = 4000 * T[start]
    keep = expected > 0
    assert counts[~keep].sum() == 0
    chi2 = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    assert stats.chi2.sf(chi2, df=int(keep.sum()) - 1) > ALPHA


def test_jump_respects_a_support_set_by_another_site():
    """Site 0 in 0..x[1] (a count below a total held by site 1): the kernel of site 0 given
    site 1 is exact, and no draw leaves the support."""
    total = 9

    def block_logp(x):
        k, n = int(x[0]), int(x[1])
        if not 0 <= k <= n:
            return -np.inf
        return float(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1) + k * math.log(0.3))

    values = list(range(total + 1))
    T = enumerated_kernel(lambda v: block_logp([v, total]), values, 4, log_sqrt)
    pi = stationary(lambda v: block_logp([v, total]), values)
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    rng = np.random.default_rng(3)
    site_logp = _numpy_site_logp(block_logp)
    x = np.array([4, total])
    for _ in range(500):
        x = jump(site_logp, x, 0, 4, log_sqrt, rng).x
        assert 0 <= x[0] <= total and x[1] == total


def test_support_gibbs_draws_the_full_conditional():
    """Small fixed supports: ``support_gibbs`` draws the site from its full conditional given
    the rest (independent of its current value; zero-probability values never drawn), so
    ``pi`` (enumerated) is stationary for its kernel T[x, y] = pi(y)."""
    values = list(range(13))
    pi = stationary(toy_logp, values)
    T = np.tile(pi, (len(values), 1))
    np.testing.assert_allclose(pi @ T, pi, atol=1e-12)
    site_logp = _numpy_site_logp(lambda x: toy_logp(int(x[0])) if x[0] != 5 else -np.inf)
    pi5 = pi.copy()
    pi5[5] = 0.0
    pi5 /= pi5.sum()
    rng = np.random.default_rng(21)
    for start in (0, 5, 12):
        counts = np.zeros(len(values))
        for _ in range(3000):
            res = support_gibbs(site_logp, np.array([start]), 0, (0, 12), rng)
            assert res.accept == 1.0 and res.distance == abs(int(res.x[0]) - start)
            counts[int(res.x[0])] += 1
        assert counts[5] == 0
        keep = pi5 > 0
        expected = 3000 * pi5[keep]
        chi2 = float(np.sum((counts[keep] - expected) ** 2 / expected))
        assert stats.chi2.sf(chi2, df=int(keep.sum()) - 1) > ALPHA
    dead = support_gibbs(_numpy_site_logp(lambda x: -np.inf), np.array([3]), 0, (0, 12), rng)
    assert dead.accept == 0.0 and dead.x[0] == 3


def test_support_gibbs_is_used_for_small_fixed_supports_only():
    """Which move each integer site gets: support Gibbs for fixed supports of at most
    SUPPORT_GIBBS_MAX_VALUES values, jumps for unbounded ones and for supports that follow other
    variables (the whole block then jumps); a block of one site too (its supports are read at
    the start point before the moves are chosen)."""
    with pm.Model():
        n = pm.DiscreteUniform("n", 0, 1000)
        c = pm.Poisson("c", 4.0)
        w = pm.DiscreteUniform("w", 0, SUPPORT_GIBBS_MAX_VALUES)  # one value too many
        fixed = LocallyBalanced([n, c, w])
        alone = LocallyBalanced([n])
        k = pm.Binomial("k", n=n, p=0.3)
        following = LocallyBalanced([n, k])
    np.testing.assert_array_equal(fixed.integer_moves.gibbs_sites, [0])
    np.testing.assert_array_equal(fixed.integer_moves.jump_sites, [1, 2])
    np.testing.assert_array_equal(alone.integer_moves.gibbs_sites, [0])
    assert alone.integer_moves.jump_sites.size == 0
    assert following.integer_moves.gibbs_sites.size == 0


# -- the compiled jumps reproduce the reference ---------------------------------------------------
class _Uniforms:
    """A stand-in generator handing out given uniforms in order (the reference's draws)."""

    def __init__(self, values):
        self._values = list(values)

    def random(self):
        return self._values.pop(0)


@pytest.mark.parametrize("unrolled", [True, False], ids=["unrolled", "scan"])
def test_compiled_jumps_make_the_reference_decisions(unrolled, monkeypatch):
    """Given the same uniforms, :class:`CompiledJumps` (every integer site, in one call) takes
    the decisions of the numpy reference ``jump`` run site after site, with the support of a
    count below a total held by another site of the block, zero-probability offsets and an
    exponent larger than the sites need (offsets beyond a support weigh 0)."""
    from pymc_lbp.samplers.integer import graph as integer_jump

    monkeypatch.setattr(integer_jump, "UNROLL_SITES", 4 if unrolled else 0)
    with pm.Model():
        n = pm.DiscreteUniform("n", 0, 12, initval=6)
        k = pm.Binomial("k", n=n, p=0.3, initval=2)
        pm.Potential("modes", pm.math.logaddexp(-0.5 * (n - 2) ** 2, -0.25 * (n - 10) ** 2))
        step = LocallyBalanced([n, k])
    jumps = step.integer_moves.jumps
    assert jumps.d.max() == 2**10  # k's support follows n: the largest exponent
    rng = np.random.default_rng(11)
    x = step._x0.copy()
    lay = step.layout
    moved = accepted = 0
    for _ in range(STEPS):
        u = rng.random((2, 2))
        res = jumps(x, u)
        ref, logp = x.copy(), None
        for row, site in enumerate(step.integer_moves.sites):
            step.differences.refresh_bounds(ref)
            support = (lay.lower[site], lay.upper[site])
            out = jump(
                step.integer_moves.site_logp,
                ref,
                int(site),
                scale_exponent(*support),
                log_sqrt,
                _Uniforms(u[row]),
                support,
            )
            ref, logp = out.x, out.logp
        np.testing.assert_array_equal(res.x, ref)
        np.testing.assert_allclose(res.logp, logp, rtol=1e-12)
        moved += int(np.any(res.x != x))
        accepted += res.n_accepted
        x = res.x
        if rng.random() < 0.2:  # now and then a fresh feasible state
            total = int(rng.integers(0, 13))
            x = np.array([total, rng.integers(0, total + 1)], dtype=np.int64)
    # both branches of the MH decision were compared: accepted and rejected site moves
    assert STEPS / 3 < moved and 0 < accepted < 2 * STEPS, (moved, accepted)


def _fixed_supports_model():
    """Fixed supports: support-Gibbs sites of different sizes, counts that jump, colour
    classes."""
    with pm.Model() as model:
        n = pm.DiscreteUniform("n", 0, 12, initval=6)
        m = pm.Binomial("m", n=5, p=0.4, initval=1)
        c = pm.Poisson("c", mu=n + 1.0, shape=2, initval=[3, 9])
        pm.Potential("modes", pm.math.logaddexp(-0.5 * (n - 2) ** 2, -0.25 * (n - 10) ** 2))
        pm.Potential("couple", -0.1 * (m - c[0]) ** 2)
    return model, [n, m, c]


def _moving_supports_model():
    """A count k below a total t held by another site of the block (its support moves with t;
    the block's sites then all jump), in a colour class with two counts that, like k, depend
    on t only: classes {t} and {k, c0, c1}, each moved at once."""
    with pm.Model() as model:
        t = pm.Poisson("t", mu=20.0, initval=15)
        k = pm.Binomial("k", n=t, p=0.3, initval=4)
        c = pm.Poisson("c", mu=0.25 * t + 1.0, shape=2, initval=[3, 9])
    return model, [t, k, c]


@pytest.fixture(scope="module")
def fixed_step():
    """A step on the fixed-supports model with the default compile settings (colour classes
    moved at once); its compiled jumps (the cost of these tests) are built once per module."""
    model, vars = _fixed_supports_model()
    with model:
        return LocallyBalanced(vars)


@pytest.fixture(scope="module")
def moving_step():
    """A step on the model whose supports move with other sites, after N_DRAWS draws (its
    jumps compiled at the first, ``J`` tuned from the start)."""
    model, vars = _moving_supports_model()
    with model:
        step = LocallyBalanced(vars, rng=np.random.default_rng(11))
    assert not step.integer_moves.is_compiled  # nothing compiled before a draw moves a site
    point, seen = model.initial_point(), set()
    for draw in range(N_DRAWS):
        point, _ = step.step(point)
        assert step.integer_moves.is_compiled, draw  # compiled at the first draw
        seen.add(np.concatenate([np.ravel(point[v.name]) for v in model.value_vars]).tobytes())
    assert len(seen) > 2  # the chain moved
    return step


@pytest.mark.parametrize("mode", ["at once", "unrolled", "scan"])
def test_compiled_moves_of_jumping_and_support_gibbs_sites_make_the_reference_decisions(
    mode, monkeypatch, fixed_step
):
    """A block of fixed supports, two small (support Gibbs, of different sizes) and two
    unbounded counts (jumps): given the same uniforms, the compiled call makes the decisions of
    ``jump`` and ``support_gibbs`` run site after site in :attr:`CompiledJumps.order`: with
    the sites of a colour class moved at once (they share no term) and one by one."""
    from pymc_lbp.samplers.integer import graph as integer_jump

    if mode == "at once":
        step = fixed_step
    else:
        monkeypatch.setattr(integer_jump, "MAX_CLASSES", 0)
        monkeypatch.setattr(integer_jump, "UNROLL_SITES", 4 if mode == "unrolled" else 0)
        model, vars = _fixed_supports_model()
        with model:
            step = LocallyBalanced(vars)
    jumps = step.integer_moves.jumps
    np.testing.assert_array_equal(jumps.gibbs_sites, [0, 1])
    np.testing.assert_array_equal(jumps.sites, [2, 3])
    # the counts share no term, nor do n and m: each group is one colour class, moved at once
    classes = [[0, 1]] if mode == "at once" else [[0], [1]]
    assert [c.tolist() for c in jumps.jump_classes] == classes
    assert [c.tolist() for c in jumps.gibbs_classes] == classes
    lay = step.layout
    rng = np.random.default_rng(12)
    x = step._x0.copy()
    moved = jumps_accepted = 0
    for _ in range(STEPS):
        u = rng.random((4, 2))
        res = jumps(x, u)
        ref, logp = x.copy(), None
        for row, site in enumerate(jumps.order):
            support = (lay.lower[site], lay.upper[site])
            uniforms = _Uniforms(u[row])
            if site in jumps.gibbs_sites:
                out = support_gibbs(step.integer_moves.site_logp, ref, int(site), support, uniforms)
            else:
                out = jump(
                    step.integer_moves.site_logp, ref, int(site), 10, log_sqrt, uniforms, support
                )
                jumps_accepted += int(out.accept > 0 and np.any(out.x != ref))
            ref, logp = out.x, out.logp
        np.testing.assert_array_equal(res.x, ref)
        np.testing.assert_allclose(res.logp, logp, rtol=1e-12)
        moved += int(np.any(res.x != x))
        x = res.x
    # the chain moved, and the jumps were both accepted and rejected (2 jumping sites a step)
    assert moved > 0.6 * STEPS and 0 < jumps_accepted < 2 * STEPS, (moved, jumps_accepted)


def _reference_and_compiled_agree(step, n_steps: int) -> tuple[int, int, int]:
    """The numpy reference (:func:`block_jumps` site after site) and :class:`CompiledJumps` of
    ``step`` from the same uniforms, chained for ``n_steps`` calls: (calls that moved the
    state, site moves accepted, site moves)."""
    (order, reference), compiled = reference_jumps(step), step.integer_moves.jumps
    np.testing.assert_array_equal(order, compiled.order)
    rng = np.random.default_rng(5)
    x = step._x0.copy()
    moved = accepted = 0
    for _ in range(n_steps):
        u = rng.random((compiled.order.size, 2))
        a, b = reference(x, u), compiled(x, u)
        np.testing.assert_array_equal(a.x, b.x)
        np.testing.assert_allclose(a.logp, b.logp, rtol=1e-12)
        np.testing.assert_allclose(a.sum_accept, b.sum_accept, rtol=1e-12)
        assert (a.sum_distance, a.n_accepted) == (b.sum_distance, b.n_accepted)
        if len(compiled.gibbs_sites) == 0:  # the moving supports: k stays below its total t
            assert 0 <= a.x[1] <= a.x[0]
        moved += int(np.any(a.x != x))
        accepted += a.n_accepted
        x = a.x
    return moved, accepted, n_steps * compiled.order.size


@pytest.mark.parametrize("dependent", [False, True], ids=["fixed", "moving"])
def test_the_reference_makes_a_steps_compiled_moves(dependent, request):
    """The numpy reference of a block's moves (``block_jumps``: ``jump`` and ``support_gibbs``
    site after site in the compiled call's order) makes the moves of a step's
    :class:`CompiledJumps` from the same uniforms: the same states, logps and summaries, with
    support-Gibbs sites, jumps and colour classes, or with a support that moves with another
    site (on the step of :func:`moving_step`, whose jumps are compiled and ``J`` tuned)."""
    step = request.getfixturevalue("moving_step" if dependent else "fixed_step")
    compiled = step.integer_moves.jumps
    if dependent:
        assert len(compiled.gibbs_sites) == 0 and len(compiled.sites) == 4
        assert [c.tolist() for c in compiled.jump_classes] == [[0], [1, 2, 3]]
    else:
        assert len(compiled.gibbs_sites) == 2 and len(compiled.sites) == 2
        assert [len(c) for c in compiled.jump_classes + compiled.gibbs_classes] == [2, 2]
    moved, accepted, site_moves = _reference_and_compiled_agree(step, STEPS)
    # the chain moved; some site moves were accepted and (the moving supports jump at every
    # site) some rejected: both branches were compared
    assert moved > 0.6 * STEPS and accepted > 0, (moved, accepted)
    assert not dependent or accepted < site_moves, (accepted, site_moves)


# -- through pm.sample ---------------------------------------------------------------------------
@pytest.mark.parametrize("mu", [1.0, 100.0, 1e4])
@pytest.mark.parametrize("cls", [LocallyBalanced, GibbsWithGradients, PathAuxiliaryLBP])
def test_poisson_mean_and_variance_with_defaults(cls, mu):
    """PyMC's step-method check: Poisson(mu) sampled alone has mean and variance mu."""
    with pm.Model():
        k = pm.Poisson("k", mu=mu)
        step = cls([k])
        # 1,200 draws a chain: the squared deviations' ESS was 195 from 800 (mu = 1e4)
        idata = pm.sample(draws=1200, tune=100, chains=2, step=[step], random_seed=5, **SAMPLE)
    v = idata.posterior["k"].values.astype(float)
    assert mcse_z(v, mu) < Z_MAX, v.mean()
    assert mcse_z((v - mu) ** 2, mu) < Z_MAX, v.var()
    assert "integer_accept" in idata.sample_stats


def test_population_size_with_support_to_1000_matches_enumeration():
    """N ~ DiscreteUniform(0, 1000), 30 captures ~ Binomial(N, 0.05): posterior mean and
    variance of N against enumeration over the support (+-1 moves gave R-hat 1.15-1.6 here)."""
    captured, p = 30, 0.05
    with pm.Model():
        n = pm.DiscreteUniform("N", 0, 1000)
        pm.Binomial("y", n=n, p=p, observed=captured)
        step = LocallyBalanced([n])
        # 400 draws: the ESS of the mean and of the squared deviations 1,654 or more at 800
        idata = pm.sample(draws=400, tune=200, chains=2, step=[step], random_seed=8, **SAMPLE)
    support = np.arange(captured, 1001)
    lp = (
        gammaln(support + 1)
        - gammaln(support - captured + 1)
        + (support - captured) * math.log(1 - p)
    )
    w = np.exp(lp - lp.max())
    w /= w.sum()
    mean = float(w @ support)
    var = float(w @ (support - mean) ** 2)
    v = idata.posterior["N"].values.astype(float)
    assert mcse_z(v, mean) < Z_MAX, (v.mean(), mean)
    assert mcse_z((v - mean) ** 2, var) < Z_MAX, (v.var(), var)
    assert float(az.rhat(idata)["N"]) < 1.05


def test_batched_logp_checks_parameters_row_by_row():
    """One row with an impossible parameter (population 50 < second sample 60) is -inf alone:
    the other rows equal the model's logp at their states."""
    with pm.Model() as model:
        n = pm.DiscreteUniform("N", 0, 1000, initval=300)
        pm.HyperGeometric("m", N=n, k=50, n=60, observed=5)
        step = LocallyBalanced([n])
    site_logp = step.integer_moves.site_logp
    logp_x, rows = site_logp(np.array([500]), np.zeros(3, np.int64), np.array([50, 500, 600]))
    logp_fn = model.compile_logp()
    assert rows[0] == -np.inf
    np.testing.assert_allclose(rows[1:], [logp_fn({"N": 500}), logp_fn({"N": 600})], rtol=1e-12)
    np.testing.assert_allclose(logp_x, logp_fn({"N": 500}), rtol=1e-12)


def test_population_with_hypergeometric_recaptures_matches_enumeration():
    """Lincoln-Petersen: 50 marked, 5 of 60 recaptured, N ~ DiscreteUniform(0, 1000). Candidate
    sizes below the second sample fail the HyperGeometric's parameter check; only their rows of
    the batched logp are -inf (a voided batch once gave R-hat 1.5, ESS 4 of 3000)."""
    marked, second, recaptured = 50, 60, 5
    with pm.Model():
        n = pm.DiscreteUniform("N", 0, 1000, initval=300)
        pm.HyperGeometric("m", N=n, k=marked, n=second, observed=recaptured)
        step = LocallyBalanced([n])
        idata = pm.sample(draws=800, tune=200, chains=2, step=[step], random_seed=9, **SAMPLE)
    support = np.arange(marked + second - recaptured, 1001)
    lp = (
        gammaln(support - marked + 1)
        - gammaln(support - marked - second + recaptured + 1)
        - gammaln(support + 1)
        + gammaln(support - second + 1)
    )
    w = np.exp(lp - lp.max())
    w /= w.sum()
    mean = float(w @ support)
    var = float(w @ (support - mean) ** 2)
    v = idata.posterior["N"].values.astype(float)
    assert mcse_z(v, mean) < Z_MAX, (v.mean(), mean)
    assert mcse_z((v - mean) ** 2, var) < Z_MAX, (v.var(), var)
    assert float(az.rhat(idata)["N"]) < 1.05


def test_default_draw_of_integer_sites_is_their_jumps():
    """By default integer sites are not swept by single-site steps (their jump is their move):
    a block of integer sites only makes no steps, its stats describe the jumps; next to a
    binary site the draw makes one step per binary site, then the jumps."""
    with pm.Model():
        k = pm.Poisson("k", mu=30.0, shape=3)
        b = pm.Bernoulli("b", p=0.3)
        only_integer = LocallyBalanced([k])
        mixed = LocallyBalanced([k, b])
        idata = pm.sample(
            draws=200, tune=100, chains=1, step=[only_integer, mixed], random_seed=4, **SAMPLE
        )
    assert only_integer.steps_per_draw == 0 and mixed.steps_per_draw == 1
    stats = idata.sample_stats
    steps = stats["mh_steps"].values[0]  # (draw, step): PyMC stacks the two steps' stats
    assert np.all(steps[:, 0] == 0) and np.all(steps[:, 1] == 1)
    np.testing.assert_allclose(
        stats["accept"].values[0][:, 0], stats["integer_accept"].values[0][:, 0]
    )
    assert stats["n_accepted"].values[0][:, 0].sum() > 0
