"""Pairwise binary blocks: structure, couplings, the numba kernel's exact transitions, sampling.

The kernel (:mod:`pymc_lbp.samplers.pairwise.kernel`) is checked against transition matrices
enumerated independently of the package (``tests/helpers/kernels.py`` for the single-site kernel,
``tests/samplers/path/test_path_auxiliary_kernel.py`` for the path mixture): rows of independent
one-step draws from fixed states, chi-square at a false-alarm rate of 1e-4 per row (fixed seeds),
and each check shown able to fail (the rows reject a kernel with a different path length). Through
``pm.sample`` the visit frequencies of every state are compared with the enumerated target
(z-scores with ArviZ's ESS, Bonferroni at 1e-3), and a perturbed target must be rejected.
"""

from __future__ import annotations

import itertools
import math

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_lbp import GibbsWithGradients, LocallyBalanced, PathAuxiliaryLBP, SelfBalancing
from pymc_lbp.samplers.pairwise.couplings import PairwiseDifferences, neighbour_colouring
from pymc_lbp.samplers.pairwise.kernel import LEARNED_CODES, adapt_update, log_g
from pymc_lbp.samplers.path.adaptation import PathLengthAdaptation
from tests.helpers.frequencies import max_z_score
from tests.helpers.kernels import chi_square_pvalue, empirical_row, locally_balanced_kernel
from tests.samplers.path.test_path_auxiliary_kernel import exact_deltas, mixture_kernel

ALPHA = 1e-4

N = 5
EDGES = np.array([(0, 1), (1, 2), (2, 3), (3, 4), (0, 4), (1, 3)])
_rng = np.random.default_rng(20261125)
H = _rng.normal(0.0, 1.0, N)
J = _rng.normal(0.0, 1.2, len(EDGES))
STATES = np.array(list(itertools.product(range(2), repeat=N)), dtype=np.int64)


def edge_model(h=H, j=J, extra=None) -> pm.Model:
    """Fields and couplings on an edge list, written with constant-index gathers."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=N)
        pm.Potential("field", pt.sum(h * x))
        pm.Potential("pairs", pt.sum(j * x[EDGES[:, 0]] * x[EDGES[:, 1]]))
        if extra is not None:
            pm.Potential("extra", extra(x))
    return model


def table_logp(h=H, j=J) -> np.ndarray:
    x = STATES.astype(float)
    return x @ h + (x[:, EDGES[:, 0]] * x[:, EDGES[:, 1]]) @ j


def dense_couplings() -> np.ndarray:
    W = np.zeros((N, N))
    W[EDGES[:, 0], EDGES[:, 1]] = J
    return W + W.T


def user_ising(n: int = 3, lam: float = 0.6, field: float = 1.0) -> pm.Model:
    """A Bernoulli image, spins from it, ``pt.roll`` couplings: the user-written Ising."""
    alpha = field * np.linspace(-0.5, 0.5, n * n).reshape(n, n)
    with pm.Model() as model:
        b = pm.Bernoulli("b", p=0.5, shape=(n, n))
        s = 2 * b - 1
        pm.Potential("evidence", pt.sum(alpha * s))
        pm.Potential("smooth", lam * pt.sum(s * pt.roll(s, 1, 0) + s * pt.roll(s, 1, 1)))
    return model


# --------------------------------------------------------------------------- structure, couplings
def test_couplings_of_an_edge_model_are_its_fields_and_couplings():
    with edge_model():
        step = PathAuxiliaryLBP()
    d = step.differences
    assert isinstance(d, PairwiseDifferences)
    assert step.differences_kind == "exact" and "pairwise" in step.differences_reason
    indptr, indices, data = d.couplings
    W = np.zeros((N, N))
    for i in range(N):
        W[i, indices[indptr[i] : indptr[i + 1]]] = data[indptr[i] : indptr[i + 1]]
    np.testing.assert_allclose(W, dense_couplings(), atol=1e-12)
    np.testing.assert_allclose(d.b, H, atol=1e-12)
    # the differences of a call are the exact ones at every state
    lp = table_logp()
    index = {tuple(s): k for k, s in enumerate(STATES)}
    for a, x in enumerate(STATES):
        logp, deltas = d(x)
        flipped = [index[tuple(np.where(np.arange(N) == i, 1 - x, x))] for i in range(N)]
        np.testing.assert_allclose(deltas, lp[flipped] - lp[a], atol=1e-12)
        assert logp == pytest.approx(lp[a] + N * math.log(0.5), abs=1e-6)  # p = 0.5 as floatX


def test_user_written_ising_is_pairwise_and_a_colouring_separates_neighbours():
    with user_ising(4):
        step = LocallyBalanced()
    d = step.differences
    assert isinstance(d, PairwiseDifferences)
    _, indices, data = d.couplings
    np.testing.assert_allclose(data, 4 * 0.6)  # lam s_i s_j with s = 2 b - 1
    assert indices.size == 16 * 4  # four neighbours per site on the 4x4 torus
    import scipy.sparse as sp

    A = sp.csr_matrix((np.ones_like(data), indices, d.couplings[0]), shape=(16, 16))
    for members in neighbour_colouring(A):
        # no site has two neighbours of one colour
        assert (A[:, members].sum(axis=1)).max() <= 1


@pytest.mark.parametrize(
    "extra, why",
    [
        (lambda x: 0.3 * x[0] * x[1] * x[2], "3 sites"),
        (lambda x: 0.1 * pt.sum(x) ** 2 + 0.0 * pt.dot(x, x), "couples sites"),
    ],
)
def test_terms_of_more_than_two_sites_are_not_pairwise(extra, why):
    with edge_model(extra=extra):
        step = PathAuxiliaryLBP()
    assert not isinstance(step.differences, PairwiseDifferences)


def test_a_hard_constraint_takes_the_general_path():
    # x0 = x1 = 0 is impossible: the couplings are not finite
    with edge_model(extra=lambda x: pt.switch(pt.eq(x[0] + x[1], 0), -np.inf, 0.0)):
        step = LocallyBalanced()
    assert not isinstance(step.differences, PairwiseDifferences)


def test_gradient_asked_for_keeps_gradient_differences():
    with edge_model():
        step = GibbsWithGradients(differences="gradient")
    assert step.differences_kind == "gradient"
    assert not step.pairwise_ready()


def test_couplings_follow_set_data():
    with pm.Model() as model:
        lam = pm.Data("lam", 0.5)
        x = pm.Bernoulli("x", 0.5, shape=N)
        pm.Potential("pairs", lam * pt.sum(x[EDGES[:, 0]] * x[EDGES[:, 1]]))
        step = PathAuxiliaryLBP()
    d = step.differences
    assert isinstance(d, PairwiseDifferences)
    x = np.array([1, 0, 1, 1, 0])
    before = d.extractions
    d(x)
    assert d.extractions == before  # nothing changed: no extraction
    with model:
        pm.set_data({"lam": 2.0})
    _, deltas = d(x)
    assert d.extractions == before + 1
    np.testing.assert_allclose(deltas, d.exact(x)[1], atol=1e-12)
    np.testing.assert_allclose(np.unique(d.couplings[2]), 2.0)


def test_pickled_step_keeps_its_couplings():
    with edge_model():
        step = PathAuxiliaryLBP()
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    assert clone.pairwise_ready()
    x = STATES[11]
    np.testing.assert_allclose(clone.differences(x)[1], step.differences(x)[1])


# --------------------------------------------------------------------------- pieces of the kernel
def test_adaptation_in_the_kernel_is_the_reference_arithmetic():
    """The update the kernel compiles (the one copy, adapt_update) gives in numba what the
    adaptation's update gives in Python."""
    import numba

    compiled = numba.njit(adapt_update)
    a = PathLengthAdaptation(0.574, 50)
    rng = np.random.default_rng(3)
    ref = (0.0, 0.0, 0, True)
    ours = ref
    for accept in rng.random(300) ** 0.5:
        ref = a.update(ref[0], ref[1], ref[2], accept, ref[3])
        ours = compiled(
            ours[0], ours[1], ours[2], accept, ours[3], a.target, a.max_length, a.gamma0, a.t0,
            a.kappa, a.avg_kappa,
        )  # fmt: skip
        assert ours == pytest.approx(ref, rel=1e-15, abs=1e-15)
        assert ours[3] == ref[3]


@pytest.mark.parametrize("name", ["sqrt", "barker", "min", "max"])
def test_balancing_functions_match_the_reference(name):
    from pymc_lbp.samplers.balancing import BALANCING_FUNCTIONS

    d = np.array([-800.0, -30.0, -1.0, 0.0, 0.3, 30.0, 800.0])
    ours = np.array([log_g(v, ["sqrt", "barker", "min", "max"].index(name)) for v in d])
    np.testing.assert_allclose(ours, BALANCING_FUNCTIONS[name](d), rtol=1e-14, atol=0)


# --------------------------------------------------------------------------- exact transitions
def _rows(step, starts, n, seed):
    step.rng = np.random.default_rng(seed)
    return [empirical_row(step, STATES[a].copy(), STATES, n) for a in starts]


@pytest.mark.parametrize("balancing", ["sqrt", "barker", "min", "max"])
def test_single_site_kernel_rows_match_the_enumerated_kernel(balancing):
    with edge_model():
        step = LocallyBalanced(balancing=balancing, steps_per_draw=1)
    assert step.pairwise_ready()
    T = locally_balanced_kernel(STATES, table_logp(), [("binary",)] * N, balancing)
    starts = [0, 13, 22, 31]
    for a, counts in zip(starts, _rows(step, starts, 3000, 11), strict=True):
        assert chi_square_pvalue(counts, T[a]) > ALPHA, (balancing, a)


@pytest.mark.parametrize("parametrization", ["lsb1", "lsb2", "lsb2_min"])
def test_learned_balancing_functions_match_their_definitions(parametrization):
    """SelfBalancing's learned functions in the kernel: LSB1's mixture and LSB2's interpolated
    even part give the numpy parametrization's values."""
    from pymc_lbp.samplers.self_balancing.parametrizations import make_parametrization

    par = make_parametrization(parametrization, 6)
    params = np.random.default_rng(4).normal(scale=1.5, size=par.n_params)
    if parametrization == "lsb1":
        code, arg = LEARNED_CODES["lsb1"], par.weights(params)
    else:
        code, arg = LEARNED_CODES["table"], par.even_part(params)
    d = np.array([-800.0, -31.0, -7.3, -1.0, 0.0, 0.03, 2.5, 29.99, 30.0, 45.0, 800.0])
    ours = np.array([log_g(v, code, arg) for v in d])
    np.testing.assert_allclose(ours, par.log_g(d, params), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("parametrization", ["lsb1", "lsb2"])
def test_self_balancing_kernel_rows_match_the_enumerated_kernel(parametrization):
    """SelfBalancing with learned (here: random) parameters on a pairwise block runs the numba
    kernel; its one-step rows follow the locally balanced kernel enumerated independently with
    that g (tests/samplers/self_balancing/test_self_balancing.py's independent functions)."""
    from tests.samplers.self_balancing.test_self_balancing import (
        independent_kernel,
        independent_log_g,
    )

    with edge_model():
        step = SelfBalancing(family=parametrization, steps_per_draw=1)
    assert step.pairwise_ready()
    params = np.random.default_rng(8).normal(scale=1.0, size=step.lsb_params.size)
    step.lsb_params = params
    step.stop_tuning()
    lp = table_logp()
    index = {tuple(s): k for k, s in enumerate(STATES)}
    T, _ = independent_kernel(
        STATES, lambda x: lp[index[tuple(x)]], [("binary",)] * N,
        independent_log_g(parametrization, params),
    )  # fmt: skip
    starts = [0, 13, 22, 31]
    for a, counts in zip(starts, _rows(step, starts, 3000, 12), strict=True):
        assert chi_square_pvalue(counts, T[a]) > ALPHA, (parametrization, a)
    # power: the same rows reject the kernel of another g (sqrt; rows differ by 0.08 / 0.23)
    T_sqrt = locally_balanced_kernel(STATES, lp, [("binary",)] * N, "sqrt")
    counts = _rows(step, [13], 3000, 12)[0]
    assert chi_square_pvalue(counts, T_sqrt[13]) < ALPHA


def _path_reference(scale, share):
    lp = table_logp()
    index = {tuple(s): k for k, s in enumerate(STATES)}

    def logp(x):
        return lp[index[tuple(x)]]

    def moves(x):
        return [(i, 1 - x[i]) for i in range(len(x))]

    states = [tuple(int(v) for v in s) for s in STATES]
    return mixture_kernel(states, logp, moves, exact_deltas(logp, moves), scale, share)


@pytest.mark.parametrize("scale, share", [(2.5, 0.2), (4.0, 0.1)])
def test_path_kernel_rows_match_the_enumerated_mixture(scale, share):
    with edge_model():
        step = PathAuxiliaryLBP(path_scale=scale, single_site_share=share, steps_per_draw=1)
    assert step.pairwise_ready()
    step.stop_tuning()
    T = _path_reference(scale, share)
    pi = np.exp(table_logp() - table_logp().max())
    np.testing.assert_allclose((pi / pi.sum()) @ T, pi / pi.sum(), atol=1e-12)
    starts = [0, 9, 21, 30]
    rows = _rows(step, starts, 4000, 5)
    for a, counts in zip(starts, rows, strict=True):
        assert chi_square_pvalue(counts, T[a]) > ALPHA, (scale, a)
    # the same rows reject the kernel of another path length (the test has power)
    other = _path_reference(scale - 1.0, share)
    assert min(_pvalue(c, other[a]) for a, c in zip(starts, rows, strict=True)) < ALPHA


def _pvalue(counts, probs):
    """The chi-square p-value, 0 when an outcome of probability 0 was observed."""
    if counts[probs == 0].sum():
        return 0.0
    return chi_square_pvalue(counts, probs)


# --------------------------------------------------------------------------- through pm.sample
def _visits(idata, name, n_sites):
    draws = idata.posterior[name].values.reshape(idata.posterior.chain.size, -1, n_sites)
    return draws


@pytest.mark.parametrize("sampler", [PathAuxiliaryLBP, GibbsWithGradients])
def test_pm_sample_on_the_user_ising_matches_enumeration(sampler):
    # a coupling weak enough that every sampler's indicator ESS is estimated well (at 0.6 the
    # mass sits on two far-apart states and PyMC's own Gibbs fails this test as well)
    model = user_ising(3, lam=0.2)
    with model:
        step = sampler()
        assert step.pairwise_ready()
        idata = pm.sample(
            draws=1500, tune=300, step=step, chains=2, cores=1, random_seed=42,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    states = np.array(list(itertools.product(range(2), repeat=9)), dtype=np.int64)
    fn = model.compile_logp()
    lp = np.array([fn({"b": s.reshape(3, 3)}) for s in states])
    probs = np.exp(lp - lp.max())
    probs /= probs.sum()
    draws = _visits(idata, "b", 9)
    z, crit = max_z_score(draws, states, probs)
    assert z < crit
    # power: the target with the evidence reversed is rejected by the same draws
    weak = user_ising(3, lam=0.2, field=-1.0).compile_logp()
    lp_weak = np.array([weak({"b": s.reshape(3, 3)}) for s in states])
    p_weak = np.exp(lp_weak - lp_weak.max())
    z_weak, _ = max_z_score(draws, states, p_weak / p_weak.sum())
    assert z_weak > crit
    assert idata.sample_stats.exact_differences.values.all()
    assert (idata.sample_stats.logp_evals.values == 1).all()  # one logp per draw, none per step


def test_couplings_follow_a_coupling_strength_sampled_by_nuts():
    """``lam * sum J x_i x_j`` with ``lam ~ HalfNormal(1)`` next to NUTS: the couplings are
    extracted again every draw, and the visit frequencies of ``x`` match the exact marginal
    ``p(x) ~ exp(H.x) E[exp(lam c(x))] = exp(H.x) 2 exp(c^2 / 2) Phi(c)``, ``c = J.pairs(x)``."""
    from scipy import stats

    with pm.Model():
        lam = pm.HalfNormal("lam", 1.0, initval=4.0)  # couplings stuck at 4 would show
        x = pm.Bernoulli("x", 0.5, shape=N)
        pm.Potential("field", pt.sum(H * x))
        pm.Potential("pairs", lam * pt.sum(J * x[EDGES[:, 0]] * x[EDGES[:, 1]]))
        step = PathAuxiliaryLBP([x])
        assert step.pairwise_ready()
        idata = pm.sample(
            draws=1500, tune=500, step=[step], chains=2, cores=1, random_seed=8,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    assert step.differences.extractions >= 1500  # at least once per draw of a chain
    xs = STATES.astype(float)
    c = (xs[:, EDGES[:, 0]] * xs[:, EDGES[:, 1]]) @ J
    lp = xs @ H + c**2 / 2 + stats.norm.logcdf(c)
    probs = np.exp(lp - lp.max())
    probs /= probs.sum()
    draws = idata.posterior["x"].values
    z, crit = max_z_score(draws, STATES, probs)
    assert z < crit
    # power: the target without couplings is rejected by the same draws
    p_free = np.exp(xs @ H)
    assert max_z_score(draws, STATES, p_free / p_free.sum())[0] > crit


@pytest.mark.parametrize("kernel", ["pairwise", "general"])
@pytest.mark.parametrize("sampler", [PathAuxiliaryLBP, LocallyBalanced])
def test_weights_far_below_the_scale_are_rescaled_not_lost(sampler, kernel, monkeypatch):
    """Site 0 has log-odds +1600 and starts off: its locally balanced weight (sqrt: 800 nats)
    sets the scale of the linear weights. Once it is on, every other weight lies ~800 nats below
    that scale, where ``exp`` underflows to 0: without rescaling, sites 1-3 could never move
    again. The chains must sample the eight states of sites 1-3 (with site 0 on) as enumeration
    says; the other eight states have probability ``e^-1600`` (never visited). The general
    kernels (numba off: the compiled path and single-site scans) score the reverse move in log
    space too."""
    from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel

    monkeypatch.setattr(pairwise_kernel, "ENABLED", kernel == "pairwise")
    h = np.array([1600.0, 0.5, -0.3, 0.2])
    edges = np.array([(1, 2), (2, 3), (1, 3)])
    j = np.array([0.7, -0.4, 0.9])
    with pm.Model():
        x = pm.Bernoulli("x", 0.5, shape=4, initval=np.zeros(4, dtype=np.int64))
        pm.Potential("field", pt.sum(h * x))
        pm.Potential("pairs", pt.sum(j * x[edges[:, 0]] * x[edges[:, 1]]))
        step = sampler([x])
        assert step.pairwise_ready() == (kernel == "pairwise")
        idata = pm.sample(
            draws=1000, tune=200, step=[step], chains=2, cores=1, random_seed=3,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    states = np.array(list(itertools.product(range(2), repeat=4)), dtype=np.int64)
    xs = states.astype(float)
    lp = xs @ h + (xs[:, edges[:, 0]] * xs[:, edges[:, 1]]) @ j
    probs = np.exp(lp - lp.max())
    probs /= probs.sum()
    draws = idata.posterior["x"].values
    assert np.all(np.isfinite(idata.sample_stats.lp.values))
    z, crit = max_z_score(draws, states, probs)  # also fails on a visit to a state of p = 0
    assert z < crit


def test_order_probability_in_log_space_agrees_and_survives_underflow():
    """The kernel's order log-probability (numba) against the numpy reference's, on random
    weights and paths (both branches: a path holding almost all the mass sums the rest
    directly), and where the linear weights underflow."""
    from pymc_lbp.samplers.pairwise.kernel import log_prob_order_log
    from pymc_lbp.samplers.path.reference import PathWeights, log_prob_order

    def both(log_w, sites):
        w = PathWeights.from_site_log_weights(log_w)
        ours = log_prob_order_log(w.site - w.top, w.lin, w.total, sites)
        return ours, log_prob_order(w, sites)

    rng = np.random.default_rng(4)
    for scale in (3.0, 30.0):  # 30: the largest weight holds almost all the mass
        for _ in range(50):
            log_w = rng.normal(0.0, scale, 12)
            log_w[rng.random(12) < 0.1] = -np.inf
            sites = rng.permutation(12)[: rng.integers(1, 13)]
            ours, ref = both(log_w, sites)
            assert ours == pytest.approx(ref, rel=1e-11, abs=1e-11)
    # a site 900 nats below the others: 0 on the linear scale, finite in log space
    log_w = np.array([0.0, -0.5, -900.0, -1.0])
    assert np.exp(log_w)[2] == 0.0
    sites = np.array([2, 0])
    expected = (-900.0 - np.logaddexp.reduce(log_w)) + (0.0 - np.logaddexp.reduce(log_w[[0, 1, 3]]))
    for got in both(log_w, sites):
        assert got == pytest.approx(expected, rel=1e-12)
    # every weight left underflows: the remaining mass as a log-sum-exp
    log_w = np.array([0.0, -900.0, -901.0])
    sites = np.array([0, 1, 2])
    expected = (0.0 - np.logaddexp.reduce(log_w)) + (-900.0 - np.logaddexp(-900.0, -901.0)) + 0.0
    for got in both(log_w, sites):
        assert got == pytest.approx(expected, rel=1e-12)


def _ring_model(writing: str) -> pm.Model:
    """A 6-site Ising ring written the ways the docs' table of the pairwise path lists."""
    ring = np.array([(i, (i + 1) % 6) for i in range(6)])
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.5, shape=6)
        s = 2 * x - 1
        if writing == "data_edges":
            edges = pm.Data("edges", ring)
            pm.Potential("ring", 0.4 * pt.sum(s[edges[:, 0]] * s[edges[:, 1]]))
            return model
        coupling = pm.HalfNormal("beta", 1.0) if writing == "continuous_coupling" else 0.4
        pm.Potential("ring", coupling * pt.sum(s[ring[:, 0]] * s[ring[:, 1]]))
        if writing == "masked_observed":
            y = np.ma.masked_invalid(np.array([0.1, np.nan, 0.3, 1.0, np.nan, -1.0]))
            pm.Normal("y", s, 1.0, observed=y)
    return model


@pytest.mark.parametrize(
    "writing, pairwise",
    [
        ("constant_edges", True),
        ("continuous_coupling", True),
        ("masked_observed", True),
        ("data_edges", False),
    ],
)
def test_which_writings_take_the_pairwise_path(writing, pairwise):
    """The table in docs/differences.md ("Which models take it"): constant edge lists,
    couplings that depend on a variable NUTS samples and masked observations take the pairwise
    path; an edge list held in ``pm.Data`` does not (the analysis needs constant indices)."""
    model = _ring_model(writing)
    with model:
        step = LocallyBalanced([model["x"]])
    assert (getattr(step.differences, "method", None) == "pairwise") is pairwise, (
        step.differences_reason
    )


def test_float32_takes_the_pairwise_path():
    import pytensor

    with pytensor.config.change_flags(floatX="float32"):
        model = _ring_model("constant_edges")
        with model:
            step = LocallyBalanced([model["x"]])
    assert step.differences.method == "pairwise"
