"""The discrete steps' draws in the JAX program make the numpy references' moves (issue #25).

A block's draw takes its uniforms from its key (:mod:`pymc_lbp.whole_model.discrete_blocks`:
the single-site steps' from the first half of ``jax.random.split(key)``, the jumps' from the
second); the same uniforms given to the numpy references
(:func:`pymc_lbp.samplers.single_site.reference.single_site_steps`,
:func:`pymc_lbp.samplers.integer.reference.block_jumps`) must give the same states and
summaries, with the other variables at the values the draw was given.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

pytest.importorskip("blackjax", reason="pymc_lbp[jax] extra (jax, blackjax) not installed")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import pymc_lbp  # noqa: E402
from pymc_lbp.samplers.single_site.reference import single_site_steps  # noqa: E402
from pymc_lbp.whole_model.discrete_blocks import block_draw  # noqa: E402
from pymc_lbp.whole_model.jaxify import model_value_replacements  # noqa: E402
from pymc_lbp.whole_model.sampling import _require_jax  # noqa: E402
from tests.helpers.integer_jumps import reference_jumps  # noqa: E402


def _jax_block(model, step, point):
    _require_jax()
    x = step.state_vector(point)
    block = block_draw(step, model, model_value_replacements(model, [step]), [x])
    values = tuple(jnp.asarray(point[v.name]) for v in model.value_vars)
    for name, shared in step.shared.items():  # the numpy references read the others here
        shared.set_value(point[name])
    return block, values, x


def _potts_model():
    """A categorical chain with a continuous field: not pairwise-binary, not independent."""
    with pm.Model() as model:
        c = pm.Categorical("c", p=np.ones(3) / 3, shape=5)
        h = pm.Normal("h", 0.0, 1.0, shape=3)
        pm.Potential("agree", 0.7 * pm.math.sum(pm.math.eq(c[1:], c[:-1])) + pm.math.sum(h[c]))
    return model


@pytest.mark.parametrize("cls", ["LocallyBalanced", "GibbsWithGradients"])
def test_single_site_steps_match_the_numpy_reference(cls):
    model = _potts_model()
    point = model.initial_point()
    point["c"] = np.array([0, 2, 1, 1, 0])
    point["h"] = np.array([0.4, -0.3, 0.9])
    with model:
        step = getattr(pymc_lbp, cls)([model["c"]], steps_per_draw=40, initial_point=point)
    block, values, x = _jax_block(model, step, point)
    n_moved = 0
    for seed in range(5):
        key = jax.random.PRNGKey(seed)
        new, _, stats = jax.jit(block.draw, static_argnums=3)(key, values, (), False)
        uniforms = np.asarray(jax.random.uniform(jax.random.split(key)[0], (40, 2)))
        logp, deltas = step.differences(x)
        ref = single_site_steps(
            x, logp, deltas, step.proposal_weights, step.layout, step.differences.evaluate, uniforms
        )
        np.testing.assert_array_equal(np.asarray(new[0]), ref.x)
        assert int(stats["n_accepted"]) == ref.n_accepted
        np.testing.assert_allclose(float(stats["accept"]), ref.sum_accept / 40, rtol=1e-9)
        n_moved += int(np.any(ref.x != x))
    assert n_moved >= 4  # the draws move (the comparison is not of standing chains)


def test_integer_jumps_match_the_numpy_reference():
    with pm.Model() as model:
        lam = pm.Gamma("lam", 3.0, 0.5)
        n = pm.Poisson("N", lam, shape=3)
        pm.Binomial("y", n, 0.6, observed=[5, 2, 7])
    point = model.initial_point()
    point["N"] = np.array([9, 4, 12])
    point["lam_log__"] = np.array(np.log(7.0))
    with model:
        step = pymc_lbp.LocallyBalanced([n], initial_point=point)
    block, values, x = _jax_block(model, step, point)
    _, reference = reference_jumps(step)
    n_moves = step.integer_moves.sites.size  # one move per integer site
    moved = 0
    for seed in range(5):
        key = jax.random.PRNGKey(seed)
        new, _, stats = jax.jit(block.draw, static_argnums=3)(key, values, (), False)
        uniforms = np.asarray(jax.random.uniform(jax.random.split(key)[1], (n_moves, 2)))
        ref = reference(x, uniforms)
        np.testing.assert_array_equal(np.asarray(new[1]), ref.x)
        np.testing.assert_allclose(float(stats["integer_accept"]), ref.sum_accept / n_moves)
        moved += int(np.any(ref.x != x))
    assert moved >= 3


def test_path_steps_match_the_compiled_kernel_with_the_same_noise():
    """The path kernel in JAX (with its adaptation while tuning) against the pytensor-compiled
    kernel (:class:`~pymc_lbp.samplers.path.graph.CompiledPathSteps`, itself tested move for
    move against the numpy reference) on the same noise rows."""
    from functools import partial

    from pymc_lbp.samplers.path.adaptation import AdaptState
    from pymc_lbp.samplers.path.jax_steps import path_steps_jax
    from pymc_lbp.samplers.single_site.graph import graph_balancing
    from pymc_lbp.whole_model.jaxify import jax_function

    model = _potts_model()
    point = model.initial_point()
    point["c"] = np.array([0, 2, 1, 1, 0])
    point["h"] = np.array([0.4, -0.3, 0.9])
    with model:
        step = pymc_lbp.PathAuxiliaryLBP([model["c"]], initial_point=point)
    _, values, x = _jax_block(model, step, point)
    to_jax = partial(
        jax_function, model=model, replacements=model_value_replacements(model, [step])
    )
    log_g = graph_balancing(step.balancing, step.log_g)
    run = path_steps_jax(
        step.differences, step.layout, log_g, step.single_site_share, step.adaptation, to_jax
    )
    kernel = step.path_kernel
    adapt = AdaptState(np.log(2.0), np.log(2.0), 0, True)
    n_steps, key = 30, jax.random.PRNGKey(7)
    rows = []
    for i in range(n_steps):
        k_u, k_e = jax.random.split(jax.random.fold_in(key, i))
        rows.append(
            np.concatenate(
                [
                    np.asarray(jax.random.uniform(k_u, (3,), dtype=jnp.float64)),
                    np.asarray(
                        jax.random.exponential(k_e, (kernel.noise_width - 3,), dtype=jnp.float64)
                    ),
                ]
            )
        )
    logp, deltas = step.differences(x)
    jitted = jax.jit(run)
    for tuning in (True, False):
        res = jitted(key, x, values, tuple(adapt), 2.5, tuning, n_steps)
        ref = kernel(x, logp, deltas, np.array(rows), 2.5, adapt if tuning else None)
        np.testing.assert_array_equal(np.asarray(res.x), ref.x)
        assert int(res.n_accepted) == ref.n_accepted and int(res.sum_length) == ref.sum_length
        np.testing.assert_allclose(float(res.sum_accept), ref.sum_accept, rtol=1e-9)
        if tuning:
            np.testing.assert_allclose(
                np.array(res.adapt[:2], float), ref.adapt_state[:2], rtol=1e-9
            )
            assert int(res.adapt[2]) == ref.adapt_state.count
        assert ref.n_accepted > 0


@pytest.fixture(scope="module")
def self_balancing():
    """A SelfBalancing step on the Potts model, its JAX learning functions and the values of the
    model's variables: built once for both particle weightings (the weighting is an argument of
    batch_moves, passed explicitly below, not read from the step)."""
    from functools import partial

    from pymc_lbp.samplers.self_balancing.jax_steps import learned_chain_jax
    from pymc_lbp.whole_model.jaxify import jax_function

    model = _potts_model()
    point = model.initial_point()
    point["h"] = np.array([0.4, -0.3, 0.9])
    with model:
        step = pymc_lbp.SelfBalancing([model["c"]], initial_point=point, n_particles=20)
    _, values, _ = _jax_block(model, step, point)
    to_jax = partial(
        jax_function, model=model, replacements=model_value_replacements(model, [step])
    )
    return step, learned_chain_jax(step, to_jax, 5), values


@pytest.mark.parametrize("weights", ["uniform", "target"])
def test_self_balancing_particle_moves_match_the_numpy_reference(weights, self_balancing):
    """SelfBalancing's learning step in JAX (batch_moves on jax.numpy, its log g and targets
    the JAX functions of the step's graphs): the particles' moves and the records of the
    objective equal the numpy reference's from the same uniforms."""
    from pymc_lbp.samplers.self_balancing.learning import batch_moves

    step, fns, values = self_balancing
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 3, size=(20, 5))
    params = np.array([0.3, -0.2, 0.5, 0.1])
    u = rng.random((20, 2))
    u[::2, 1] = 0.9999  # every other particle rejects unless its move is certain

    def target_rows(y):
        return jax.vmap(lambda r: tuple(fns.start(r, *values)))(y)

    logp, deltas = (np.asarray(a) for a in target_rows(jnp.asarray(rows)))
    res = batch_moves(
        jnp.asarray(u),
        jnp.asarray(rows),
        jnp.asarray(logp),
        jnp.asarray(deltas),
        jnp.asarray(params),
        log_g=lambda dm, p: fns.log_g(dm, p, *values)[0],
        layout=step.layout,
        target_rows=target_rows,
        particle_weights=weights,
        xp=jnp,
    )
    ref = batch_moves(
        u,
        rows,
        logp,
        deltas,
        params,
        log_g=step.parametrization.log_g,
        layout=step.layout,
        target_rows=step.batched_rows,
        particle_weights=weights,
    )
    np.testing.assert_array_equal(np.asarray(res.x), ref.x)
    np.testing.assert_array_equal(np.asarray(res.accepted), ref.accepted)
    np.testing.assert_allclose(np.asarray(res.accept), ref.accept, rtol=1e-9)
    fields = ("deltas_x", "deltas_y", "slot", "reverse", "dlogp", "feasible", "weights")
    for got, name in zip(res.batch, fields, strict=True):
        want = getattr(ref.batch, name)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-12)
    assert ref.accepted.any() and not ref.accepted.all()


def test_self_balancing_chain_steps_match_the_numpy_reference(self_balancing):
    """SelfBalancing's chain in JAX (the single-site kernel, one step's graph in a
    ``jax.lax.scan``, with ``log g`` at given learned parameters) makes the numpy reference's
    moves from the same uniforms."""
    from pymc_lbp.samplers.common import prepare_weights

    step, fns, values = self_balancing
    param = step.parametrization
    x = np.array([0, 2, 1, 1, 0])
    n_moved = 0
    for seed, params in enumerate(([0.3, -0.2, 0.5, 0.1], [-1.0, 0.8, 0.0, 0.4])):
        params = np.asarray(params)
        key = jax.random.PRNGKey(seed)
        run = fns.run(key, jnp.asarray(x), values, jnp.asarray(params))
        uniforms = np.asarray(jax.random.uniform(key, (5, 2), dtype=jnp.float64))
        logp, deltas = step.differences(x)

        def prepared(d, params=params):
            return prepare_weights(param.log_g(d, params))

        def evaluate(y, prepared=prepared):
            logp_y, deltas_y = step.differences(y)
            return logp_y, deltas_y, prepared(deltas_y)

        ref = single_site_steps(x, logp, deltas, prepared, step.layout, evaluate, uniforms)
        np.testing.assert_array_equal(np.asarray(run.x), ref.x)
        assert int(run.n_accepted) == ref.n_accepted
        assert int(run.n_evaluated) == ref.n_evaluated
        np.testing.assert_allclose(float(run.sum_accept), ref.sum_accept, rtol=1e-9)
        n_moved += int(np.any(ref.x != x))
    assert n_moved >= 1  # the chain moves (the comparison is not of standing chains)


def _numpy_random_scan(step, x, noise):
    """NeuralBlock.scan_step over the rows of ``noise`` (the numpy reference)."""
    logp = step.target.logp(x)
    step._draw_evals = 0
    acc, won, last, seen = 0.0, 0, -1, set()
    for row in noise:
        res = step.scan_step(x, logp, np.zeros(0), row)
        x, logp = res.x, res.logp
        acc, won, last = acc + res.accept, won + int(res.accepted), res.extra["block"]
        seen.add(last)
    return x, acc, won, step._draw_evals, last, seen


@pytest.mark.parametrize("case", ["block_gibbs_mixed", "neural_lattice"])
def test_random_scan_matches_the_numpy_reference(case):
    """BlockGibbs' exact clusters (pairs of a categorical chain beside a continuous field, read
    from the chain's values) and NeuralBlock's network proposals with MH (2x2 patches of a 3x3
    Ising lattice, random weights): the JAX random scan makes NeuralBlock.scan_step's moves from
    the same uniforms (state, acceptances, target evaluations, last unit)."""
    from functools import partial

    from pymc_lbp.models import ising_model
    from pymc_lbp.samplers.block.jax_steps import random_scan_jax
    from pymc_lbp.samplers.block.motifs.lattice_blocks import lattice_blocks
    from pymc_lbp.whole_model.jaxify import jax_function
    from tests.samplers.block.test_neural_block import random_proposal

    if case == "block_gibbs_mixed":
        model = _potts_model()
        point = model.initial_point()
        point["c"] = np.array([0, 2, 1, 1, 0])
        point["h"] = np.array([0.4, -0.3, 0.9])
        with model:
            from pymc_lbp.samplers.block.step_block_gibbs import CLUSTER_SHARE

            step = pymc_lbp.BlockGibbs([model["c"]], max_states=9 * CLUSTER_SHARE)  # pairs
    else:
        model = ising_model((3, 3), 0.6, np.linspace(-0.5, 0.5, 9).reshape(3, 3), periodic=False)
        point = model.initial_point()
        blocks = lattice_blocks((3, 3), 2)
        with model:
            step = pymc_lbp.NeuralBlock(
                [model["x"]], blocks=blocks, proposal=random_proposal(blocks.motif, seed=5)
            )
    _, values, x = _jax_block(model, step, point)
    to_jax = partial(
        jax_function, model=model, replacements=model_value_replacements(model, [step])
    )
    n_steps = 40
    run = jax.jit(random_scan_jax(step, model, to_jax, n_steps))
    rng = np.random.default_rng(3)
    changed = 0
    for _ in range(3):
        noise = rng.random((n_steps, step.scan_width))
        res = run(jnp.asarray(noise), jnp.asarray(x), values)
        ref_x, acc, won, evals, last, seen = _numpy_random_scan(step, x.copy(), noise)
        np.testing.assert_array_equal(np.asarray(res.x), ref_x)
        np.testing.assert_allclose(float(res.sum_accept), acc, rtol=1e-10)
        assert (int(res.n_accepted), int(res.n_evaluated), int(res.last_unit)) == (
            won,
            evals,
            last,
        )
        assert seen == set(range(len(step.units)))  # every unit updated
        changed += int(np.any(ref_x != x))
        x = ref_x
    assert changed == 3
    if case == "neural_lattice":
        assert 0 < won < n_steps  # proposals both accepted and rejected


def _at_point(model, step, point) -> tuple:
    """The chain's values at ``point`` for a JAX version, the same values in the step's shared
    variables for its numpy reference, and ``to_jax`` bound to the model."""
    from functools import partial

    from pymc_lbp.whole_model.jaxify import jax_function

    values = tuple(jnp.asarray(point[x.name]) for x in model.value_vars)
    for name, shared in step.shared.items():
        shared.set_value(point[name])
    replacements = model_value_replacements(model, [step])
    return values, partial(jax_function, model=model, replacements=replacements)


class _ScriptedRng:
    """An ``rng`` for NeuralMixedBlock.pair_update that returns given draws: per update the
    component's and the flag's uniforms, the standard normal, the accept's uniform."""

    def __init__(self, noise):
        self._uniforms = iter(noise[:, [0, 1, 3]].ravel())
        self._normals = iter(noise[:, 2])

    def random(self):
        return float(next(self._uniforms))

    def standard_normal(self):
        return float(next(self._normals))


def test_neural_mixed_block_pair_updates_match_the_numpy_reference():
    """NeuralMixedBlock (an untrained network, so proposals are both accepted and rejected) on
    two (flag, value) pairs beside a noise scale read from the chain's values: the JAX pair
    updates make NeuralMixedBlock.pair_update's moves in the same order from the same draws."""
    from pymc_lbp import NeuralProposal
    from pymc_lbp.samplers.block.jax_flag_value import pair_updates_jax
    from pymc_lbp.samplers.block.motifs.flag_value import flag_value_motif

    _require_jax()  # float64
    with pm.Model() as model:
        b = pm.Bernoulli("b", 0.4, shape=2)
        v = pm.Normal("v", 0.0, 2.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", b[0] * v[0] + b[1] * v[1], sigma, observed=[1.3, 0.7, 1.9])
        proposal = NeuralProposal.create(flag_value_motif(32), n_components=3, hidden=16, seed=5)
        step = pymc_lbp.NeuralMixedBlock([b, v], proposal=proposal)
    point = model.initial_point()
    point["sigma_log__"] = np.array(np.log(0.8))
    values, to_jax = _at_point(model, step, point)  # the numpy reference reads sigma
    run = jax.jit(pair_updates_jax(step, to_jax))
    rng = np.random.default_rng(4)
    q = np.array([0.0, 1.0, 0.5, -1.0])
    n_steps, won_total, changed = 30, 0, 0
    for _ in range(3):
        order = rng.integers(0, 2, n_steps)
        noise = np.column_stack(
            [rng.random((n_steps, 2)), rng.normal(size=n_steps), rng.random(n_steps)]
        )
        res = run(jnp.asarray(order), jnp.asarray(noise), jnp.asarray(q), values)
        step.rng = _ScriptedRng(noise)
        ref, logp, acc, won = q.copy(), float(step._logp_fn(q)), 0.0, 0
        for k in order:
            ref, logp, prob, accepted = step.pair_update(ref, logp, int(k))
            acc, won = acc + prob, won + int(accepted)
        np.testing.assert_allclose(np.asarray(res.q), ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(float(res.sum_accept), acc, rtol=1e-9)
        assert int(res.n_accepted) == won
        won_total += won
        changed += int(np.any(ref != q))
        q = ref
    assert changed == 3 and 0 < won_total < 3 * n_steps


def test_chain_sweeps_match_the_numpy_colour_updates():
    """NeuralBlock's default chain blocks on an HMM whose transition matrix is a Dirichlet
    variable read from the chain's values: the JAX sweeps over the colour classes make
    the numpy colour updates' moves (pymc_lbp.samplers.block.reference.colour_update) from the
    same uniforms (state, acceptances, evaluations),
    two sweeps per call."""
    from pymc_lbp.samplers.block.jax_steps import chain_sweeps_jax
    from pymc_lbp.samplers.block.reference import colour_update

    _require_jax()
    with pm.Model() as model:
        p = pm.Dirichlet("p", np.ones(3), shape=(3, 3))
        s = pm.Categorical("s", np.ones(3) / 3, shape=12)
        pm.Potential("chain", pm.math.sum(pm.math.log(p[s[:-1], s[1:]])))
        pm.Normal("y", s * 1.5, 1.0, observed=np.linspace(-1, 3, 12))
        step = pymc_lbp.NeuralBlock([s])
    assert step.colours is not None and step.sweep_compilable
    point = model.initial_point()
    point["p_simplex__"] = np.log([[6.0, 2.0], [1.0, 3.0], [0.5, 0.2]]) - 1.0
    values, to_jax = _at_point(model, step, point)  # the numpy reference reads p
    run = jax.jit(chain_sweeps_jax(step, to_jax))
    colours = step.chain_colours()
    x = np.zeros(12, dtype=np.int64)
    moved = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        per_sweep = [
            [rng.random((c.sites.shape[0], c.uniform_width)) for c in colours] for _ in range(2)
        ]
        uniforms = [jnp.asarray(np.stack([u[c] for u in per_sweep])) for c in range(len(colours))]
        res = run(uniforms, jnp.asarray(x), values)
        step.set_rng(np.random.default_rng(seed))
        ref, logp, acc, won = x.copy(), step.target.logp(x), 0.0, 0
        step._draw_evals = 0
        for _ in range(2):
            for colour in step.colours:
                ref, logp, a, w = colour_update(step, colour, ref, logp)
                acc, won = acc + a, won + w
        np.testing.assert_array_equal(np.asarray(res.x), ref)
        np.testing.assert_allclose(float(res.sum_accept), acc, rtol=1e-10)
        assert (int(res.n_accepted), int(res.n_evaluated)) == (won, 1 + step._draw_evals)
        moved += int(np.any(ref != x))
        x = ref
    assert moved == 3
