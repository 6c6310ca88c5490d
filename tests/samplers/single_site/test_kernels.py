"""Exact transition kernels of LocallyBalanced and GibbsWithGradients on tiny models.

For each sampler and model: (1) the kernel written independently in numpy (tests/helpers/kernels.py)
has rows summing to 1 and leaves the target invariant; (2) the step's own kernel, assembled from its
compiled differences and prepared proposal weights, equals it, and so does the kernel of its
compiled transition (``step.kernel``, one step per slot with chosen uniforms); (3) the step's
random one-step draws (the compiled transition, as ``astep`` runs it) from a state follow that
row (chi-square, fixed seed, 1e-3 level). (2)'s compiled transition and (3) run for one
balancing per model of LocallyBalanced (COMPILED_WITH), every balancing on some model.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import special, stats

from pymc_lbp import GibbsWithGradients, LocallyBalanced
from tests.helpers import kernels

BALANCINGS = ["sqrt", "barker", "min", "max"]
RNG = np.random.default_rng(20261121)


# --- tiny models with independent numpy log-densities and first-order differences ----------
P_BIN = np.array([0.3, 0.6, 0.45, 0.8])
J_BIN = np.triu(RNG.normal(scale=0.7, size=(4, 4)), 1)


def binary_model():
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=P_BIN, shape=4)
        s = 2 * x - 1
        pm.Potential("pairs", pt.sum(pt.as_tensor(J_BIN) * pt.outer(s, s)))
    kinds = [("binary",)] * 4
    states = kernels.enumerate_states(kinds)
    s = 2 * states - 1
    log_pi = (
        states @ np.log(P_BIN)
        + (1 - states) @ np.log1p(-P_BIN)
        + np.einsum("ni,ij,nj->n", s, J_BIN, s)
    )
    return model, [model["x"]], kinds, states, log_pi, None


A_QUAD, B_QUAD, W_QUAD = 0.35, np.array([-0.4, 0.2, 0.1]), np.array([0.5, 1.0, 1.5])


def quadratic_binary_model():
    """Not multilinear: first-order differences differ from exact ones, unevenly across sites."""
    with pm.Model() as model:
        x = pm.Bernoulli("x", p=0.5, shape=3)
        quad = A_QUAD * pt.sum(pt.as_tensor(W_QUAD) * x) ** 2
        pm.Potential("quad", quad + pt.sum(pt.as_tensor(B_QUAD) * x))
    kinds = [("binary",)] * 3
    states = kernels.enumerate_states(kinds)
    log_pi = A_QUAD * (states @ W_QUAD) ** 2 + states @ B_QUAD

    def first_order(x):
        grad = B_QUAD + 2 * A_QUAD * (x @ W_QUAD) * W_QUAD
        return (1 - 2 * x) * grad

    return model, [model["x"]], kinds, states, log_pi, first_order


P_CAT = np.array([[0.2, 0.3, 0.5], [0.5, 0.5, 0.0], [0.1, 0.6, 0.3]])
J_CAT = 0.8


def categorical_model():
    """Potts chain, K = 3, one category of zero probability (-inf neighbours)."""
    with pm.Model() as model:
        z = pm.Categorical("z", p=P_CAT, shape=3)
        pm.Potential("potts", J_CAT * pt.sum(pt.eq(z[:-1], z[1:])))
    kinds = [("cat", 3)] * 3
    states = kernels.enumerate_states(kinds)
    with np.errstate(divide="ignore"):
        log_p = np.log(P_CAT)
    log_pi = log_p[np.arange(3), states].sum(1) + J_CAT * (states[:, :-1] == states[:, 1:]).sum(1)

    def first_order(z):
        onehot = np.eye(3)[z]
        grad = np.maximum(log_p, -1e30).copy()
        for i in range(3):
            for j in (i - 1, i + 1):
                if 0 <= j < 3:
                    grad[i] += J_CAT * onehot[j]
        return (grad - grad[np.arange(3), z][:, None]).ravel()

    return model, [model["z"]], kinds, states, log_pi, first_order


def integer_model():
    """DiscreteUniform(2, 5) pair and a Binomial(3, 0.4), coupled; +-1 moves within support."""
    with pm.Model() as model:
        y = pm.DiscreteUniform("y", lower=2, upper=5, shape=2)
        k = pm.Binomial("k", n=3, p=0.4)
        pm.Potential("coupling", -0.3 * (y[0] - y[1]) ** 2 + 0.2 * k * y[0])
    kinds = [("int", 2, 5), ("int", 2, 5), ("int", 0, 3)]
    states = kernels.enumerate_states(kinds)
    y0, y1, kk = states.T
    log_pi = stats.binom.logpmf(kk, 3, 0.4) - 0.3 * (y0 - y1) ** 2 + 0.2 * kk * y0

    def first_order(x):
        y0, y1, kk = x.astype(float)
        g = np.array(
            [
                -0.6 * (y0 - y1) + 0.2 * kk,
                0.6 * (y0 - y1),
                special.digamma(3 - kk + 1)
                - special.digamma(kk + 1)
                + np.log(0.4 / 0.6)
                + 0.2 * y0,
            ]
        )
        return np.stack([-g, g], axis=1).ravel()

    return model, [model["y"], model["k"]], kinds, states, log_pi, first_order


MODELS = {
    "binary": binary_model,
    "categorical": categorical_model,
    "integer": integer_model,
}


def _check(step, kinds, states, log_pi, balancing, first_order=None, seed=0, compiled=True):
    T = kernels.locally_balanced_kernel(states, log_pi, kinds, balancing, first_order)
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    assert T.min() >= -1e-15
    assert kernels.stationary_error(T, log_pi) < 1e-12

    # the numpy reference pieces (compiled differences, prepared weights) give the same kernel
    T_step = kernels.step_kernel(step, states)
    np.testing.assert_allclose(T_step, T, atol=1e-10)
    if not compiled:
        return
    # and so does the compiled transition that sampling runs
    T_compiled = kernels.compiled_step_kernel(step, states, kinds)
    np.testing.assert_allclose(T_compiled, T, atol=1e-10)

    # the step's random transitions from the most probable state follow the kernel's row
    a = int(np.argmax(log_pi))
    step.set_rng(np.random.default_rng(seed))
    counts = kernels.empirical_row(step, states[a].copy(), states, 4000)
    assert kernels.chi_square_pvalue(counts, T[a]) > 1e-3


# Every balancing's numpy pieces (its prepared weights) are enumerated on every model. The
# compiled transition (a kernel compiled per step: the cost here) and its random draws are the
# same graph whatever the balancing, which is only a formula inside it: they are checked for one
# balancing per model, each balancing on some model (sqrt in test_gibbs_with_gradients_kernel,
# exact differences on the multilinear models binary and categorical).
COMPILED_WITH = {"binary": "max", "categorical": "barker", "integer": "min"}


@pytest.mark.parametrize("balancing", BALANCINGS)
@pytest.mark.parametrize("name", list(MODELS))
def test_locally_balanced_exact_kernel(name, balancing):
    model, vars, kinds, states, log_pi, _ = MODELS[name]()
    with model:
        step = LocallyBalanced(vars, balancing=balancing, differences="exact", steps_per_draw=1)
    _check(step, kinds, states, log_pi, balancing, compiled=COMPILED_WITH[name] == balancing)


@pytest.mark.parametrize("name", ["binary", "categorical", "integer", "quadratic"])
def test_gibbs_with_gradients_kernel(name):
    factory = quadratic_binary_model if name == "quadratic" else MODELS[name]
    model, vars, kinds, states, log_pi, first_order = factory()
    with model:
        # explicit: on the non-multilinear toys "auto" would measure the gap and take exact ones
        step = GibbsWithGradients(vars, differences="gradient", steps_per_draw=1)
    # first_order is None for multilinear models, where first-order differences are exact
    _check(step, kinds, states, log_pi, "sqrt", first_order)


def test_first_order_differs_from_exact_on_quadratic_model():
    """Guards the previous test against being trivially the exact kernel."""
    *_, states, log_pi, first_order = quadratic_binary_model()
    T_exact = kernels.locally_balanced_kernel(states, log_pi, [("binary",)] * 3, "sqrt")
    T_first = kernels.locally_balanced_kernel(
        states, log_pi, [("binary",)] * 3, "sqrt", first_order
    )
    assert np.max(np.abs(T_exact - T_first)) > 1e-3


def test_gradient_differences_in_locally_balanced():
    model, vars, kinds, states, log_pi, first_order = quadratic_binary_model()
    with model:
        step = LocallyBalanced(vars, balancing="barker", differences="gradient", steps_per_draw=1)
    _check(step, kinds, states, log_pi, "barker", first_order)
