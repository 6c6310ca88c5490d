"""NeuralBlock's compiled random scan (:mod:`pymc_lbp.samplers.block.random_scan_graph`).

The compiled scan must make the moves of the numpy reference step
(:meth:`NeuralBlock.scan_step`) from the same uniforms: the same states, logps, acceptance
probabilities, accepted counts, target evaluations and last unit, for motif blocks with clamped
entries and uncovered sites mixed in one scan, for exact block Gibbs, for single sites, with
factor-local targets and with the model logp, in lattice (flat) and UAI index spaces. The
numpy step's kernel is the enumerated one (``tests/samplers/block/test_neural_block.py``); sampling
through ``pm.sample`` with the compiled scan is checked against exact enumeration there too.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_lbp import NeuralBlock
from pymc_lbp.models import ising_model, read_uai
from pymc_lbp.samplers.block.motifs.lattice_blocks import lattice_blocks
from tests.helpers.backends import OTHER_BACKENDS, modes
from tests.samplers.block.test_neural_block import (
    BLOCKS,
    EVIDENCE,
    MOTIF,
    random_proposal,
    tiny_network,
)


def numpy_scan(step, x, logp, noise, seen=None):
    """The numpy steps over the rows of ``noise``: what the compiled scan returns. ``seen``, when
    given, collects the units picked, the neural units' accepted and rejected proposals and the
    number of steps that changed the state."""
    step._draw_evals = 0
    acc, won, last = 0.0, 0, -1
    for row in noise:
        res = step.scan_step(x, logp, np.zeros(0), row)
        if seen is not None:
            seen["units"].add(res.extra["block"])
            seen["changed"] += int(not np.array_equal(res.x, x))
            if step._units[res.extra["block"]].kind == "neural":
                seen["neural"].add(bool(res.accepted))
        x, logp = res.x, res.logp
        acc += res.accept
        won += int(res.accepted)
        last = res.extra["block"]
    return x, logp, acc, won, step._draw_evals, last


def starts(step, model, n, seed):
    """``n`` feasible states of the step's sites (the initial point, then random ones)."""
    rng = np.random.default_rng(seed)
    cards = step._site_cards()
    x0 = step.state_vector(model.initial_point())
    out = [x0]
    while len(out) < n:
        x = np.where(rng.random(x0.size) < 0.5, rng.integers(0, cards), x0)
        if np.isfinite(step.target.logp(x)):
            out.append(x)
    return out


def assert_same_moves(step, model, n_steps=40, seed=0):
    """The compiled scan's moves equal the numpy steps' from 3 starts; between them every unit
    was picked, the state changed, and neural proposals were both accepted and rejected (so
    fewer steps leave no branch untested)."""
    rng = np.random.default_rng(seed)
    seen = {"units": set(), "changed": 0, "neural": set()}
    for x in starts(step, model, 3, seed):
        step._refresh_outside()
        logp = step.target.logp(x)
        noise = rng.random((n_steps, step.scan_width))
        want = numpy_scan(step, x.copy(), logp, noise, seen)
        got = step.random_scan(x, logp, step._outside_values, noise, step._scan_network())
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-10)
        assert got[3:] == want[3:]
        np.testing.assert_allclose(step.target.logp(got[0]), got[1], rtol=1e-9, atol=1e-9)
    assert seen["units"] == set(range(len(step.units))), (seen, step.units)
    assert seen["changed"] > n_steps // 4, seen
    if any(u.kind == "neural" for u in step._units):
        assert seen["neural"] == {False, True}, seen


@pytest.fixture(scope="module")
def compiled_steps():
    """``get(case)``: the model and the compiled-scan step (C backend) of a case, built once per
    module (compiling the scan is the cost): the tests of the moves and the backend twins' C
    references share them. Cases: ``("uai", proposal, logp_mode)`` on the tiny BN (one model
    for all), ``("lattice", shape)`` an Ising model with overlapping 2x2 patches."""
    built: dict = {}
    bn = read_uai(tiny_network(), EVIDENCE)

    def get(case):
        if case in built:
            return built[case]
        if case[0] == "uai":
            _, proposal, logp_mode = case
            kw = {"logp": logp_mode}
            with bn:
                if proposal == "sites":
                    step = NeuralBlock(bn.free_RVs, blocks=None, **kw)
                else:
                    prop = (
                        random_proposal(MOTIF, seed=3, epsilon=0.05)
                        if proposal == "neural"
                        else "exact"
                    )
                    step = NeuralBlock(bn.free_RVs, blocks=BLOCKS, proposal=prop, **kw)
            built[case] = bn, step
        else:
            model = lattice_model(case[1])
            blocks = lattice_blocks(case[1], 2)
            with model:
                step = NeuralBlock(
                    [model["x"]], blocks=blocks, proposal=random_proposal(blocks.motif, seed=5)
                )
            built[case] = model, step
        return built[case]

    return get


def lattice_model(shape):
    field = np.linspace(-0.5, 0.5, shape[0] * shape[1]).reshape(shape)
    return ising_model(shape, 0.6, field, periodic=False)


# every (proposal, logp_mode) pair but (sites, model): a scan of sites only runs the exact
# units' graph that (exact, model) runs on blocks and sites alike, and (sites, factors) covers the
# construction without blocks
@pytest.mark.parametrize(
    ("proposal", "logp_mode"),
    [
        ("neural", "factors"),
        ("neural", "model"),
        ("exact", "factors"),
        ("exact", "model"),
        ("sites", "factors"),
    ],
)
def test_compiled_scan_makes_the_numpy_moves_uai(proposal, logp_mode, compiled_steps):
    """Tiny BN: blocks (v0, v1) and (v2, v5) with v5 evidence (clamped), sites v3, v4
    uncovered; cards 3 and 2 in one motif."""
    model, step = compiled_steps(("uai", proposal, logp_mode))
    assert step.logp_mode == logp_mode
    assert step.scan_compilable and step.colours is None
    if proposal != "sites":
        assert len(step.uncovered_sites) == 2  # a mixed scan: blocks and sites
    assert_same_moves(step, model)


def test_compiled_scan_makes_the_numpy_moves_lattice(compiled_steps):
    """Overlapping 2x2 patches of a 3x4 Ising model: conditioning entries off the lattice
    (fixed dummies), the model logp as target, every site covered."""
    model, step = compiled_steps(("lattice", (3, 4)))
    assert step.uncovered_sites.size == 0 and step.logp_mode == "model"
    assert_same_moves(step, model, seed=1)


def test_draws_run_the_compiled_scan_from_the_first_draw():
    """A draw through ``step`` runs the compiled random scan from the first draw, on the rows
    of uniforms ``scan_step`` takes, drawn from the step's generator: the numpy steps' moves."""
    network = tiny_network()
    model = read_uai(network, EVIDENCE)
    with model:
        step = NeuralBlock(
            model.free_RVs, blocks=BLOCKS, proposal=random_proposal(MOTIF, seed=4, epsilon=0.05)
        )
    point = model.initial_point()
    x = step.state_vector(point)
    logp = step.target.logp(x)
    noise = np.random.default_rng(7).random((step.steps_per_draw, step.scan_width))
    step.set_rng(np.random.default_rng(7))
    point, _ = step.step(point)
    assert "random_scan" in vars(step)  # the draw ran the compiled scan
    np.testing.assert_array_equal(step.state_vector(point), numpy_scan(step, x, logp, noise)[0])


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_compiled_scan_under_other_backends(backend, compiled_steps):
    """The random scan compiled with JAX (jax optional: skipped without it) or NUMBA makes the
    C backend's moves, on a 3x3 lattice model with the model logp as target (the smallest with
    patches overlapping both ways; the UAI models' own logp does not compile under JAX). The
    factor-local look-ups of a UAI network are not run under NUMBA here: on the tiny BN that
    case alone took 288 s of numba compiling from an empty cache (the rest of the suite's NUMBA
    twins together about 530 s), and its ops are the lattice case's plus table gathers, run
    under C by the moves tests above. The lattice's C reference is shared by both backends."""
    model, reference = compiled_steps(("lattice", (3, 3)))
    blocks = lattice_blocks((3, 3), 2)
    kw = {"blocks": blocks, "proposal": random_proposal(blocks.motif, seed=5)}
    results = []
    for mode in modes(backend):
        if mode is None:
            step = reference
        else:
            with model:
                step = NeuralBlock([model["x"]], compile_kwargs={"mode": mode}, **kw)
        x = step.state_vector(model.initial_point())
        step._refresh_outside()
        logp = step.target.logp(x)
        noise = np.random.default_rng(3).random((60, step.scan_width))
        results.append(step.random_scan(x, logp, step._outside_values, noise, step._scan_network()))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_allclose(results[1][1:3], results[0][1:3], rtol=1e-10)
    assert results[1][3:] == results[0][3:]
    assert results[0][3] > 10
