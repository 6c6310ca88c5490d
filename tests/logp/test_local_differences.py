"""Local exact differences (pymc_lbp.logp.local_differences) equal the batched exact differences.

Every model is compared at many random states: the local method (few elementwise evaluations of
the model's terms) against the batched method (the whole model logp at every neighbour), to
1e-10, with the same ``-inf`` slots. Independent numpy log-densities check a few models besides.
"""

from __future__ import annotations

import logging

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pymc_lbp.logp.dependency_analysis import NotLocalError
from pymc_lbp.logp.differences import ExactDifferences
from pymc_lbp.logp.layout import BlockLayout, describe_block
from pymc_lbp.logp.local_plan import build_local_plan
from pymc_lbp.models import ising_log_density, potts_model, read_uai, segmentation_model

ATOL = 1e-10


def _pair(model, names=None):
    """``(batched, local, shared)``: ExactDifferences of the model's block ``names`` (default:
    all discrete variables) and the other variables' shared values by name."""
    ip = model.initial_point()
    if names is None:
        names = [v.name for v in model.value_vars if v.dtype.startswith("int")]
    vars_ = [model.rvs_to_values[model[n]] for n in names]
    specs = describe_block(model, vars_, ip)
    shared = pm.make_shared_replacements(ip, vars_, model)
    batched = ExactDifferences(model, specs, BlockLayout(specs), shared, method="batched")
    local = ExactDifferences(model, specs, BlockLayout(specs), shared, method="local")
    return batched, local, {k.name: v for k, v in shared.items()}


def _random_state(diffs, rng):
    lay = diffs.layout
    diffs.refresh_bounds(np.zeros(lay.n_sites, dtype=np.int64))  # constant bounds here
    x = np.empty(lay.n_sites, dtype=np.int64)
    for i in range(lay.n_sites):
        if lay.site_kind[i] == 0:
            x[i] = rng.integers(0, 2)
        elif lay.site_kind[i] == 1:
            x[i] = rng.integers(0, lay.site_ncat[i])
        else:
            x[i] = rng.integers(int(lay.lower[i]), int(min(lay.upper[i], lay.lower[i] + 8)) + 1)
    return x


def _assert_same(batched, local, x):
    batched.refresh_bounds(x)
    local.refresh_bounds(x)
    lb, db = batched(x)
    ll, dl = local(x)
    assert not np.isnan(dl).any()
    np.testing.assert_allclose(ll, lb, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(np.isneginf(dl), np.isneginf(db))
    np.testing.assert_array_equal(np.isposinf(dl), np.isposinf(db))
    finite = np.isfinite(db)
    np.testing.assert_allclose(dl[finite], db[finite], rtol=0, atol=ATOL)
    return lb, db


def _compare(model, n_states=20, names=None, seed=0, state=None):
    batched, local, shared = _pair(model, names)
    assert local.method == "local", local.method_reason
    rng = np.random.default_rng(seed)
    finite = 0
    for _ in range(n_states):
        x = _random_state(batched, rng) if state is None else state(rng)
        lb, _ = _assert_same(batched, local, x)
        finite += np.isfinite(lb)
    assert finite > 0, "no state of finite logp was compared"
    return batched, local, shared


# --------------------------------------------------------------------------- lattices
def user_ising(n, lam=1.0, seed=0):
    """The LSB Ising as a PyMC user writes it: spins from a Bernoulli image, pt.roll coupling."""
    alpha = np.random.default_rng(seed).normal(size=(n, n))
    with pm.Model() as model:
        b = pm.Bernoulli("b", logit_p=2 * alpha, shape=(n, n))
        s = 2 * b - 1
        pm.Potential(
            "coupling", lam * (pt.sum(s * pt.roll(s, 1, 0)) + pt.sum(s * pt.roll(s, 1, 1)))
        )
    return model, alpha


@pytest.mark.parametrize("n", [8, 7])
def test_ising_model_matches_batched_and_numpy(n):
    model = segmentation_model(case=3, n=n)
    batched, local, _ = _compare(model)
    # two colours on an even torus, three on an odd one
    assert local._local.plan.n_colours == (2 if n % 2 == 0 else 3)
    x = np.random.default_rng(5).integers(0, 2, n * n)
    logp, deltas = local(x)
    ref = ising_log_density(x, (n, n), 1.0, model.alpha)
    for i in range(n * n):
        y = x.copy()
        y[i] = 1 - y[i]
        want = ising_log_density(y, (n, n), 1.0, model.alpha) - ref
        assert abs(deltas[i] - want) < 1e-9


def test_user_written_ising_with_roll():
    model, _ = user_ising(6)
    _, local, _ = _compare(model)
    assert local._local.plan.n_colours == 2
    assert local._local.plan.n_global_pieces == 0


def test_potts_categorical():
    field = np.random.default_rng(1).normal(size=(5, 4, 3))
    model = potts_model((5, 4), n_states=3, coupling=0.7, field=field)
    _, local, _ = _compare(model)
    # 3 categories per site, so 3 moved states per colour
    plan = local._local.plan
    assert plan.n_rows == 3 * plan.n_colours


def test_uai_grid(uai_dir):
    model = read_uai(uai_dir / "uai2014_mar" / "Grids_12.uai")
    _compare(model, n_states=10)


# --------------------------------------------------------------------------- user models
def test_gaussian_mixture_with_shared_continuous_parameters():
    rng = np.random.default_rng(2)
    y = np.concatenate([rng.normal(-2, 1, 15), rng.normal(3, 1, 15)])
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(3))
        mu = pm.Normal("mu", 0, 5, shape=3)
        sigma = pm.HalfNormal("sigma", 2)
        z = pm.Categorical("z", p=w, shape=y.size)
        pm.Normal("y", mu[z], sigma, observed=y)
    batched, local, shared = _compare(model, names=["z"])
    # the continuous parameters move (as NUTS would move them): still equal
    values = {
        "w_simplex__": np.array([0.3, -0.2]),
        "mu": np.array([-1.5, 0.2, 2.5]),
        "sigma_log__": np.array(0.3),
    }
    for name, val in values.items():
        shared[name].set_value(val)
    rng = np.random.default_rng(3)
    for _ in range(10):
        _assert_same(batched, local, _random_state(batched, rng))


def test_hmm_transition_gather():
    P = np.array([[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.3, 0.2, 0.5]])
    emis = np.random.default_rng(4).normal(size=(12, 3))
    with pm.Model() as model:
        z = pm.Categorical("z", p=np.ones(3) / 3, shape=12)
        pm.Potential("transitions", pt.sum(pt.log(pt.as_tensor(P)[z[:-1], z[1:]])))
        pm.Potential("emissions", pt.sum(pt.as_tensor(emis)[pt.arange(12), z]))
    _, local, _ = _compare(model)
    assert local._local.plan.n_colours == 2


def test_integer_variables_with_bounds_in_a_mixed_block():
    with pm.Model() as model:
        k = pm.Binomial("k", n=6, p=0.4, shape=8)
        u = pm.DiscreteUniform("u", 2, 7, shape=5)
        c = pm.Poisson("c", 3.0, shape=4)
        b = pm.Bernoulli("b", 0.3, shape=6)
        pm.Potential("chain", -0.1 * pt.sum((k[1:] - k[:-1]) ** 2))
        pm.Potential("mix", 0.2 * pt.sum(u[:4] * c) - 0.3 * pt.sum(b[:5] * u))
    batched, local, _ = _compare(model)
    # bounds masked: a k at 6 cannot go up, a u at 2 cannot go down
    x = _random_state(batched, np.random.default_rng(9))
    x[0], x[8] = 6, 2
    local.refresh_bounds(x)
    _, d = local(x)
    assert np.isneginf(d[1]) and np.isneginf(d[2 * 8])


def test_zero_probability_neighbours_are_minus_inf():
    """A pairwise table with zeros: forbidden neighbours are -inf, never NaN."""
    table = np.array([[1.0, 0.0, 2.0], [0.5, 1.0, 0.0], [0.0, 3.0, 1.0]])
    with pm.Model() as model:
        z = pm.Categorical("z", p=np.ones(3) / 3, shape=10)
        pm.Potential("pairs", pt.sum(pt.log(pt.as_tensor(table)[z[:-1], z[1:]])))
    rng = np.random.default_rng(6)

    def feasible(rng):
        # a random walk on the table's support
        x = [rng.integers(3)]
        for _ in range(9):
            x.append(rng.choice(np.flatnonzero(table[x[-1]] > 0)))
        return np.array(x, dtype=np.int64)

    batched, local, _ = _compare(model, state=feasible)
    _, d = local(feasible(rng))
    assert np.isneginf(d).sum() > 10  # current values and forbidden moves
    # from a zero-probability state, the batched method's answer
    x = np.zeros(10, dtype=np.int64)
    x[1] = 1  # table[0, 1] = 0
    _assert_same(batched, local, x)


def _occupancy(n_sites=12, visits=3, seed=3):
    rng = np.random.default_rng(seed)
    z_true = rng.random(n_sites) < 0.6
    y = (rng.random((n_sites, visits)) < 0.5) & z_true[:, None]
    with pm.Model() as model:
        z = pm.Bernoulli("z", p=0.6, shape=n_sites)
        pm.Bernoulli("y", p=z[:, None] * 0.5, observed=y.astype(int))

    def state(rng):  # occupied wherever detected, anything elsewhere
        return (y.any(axis=1) | (rng.random(n_sites) < 0.5)).astype(np.int64)

    return model, state


def _n_mixture(n_sites=6, visits=3, seed=4):
    rng = np.random.default_rng(seed)
    y = rng.binomial(rng.poisson(6, n_sites)[:, None], 0.5, size=(n_sites, visits))
    with pm.Model() as model:
        n = pm.Poisson("N", mu=6.0, shape=n_sites)
        pm.Binomial("y", n=n[:, None], p=0.5, observed=y)

    def state(rng):  # at least the largest count, but also below it now and then
        return (y.max(axis=1) + rng.integers(-1, 5, n_sites)).clip(0).astype(np.int64)

    return model, state


def _shifted_binomial(n_sites=3):
    """``y ~ Binomial(N - 3, 0.4)``: states with ``N < 3`` fail the parameter check ``n >= 0``."""
    with pm.Model() as model:
        n = pm.DiscreteUniform("N", 0, 12, shape=n_sites)
        pm.Binomial("y", n=n - 3, p=0.4, observed=np.zeros(n_sites, dtype=int))
    return model, lambda rng: rng.integers(0, 9, n_sites).astype(np.int64)


@pytest.mark.parametrize("build", [_occupancy, _n_mixture, _shifted_binomial])
def test_parameter_checks_are_applied_element_by_element(build):
    """A parameter check depending on the block (``Bernoulli(z * p)``, ``Binomial(N, p)``)
    reduces over its whole term; applied element by element the term is local (no global
    piece), and the differences equal the batched ones, also at states where a check fails
    (the N-mixture below its counts, the shifted Binomial's negative ``n``)."""
    model, state = build()
    _, local, _ = _compare(model, n_states=30, state=state)
    assert local._local.plan.n_global_pieces == 0, local.method_reason


def test_global_term_is_evaluated_at_every_neighbour():
    """A Potential of a nonlinear function of the whole block (not local): exact all the same."""
    model, _ = user_ising(5)
    with model:
        b = model["b"]
        pm.Potential("size", -0.05 * (pt.sum(b) - 12.0) ** 2)
    _, local, _ = _compare(model)
    plan = local._local.plan
    assert plan.n_global_pieces == 1 and plan.n_local_pieces >= 1


def test_dense_terms_are_global_and_exact():
    """Every coupling term depends on all sites (tanh of a dense product, a square of the sum):
    they are evaluated at every neighbour, the Bernoulli prior locally; exact all the same."""
    W = np.random.default_rng(7).normal(size=(40, 40))
    with pm.Model() as model:
        x = pm.Bernoulli("x", 0.4, shape=40)
        xf = pt.cast(x, "float64")
        pm.Potential("dense", pt.sum(pt.tanh(pt.dot(W, xf))))
        pm.Potential("all", pt.sum(xf) ** 2 * 0.01)
    _, local, _ = _compare(model, n_states=10)
    plan = local._local.plan
    assert plan.n_global_pieces == 2 and plan.n_local_pieces == 1


def test_no_local_term_falls_back_to_batched(caplog):
    """No piece is local (here: every element counts as global): batched, with the reason."""
    model = segmentation_model(case=3, n=8)
    ip = model.initial_point()
    specs = describe_block(model, model.value_vars, ip)
    shared = pm.make_shared_replacements(ip, model.value_vars, model)
    opts = {"max_term_sites": 0}
    with pytest.raises(NotLocalError):
        ExactDifferences(
            model, specs, BlockLayout(specs), shared, method="local", local_options=opts
        )
    with caplog.at_level(logging.DEBUG, logger="pymc_lbp"):
        auto = ExactDifferences(model, specs, BlockLayout(specs), shared, local_options=opts)
    assert auto.method == "batched" and "no usable locality" in auto.method_reason
    assert "batched" in caplog.text
    x = np.random.default_rng(0).integers(0, 2, 64)
    ref = ising_log_density(x, (8, 8), 1.0, model.alpha)
    flipped = np.where(np.eye(64, dtype=bool), 1 - x, x)
    want = ising_log_density(flipped, (8, 8), 1.0, model.alpha) - ref
    np.testing.assert_allclose(auto(x)[1], want, rtol=0, atol=1e-9)


def test_value_dependent_shapes_are_refused_or_exact():
    """``x[:k]`` with k in the block: the shape depends on the state. The batched method cannot
    vectorise it; the local one must refuse it or be exact (checked against the model logp)."""
    with pm.Model() as model:
        k = pm.DiscreteUniform("k", 1, 9)
        x = pm.Bernoulli("x", 0.5, shape=10)
        pm.Potential("prefix", pt.sum(x[:k]) * 0.3)
        pm.Potential("pairs", pt.sum(x[1:] * x[:-1]) * 0.2)
    ip = model.initial_point()
    vars_ = [model.rvs_to_values[model["k"]], model.rvs_to_values[x]]
    specs = describe_block(model, vars_, ip)
    shared = pm.make_shared_replacements(ip, vars_, model)
    try:
        local = ExactDifferences(model, specs, BlockLayout(specs), shared, method="local")
    except NotLocalError:
        return
    logp = model.compile_logp()
    rng = np.random.default_rng(8)
    for _ in range(10):
        x0 = np.concatenate([[rng.integers(1, 10)], rng.integers(0, 2, 10)]).astype(np.int64)
        local.refresh_bounds(x0)
        lp, d = local(x0)
        new, valid = local.layout.candidates(x0)
        for s in range(local.layout.n_slots):
            if not valid[s]:
                assert np.isneginf(d[s])
                continue
            y = x0.copy()
            y[local.layout.slot_site[s]] = new[s]
            want = logp({"k": y[0], "x": y[1:]}) - lp
            assert abs(d[s] - want) < ATOL


def test_auto_uses_local_on_large_blocks_and_batched_on_small():
    model = segmentation_model(case=3, n=10)
    ip = model.initial_point()
    vars_ = model.value_vars
    specs = describe_block(model, vars_, ip)
    shared = pm.make_shared_replacements(ip, vars_, model)
    auto = ExactDifferences(model, specs, BlockLayout(specs), shared)
    assert auto.method == "local"
    # cost: the two colours' moved states and the state itself, not one per neighbour
    assert auto.logp_evals_per_call == 3
    small = segmentation_model(case=3, n=4)
    specs = describe_block(small, small.value_vars, small.initial_point())
    shared = pm.make_shared_replacements(small.initial_point(), small.value_vars, small)
    auto = ExactDifferences(small, specs, BlockLayout(specs), shared)
    assert auto.method == "batched" and "small block" in auto.method_reason


def test_plan_graphs_match_the_callable():
    """The graph builder (for compiled kernels) gives the same (logp, deltas) graphs."""
    import pytensor

    model, _ = user_ising(6)
    batched, local, _ = _pair(model)
    plan = build_local_plan(model, batched.layout, batched._replace, batched._x, batched._bounds)
    x = np.random.default_rng(10).integers(0, 2, 36)
    lb, db = batched(x)
    for p in (plan, local.local_plan):
        lp, d = pytensor.function([p.x], [p.logp, p.deltas])(x)
        assert abs(lp - lb) < ATOL
        np.testing.assert_allclose(d, db, rtol=0, atol=ATOL)
    assert batched.local_plan is None


def test_shared_shape_change_is_refused():
    with pm.Model() as model:
        data = pm.Data("data", np.ones(64))
        x = pm.Bernoulli("x", 0.5, shape=64)
        pm.Potential("d", pt.sum(pt.cast(x, "float64") * data[:64]))
        pm.Potential("pairs", pt.sum(x[1:] * x[:-1]) * 0.5)
    _, local, _ = _pair(model, ["x"])
    x0 = np.zeros(64, dtype=np.int64)
    local(x0)
    data.set_value(np.ones(70))
    with pytest.raises(ValueError, match="changed shape"):
        local(x0)


def test_self_check_catches_a_wrong_analysis(monkeypatch):
    """A wrong colouring (all sites one colour) is caught on the first call: a warning, and the
    batched evaluation from then on."""
    import pymc_lbp.logp.local_plan as local_plan  # build_local_plan looks the colouring up there

    monkeypatch.setattr(
        local_plan, "greedy_colouring", lambda a: np.zeros(a.shape[0], dtype=np.int64)
    )
    model, _ = user_ising(5)
    batched, local, _ = _pair(model)
    x = np.random.default_rng(11).integers(0, 2, 25)
    with pytest.warns(UserWarning, match="self-check"):
        _assert_same(batched, local, x)
    assert local.method == "batched" and "self-check" in local.method_reason
    _assert_same(batched, local, 1 - x)


def test_pickled_local_differences_give_the_same_answers():
    import cloudpickle

    model = segmentation_model(case=3, n=8)
    batched, local, _ = _pair(model)
    again = cloudpickle.loads(cloudpickle.dumps(local))
    assert again.method == "local"
    x = np.random.default_rng(12).integers(0, 2, 64)
    _assert_same(batched, again, x)


def test_samplers_with_exact_differences_use_the_local_method(general_paths):
    """(With the numba kernels on, this pairwise lattice takes its couplings, which are read off
    these local differences: ``tests/samplers/pairwise/test_pairwise.py``.)"""
    from pymc_lbp import LocallyBalanced

    model = segmentation_model(case=3, n=10)
    with model:
        step = LocallyBalanced([model["x"]], differences="exact", steps_per_draw=3)
        idata = pm.sample(
            draws=5, tune=5, step=[step], chains=1, cores=1, random_seed=3,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    assert step.differences.method == "local"
    # per call: the state and its two colours' moved states, not one evaluation per neighbour
    assert idata.sample_stats["logp_evals"].values.max() <= 4 * 3


def _chain_marginals(h: np.ndarray, J: float) -> np.ndarray:
    """Exact P(x_i = 1) of the open Ising chain ``sum h_i s_i + J sum s_i s_{i+1}`` (s = 2x - 1),
    by forward-backward on the 2-state transfer matrices."""
    s = np.array([-1.0, 1.0])
    unary = np.exp(h[:, None] * s[None, :])
    pair = np.exp(J * np.outer(s, s))
    n = h.size
    fwd = np.empty((n, 2))
    bwd = np.empty((n, 2))
    fwd[0] = unary[0] / unary[0].sum()
    for i in range(1, n):
        f = (fwd[i - 1] @ pair) * unary[i]
        fwd[i] = f / f.sum()
    bwd[-1] = 1.0
    for i in range(n - 2, -1, -1):
        b = pair @ (unary[i + 1] * bwd[i + 1])
        bwd[i] = b / b.sum()
    post = fwd * bwd
    return post[:, 1] / post.sum(axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["local", "pairwise"])
def test_locally_balanced_with_local_differences_matches_exact_marginals(kernel, monkeypatch):
    """pm.sample with LocallyBalanced (exact differences: the local method, or the couplings of
    the pairwise kernel read off them) on a 64-site Ising chain: marginals within Bonferroni MCSE
    bounds of the forward-backward answer (600 draws a chain: the smallest ESS of the 64
    marginals was 209-241 at 400, against the helper's floor of 200)."""
    from pymc_lbp import LocallyBalanced
    from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel

    monkeypatch.setattr(pairwise_kernel, "ENABLED", kernel == "pairwise")
    from tests.helpers.frequencies import marginal_z_scores

    h = np.random.default_rng(13).normal(scale=0.7, size=64)
    J = 0.6
    with pm.Model():
        x = pm.Bernoulli("x", logit_p=2 * h, shape=64)
        s = 2 * x - 1
        pm.Potential("coupling", J * pt.sum(s[:-1] * s[1:]))
        step = LocallyBalanced([x], differences="exact", steps_per_draw=32)
        idata = pm.sample(
            draws=600, tune=100, step=[step], chains=2, cores=1, random_seed=14,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    assert step.differences.method == kernel
    values = np.asarray(idata.posterior["x"])
    draws = {i: values[..., i] for i in range(64)}
    p1 = _chain_marginals(h, J)
    exact = [np.array([1 - p, p]) for p in p1]
    zs, crit, violations = marginal_z_scores(draws, exact)
    assert not violations
    assert zs.max() < crit, (zs.max(), crit)


@pytest.mark.parametrize("build", [_n_mixture, _shifted_binomial])
def test_class_rows_equal_the_batched_rows(build):
    """``SitePieces.class_rows`` (one evaluation of the elements per column, all the class's
    sites moved at once) gives the logp of every one-site change, as the batched whole-model
    rows do, also where a parameter check fails (counts above their abundance), from states
    of finite logp."""
    import pytensor

    from pymc_lbp.logp.site_pieces import site_pieces

    model, state = build()
    batched, _, _ = _pair(model)
    pieces = site_pieces(
        model, batched._replace, batched._x, batched.layout.n_sites, state(np.random.default_rng(0))
    )
    assert pieces is not None
    n = batched.layout.n_sites
    x = pt.vector("x", dtype="int64")
    values = pt.matrix("values", dtype="int64")
    sites = np.arange(n)  # the abundances share no term: one class
    fn = pytensor.function([x, values], pieces.class_rows(x, sites, values))
    site_logp = batched.site_logp_function()
    rng = np.random.default_rng(5)
    compared = impossible = 0
    for _ in range(30):
        xv = state(rng)
        vals = (xv[:, None] + rng.integers(-4, 5, size=(n, 7))).clip(0)
        logp_x, rows = site_logp(xv, np.repeat(sites, 7), vals.ravel())
        if not np.isfinite(logp_x):  # the kernels never move from an impossible state
            continue
        got = logp_x + fn(xv, vals)
        want = np.asarray(rows).reshape(n, 7)
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
        ok = np.isfinite(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=0, atol=1e-9)
        compared += 1
        impossible += int((~ok).sum())
    assert compared >= 5 and impossible > 0
