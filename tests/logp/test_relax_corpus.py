"""A corpus of models written the way PyMC users write them, against the relaxation.

Each entry is a small PyMC model (a handful of sites) and the block of discrete variables a step
would sample. For every entry:

(a) the relaxed logp (:func:`pymc_lbp.logp.relax.relaxed_logp`) equals the model's logp at
discrete
    points (all of them for small blocks, a fixed-seed random sample otherwise; integer sites range
    past their support so zero-probability points are included: there the relaxed logp must be
    ``<= LOG_FLOOR / 2`` or ``-inf``, never NaN);
(b) where the logp is multilinear in the block, first-order differences equal exact ones at every
    checked state (the identity that makes gradient differences exact on Ising, Potts, mixtures,
    factor tables);
(c) the relaxation succeeds: :class:`GradientDifferences` constructs without
    :class:`NotRelaxableError`, which is what makes ``differences="auto"`` pick the gradient.

The tolerances are round-off (``1e-9`` relative): on discrete points the relaxed graph computes the
same numbers as the logp, in a different order.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode

from pymc_lbp import NotRelaxableError
from pymc_lbp.logp.differences import ExactDifferences, GradientDifferences
from pymc_lbp.logp.layout import BlockLayout, describe_block
from pymc_lbp.logp.relax import relaxed_logp
from pymc_lbp.logp.relaxed_values import LOG_FLOOR

# no graph rewrites, Python linker: the graphs are tiny and compiling dominates
FAST = {"mode": Mode(linker="py", optimizer=None)}
MAX_ENUMERATED = 64  # blocks with more states are checked at N_RANDOM random states
N_RANDOM = 24


@dataclass
class Entry:
    """One corpus model: ``build()`` returns the model; ``block`` names the sampled variables."""

    build: object
    block: tuple[str, ...]
    multilinear: bool
    int_range: tuple[int, int] | None = None  # values tried for integer sites

    @property
    def name(self) -> str:
        return self.build.__name__


CORPUS: list[Entry] = []


def entry(block, multilinear=True, int_range=None):
    def register(build):
        CORPUS.append(Entry(build, tuple(block), multilinear, int_range))
        return build

    return register


def _rng(seed):
    return np.random.default_rng(seed)


# -- lattices and chains -----------------------------------------------------------------------
@entry(["b"])
def ising_with_roll():
    """The LSB Ising as a user writes it: Bernoulli image, spins, ``pt.roll`` couplings."""
    alpha = _rng(1).uniform(-2, 2, size=(3, 4))
    with pm.Model() as m:
        b = pm.Bernoulli("b", logit_p=2.0 * alpha, shape=alpha.shape)
        s = 2 * b - 1
        pm.Potential(
            "coupling", 0.7 * pt.sum(s * pt.roll(s, 1, 0)) + 0.7 * pt.sum(s * pt.roll(s, 1, 1))
        )
    return m


@entry(["b"])
def ising_roll_without_axis():
    """``pt.roll`` without an axis flattens and reshapes to ``x.shape``; negative shifts."""
    with pm.Model() as m:
        b = pm.Bernoulli("b", p=0.4, shape=(2, 3))
        s = 2 * b - 1
        pm.Potential("c", 0.5 * pt.sum(s * pt.roll(s, 2)) - 0.3 * pt.sum(s * pt.roll(s, -1, 1)))
    return m


@entry(["x"])
def chain_with_shifted_slices():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=pm.math.sigmoid(_rng(2).normal(size=6)), shape=6)
        pm.Potential("pair", 0.8 * pt.sum(x[1:] * x[:-1]) - 0.2 * pt.sum(x[2:] * x[:-2]))
    return m


@entry(["z"])
def potts_with_roll():
    with pm.Model() as m:
        z = pm.Categorical("z", p=[0.2, 0.3, 0.5], shape=(2, 2))
        pm.Potential("potts", 0.9 * pt.sum(pt.eq(z, pt.roll(z, 1, 0))) + 0.4 * pt.sum(z[:, 0] > 0))
    return m


@entry(["x"])
def padded_with_set_subtensor():
    """Free boundary written by padding with ``set_subtensor`` into zeros."""
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.3, shape=5)
        s = 2 * x - 1
        padded = pt.set_subtensor(pt.zeros(7)[1:-1], s)
        pm.Potential("pair", 0.6 * pt.sum(padded[:-1] * padded[1:]))
    return m


@entry(["x"])
def group_counts_with_inc_subtensor():
    """Per-group sums accumulated with ``inc_subtensor`` at constant (repeated) indices."""
    group = np.array([0, 0, 1, 1, 2])
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=5)
        acc = pt.inc_subtensor(pt.zeros(3)[group], x)
        acc = pt.inc_subtensor(acc[1], 0.5)
        pm.Potential("groups", pt.sum(np.array([0.3, -0.4, 0.8]) * acc) + 0.7 * acc[0] * acc[2])
    return m


@entry(["x", "y"])
def concatenate_and_stack():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.3, shape=3)
        y = pm.Bernoulli("y", p=0.6, shape=2)
        both = pt.concatenate([x, 1 - y])
        trio = pt.stack([x[0], y[1], both[2]])
        pm.Potential("c", 0.5 * pt.sum(both[1:] * both[:-1]) + pt.prod(trio) - 0.3 * trio[1])
    return m


@entry(["x"])
def reshape_flatten_dimshuffle_transpose():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.45, shape=(2, 3))
        r = x.reshape((3, 2))
        f = x.flatten()
        t = x.T
        d = x.dimshuffle(1, "x", 0)
        pm.Potential(
            "p",
            0.3 * pt.sum(r[0] * r[2])
            + 0.5 * f[0] * f[5]
            - 0.2 * pt.sum(t[:, 0] * t[:, 1])
            + 0.1 * pt.sum(d[0, 0]),
        )
    return m


@entry(["x"])
def quadratic_form_with_data_matrix():
    """``s @ J @ s`` with a zero-diagonal data matrix (``pt.dot`` and ``@``)."""
    J = _rng(3).normal(size=(5, 5))
    J = np.triu(J, 1) + np.triu(J, 1).T
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=5)
        s = 2 * x - 1
        h = pm.Data("h", _rng(4).normal(size=5))
        pm.Potential("q", 0.25 * pt.dot(s, pt.dot(J, s)) + s @ h)
    return m


@entry(["g"], multilinear=False)
def regression_with_matmul_indicator():
    """Spike-and-slab style: ``logit_p = X @ (g * beta)`` with a continuous ``beta``."""
    X = _rng(5).normal(size=(8, 3))
    with pm.Model() as m:
        beta = pm.Normal("beta", 0.0, 1.0, shape=3)
        g = pm.Bernoulli("g", p=0.5, shape=3)
        pm.Bernoulli("y", logit_p=pt.matmul(X, g * beta), observed=(X[:, 0] > 0).astype(int))
    return m


@entry(["x", "z"])
def switch_and_where():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.4, shape=3)
        z = pm.Categorical("z", p=[0.3, 0.3, 0.4], shape=2)
        a = pm.math.switch(x, np.array([1.0, -0.5, 2.0]), -0.3)
        b = pt.where(pt.eq(z, 2), 0.8, pt.where(z < 1, -0.4, 0.1))
        pm.Potential("sw", pt.sum(a) + pt.sum(b) + pm.math.switch(x[0], b[1], 0.0))
    return m


@entry(["z"])
def hard_constraint_switch_to_minus_inf():
    """A forbidden configuration written ``switch(cond, -inf, 0)``: before the floored switch
    branches the relaxed logp was NaN everywhere and first-order differences froze sites."""
    with pm.Model() as m:
        z = pm.Bernoulli("z", 0.5, shape=3)
        pm.Potential("p", pt.switch(pt.eq(z[0], 1) & pt.eq(z[1], 1), -np.inf, 0) + 0.5 * z.sum())
    return m


@entry(["x", "z"])
def comparisons_with_constants():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.4, shape=3)
        z = pm.Categorical("z", p=[0.3, 0.3, 0.4], shape=2)
        pm.Potential(
            "cmp",
            0.7 * pt.sum(pt.eq(x, 1))
            - 0.4 * pt.sum(x > 0) * 0.5
            + 0.3 * pt.sum(pt.neq(z, 0))
            + 0.9 * pt.sum(z >= 1)
            - 0.2 * pt.sum(pt.le(z, 1))
            + 0.5 * pt.eq(z[0], z[1]) * pt.eq(x[2], 0),
        )
    return m


@entry(["z"])
def categorical_compared_with_arange():
    """``eq(z[:, None], arange(K))``: the user's one-hot of a categorical value."""
    w = _rng(6).normal(size=(3, 3))
    with pm.Model() as m:
        z = pm.Categorical("z", p=[0.3, 0.3, 0.4], shape=3)
        onehot = pt.eq(z[:, None], pt.arange(3))
        pm.Potential("w", pt.sum(onehot * w) + 0.4 * pt.sum(onehot[:-1] * onehot[1:]))
    return m


# -- mixtures, indexing, hidden Markov chains -----------------------------------------------------
@entry(["z"])
def mixture_with_batched_indexing():
    y = np.array([-2.1, 0.3, 2.9, 3.2])
    with pm.Model() as m:
        mu = pm.Normal("mu", [-2.0, 0.0, 3.0], 1.0, shape=3)
        sd = pm.HalfNormal("sd", 1.0, shape=3)
        w = pm.Dirichlet("w", np.ones(3))
        z = pm.Categorical("z", p=w, shape=4)
        pm.Normal("y", mu=mu[z], sigma=sd[z], observed=y)
    return m


@entry(["z"])
def mixture_weights_in_potential():
    """A ``pm.Mixture``-like likelihood written by hand: ``log w[z] + logp(Normal(mu[z]), y)``."""
    y = np.array([0.5, 2.5, -1.0])
    w = np.array([0.2, 0.5, 0.3])
    mu = np.array([-1.0, 0.5, 2.5])
    with pm.Model() as m:
        z = pm.Categorical("z", p=np.ones(3) / 3, shape=3)
        comp = pm.logp(pm.Normal.dist(mu=pt.as_tensor(mu)[z], sigma=0.8), y)
        pm.Potential("mix", pt.sum(pt.log(pt.as_tensor(w)[z]) + comp))
    return m


@entry(["z"])
def hidden_markov_chain():
    P = np.array([[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.0, 0.3, 0.7]])  # a zero transition
    with pm.Model() as m:
        z = pm.Categorical("z", p=[0.5, 0.3, 0.2], shape=4)
        trans = pt.as_tensor(P)
        pm.Potential("chain", pt.sum(pt.log(trans[z[:-1], z[1:]])))
        pm.Normal("y", mu=pt.as_tensor([-1.0, 0.0, 2.0])[z], sigma=0.7, observed=[-1, 0.2, 1.8, 2])
    return m


@entry(["z"])
def hidden_markov_chain_with_fixed_start():
    """The initial state joined in front: ``concatenate([[0], z])`` then ``P[zz[:-1], zz[1:]]``."""
    P = np.array([[0.7, 0.3], [0.25, 0.75]])
    with pm.Model() as m:
        z = pm.Categorical("z", p=[0.5, 0.5], shape=4)
        zz = pt.concatenate([pt.as_tensor(np.array([0])), z])
        pm.Potential("chain", pt.sum(pt.log(pt.as_tensor(P)[zz[:-1], zz[1:]])))
        pm.Poisson("y", mu=pt.as_tensor([1.0, 6.0])[z], observed=[0, 2, 7, 5])
    return m


@entry(["x"])
def pairwise_table_indexed_by_binary():
    table = _rng(7).normal(size=(2, 2))
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=5)
        pm.Potential("f", pt.sum(pt.as_tensor(table)[x[:-1], x[1:]]))
    return m


@entry(["a", "b", "c"])
def bayes_net_cpt_indexing():
    cpt = np.array([[0.1, 0.9], [0.6, 0.4], [1.0, 0.0], [0.3, 0.7]]).reshape(2, 2, 2)
    with pm.Model() as m:
        a = pm.Bernoulli("a", p=0.3, shape=2)
        b = pm.Bernoulli("b", p=0.6, shape=2)
        pm.Bernoulli("c", p=pt.as_tensor(cpt[..., 1])[a, b], shape=2)
    return m


@entry(["z"])
def ordered_logistic_latent():
    with pm.Model() as m:
        z = pm.OrderedLogistic("z", eta=0.5, cutpoints=np.array([-1.0, 1.0]), shape=3)
        pm.Normal("y", mu=pt.as_tensor([-1.0, 0.0, 1.5])[z], sigma=1.0, observed=[0.1, 1.2, -0.7])
    return m


# -- parametrisations, dims, data, deterministics ----------------------------------------------
@entry(["x", "z"])
def logit_p_parametrisations():
    data = _rng(8).normal(size=3)
    with pm.Model() as m:
        a = pm.Normal("a", 0.0, 1.0)
        x = pm.Bernoulli("x", logit_p=a + 1.5 * data, shape=3)
        z = pm.Categorical("z", logit_p=np.array([0.0, 1.0, -0.5]) + a, shape=2)
        pm.Potential("c", 0.5 * pt.sum(x[:2] * pt.eq(z, 1)))
    return m


@entry(["z", "v"])
def categorical_with_p_and_logit_p():
    with pm.Model() as m:
        z = pm.Categorical("z", p=np.array([0.1, 0.6, 0.3]), shape=2)
        v = pm.Categorical("v", logit_p=np.array([[0.0, 2.0, -1.0]]), shape=(1,))
        pm.Potential("c", pt.sum(pt.eq(z[1], v)) - 0.5 * pt.eq(z[0], 0))
    return m


@entry(["z"], multilinear=False)
def categorical_value_in_logits_of_another():
    """A category index used as a number in another variable's ``logit_p``."""
    with pm.Model() as m:
        z = pm.Categorical("z", p=np.array([0.1, 0.6, 0.3]), shape=2)
        v = pm.Categorical("v", logit_p=pt.as_tensor([0.0, 2.0, -1.0]) * z[0], shape=1)
        pm.Potential("c", pt.sum(pt.eq(z[1], v)))
    return m


@entry(["z"])
def integer_arithmetic_of_a_category():
    """``z // 2`` and ``z % 2`` of a bounded value: tabulated over its categories."""
    with pm.Model() as m:
        z = pm.Categorical("z", p=[0.1, 0.2, 0.3, 0.4], shape=2)
        half, parity = z // 2, z % 2
        pm.Potential("c", 0.7 * pt.sum(half) - 0.4 * parity[0] * half[1] + pt.eq(half[0], 1))
    return m


@entry(["x"])
def dims_and_coords():
    coords = {"site": ["a", "b", "c", "d"], "obs": range(6)}
    site_of_obs = np.array([0, 1, 1, 2, 3, 3])
    with pm.Model(coords=coords) as m:
        x = pm.Bernoulli("x", p=0.3, dims="site")
        idx = pm.Data("idx", site_of_obs, dims="obs")
        mu = pt.as_tensor([0.0, 2.0])[x[idx]]
        pm.Normal("y", mu=mu, sigma=1.0, observed=[0.1, 2.2, 1.9, -0.2, 2.5, 1.1], dims="obs")
        pm.Potential("c", 0.4 * pt.sum(x[1:] * x[:-1]))
    return m


@entry(["z"], multilinear=False)
def occupancy_detections():
    """Occupancy: ``det ~ Bernoulli(z[site] * p)``; a detection at an unoccupied site has
    probability zero."""
    coords = {"site": range(3), "visit": range(4)}
    det = np.array([[0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1]])
    with pm.Model(coords=coords) as m:
        psi = pm.Beta("psi", 2.0, 2.0)
        p = pm.Beta("p", 2.0, 2.0)
        z = pm.Bernoulli("z", p=psi, dims="site")
        pm.Bernoulli("det", p=z[:, None] * p, observed=det, dims=("site", "visit"))
    return m


@entry(["x"])
def deterministics_of_discrete_values():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.4, shape=4)
        s = pm.Deterministic("s", 2 * x - 1)
        n_on = pm.Deterministic("n_on", x.sum())
        pm.Potential("c", 0.5 * pt.sum(s[1:] * s[:-1]) + 0.3 * n_on)
    return m


@entry(["x"])
def shapes_sizes_and_fills():
    """Ops whose output does not depend on values: shapes, sizes, ``ones_like``, ``alloc``."""
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.4, shape=4)
        n = x.shape[0]
        ones = pt.ones_like(x)
        zeros = pt.zeros_like(x, dtype="float64")
        full = pt.alloc(0.5, x.size)
        fixed = pt.specify_shape(x, (4,))
        first = pt.full_like(x, x[0], dtype="float64")  # fill with a block-dependent value
        pm.Potential(
            "c",
            pt.sum(ones * x) / n
            + pt.sum(zeros + full * fixed)
            + 0.2 * pt.sum(fixed[1:] * x[:-1])
            + pt.cast(pt.shape(x)[0], "float64")
            - 0.3 * pt.sum(first * np.arange(4.0)),
        )
    return m


# -- reductions, masks, outer products, pm.math ------------------------------------------------
@entry(["x"])
def sums_over_axes():
    w = _rng(9).normal(size=3)
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=(2, 3))
        cols = x.sum(axis=0)
        rows = pt.sum(x, axis=1)
        pm.Potential("c", pt.sum(w * cols) + 0.5 * rows[0] * x[1, 0] - 0.3 * pt.sum(x, axis=None))
    return m


@entry(["x"], multilinear=False)
def sum_in_poisson_rate():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.3, shape=5)
        pm.Poisson("y", mu=pt.exp(0.2 + 0.3 * pt.sum(x)), observed=[2, 3])
    return m


@entry(["x"])
def mean_of_discrete_values():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.3, shape=4)
        pm.Potential("c", 2.0 * x.mean() + 0.5 * pt.mean(x[:2]) * x[3])
    return m


@entry(["x"])
def boolean_masks():
    mask = np.array([True, False, True, True, False])
    h = _rng(10).normal(size=5)
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=5)
        s = 2 * x - 1
        pm.Potential("m", pt.sum(s[mask] * h[mask]) + 0.3 * pt.sum(s[mask][1:] * s[mask][:-1]))
    return m


@entry(["x"])
def outer_product_couplings():
    J = np.triu(_rng(11).normal(size=(4, 4)), 1)
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=4)
        s = 2 * x - 1
        pm.Potential("o", pt.sum(J * pt.outer(s, s)))
    return m


@entry(["x"], multilinear=False)
def potentials_from_pm_math():
    data = _rng(12).normal(size=4)
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=4)
        s = 2 * x - 1
        e = pt.sum(s * data)
        pm.Potential("lse", pm.math.logsumexp(pt.stack([0.5 * e, -0.3 * e, pt.sum(x) * 0.2])))
        pm.Potential("lpe", -pm.math.log1pexp(e))
        pm.Potential("sig", pt.log(pm.math.sigmoid(pt.dot(x, data) + 0.3)))
        pm.Potential("lae", pm.math.logaddexp(0.1 * pt.sum(x), pt.max(x)))
    return m


@entry(["x", "z"])
def pm_math_functions_of_data_times_values():
    data = _rng(13).normal(size=3)
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.5, shape=3)
        z = pm.Categorical("z", p=[0.2, 0.3, 0.5], shape=2)
        table = pm.math.sigmoid(pt.as_tensor(data))
        pm.Potential("a", pt.sum(x * pm.math.log1pexp(data)) + pt.sum(pm.math.log(table[z])))
        pm.Potential("b", pm.math.logsumexp(pt.as_tensor(data)) * x[0])
    return m


# -- integer latents ---------------------------------------------------------------------------
@entry(["k"], multilinear=False, int_range=(0, 7))
def poisson_counts_latent():
    with pm.Model() as m:
        k = pm.Poisson("k", mu=3.0, shape=2)
        pm.Poisson("y", mu=k + 0.5, observed=[2, 5])
    return m


@entry(["k"], multilinear=False, int_range=(0, 5))
def binomial_count_latent():
    with pm.Model() as m:
        k = pm.Binomial("k", n=5, p=0.4, shape=2)
        pm.Normal("y", mu=k, sigma=1.0, observed=[1.2, 3.9])
    return m


@entry(["N"], multilinear=False, int_range=(0, 7))
def n_mixture_abundance():
    """``N ~ Poisson``, ``y ~ Binomial(N, p)``: states with ``N < max(y)`` have probability 0."""
    y = np.array([[2, 3, 1], [0, 1, 4]])
    with pm.Model() as m:
        lam = pm.Exponential("lam", 0.3)
        p = pm.Beta("p", 2.0, 2.0)
        N = pm.Poisson("N", mu=lam, shape=2)
        pm.Binomial("y", n=N[:, None], p=p, observed=y)
    return m


@entry(["tau"], multilinear=False, int_range=(0, 6))
def switch_point_discrete_uniform():
    """Coal-mining style: ``rate = switch(tau > t, early, late)`` (piecewise: no (b))."""
    counts = np.array([4, 5, 4, 1, 0, 2])
    with pm.Model() as m:
        tau = pm.DiscreteUniform("tau", lower=0, upper=6)
        early = pm.Exponential("early", 1.0)
        late = pm.Exponential("late", 1.0)
        t = np.arange(6)
        pm.Poisson("y", mu=pm.math.switch(tau > t, early, late), observed=counts)
    return m


@entry(["x", "z", "k"], multilinear=False, int_range=(0, 4))
def several_kinds_in_one_block():
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.4, shape=2)
        z = pm.Categorical("z", p=[0.2, 0.3, 0.5])
        k = pm.Poisson("k", mu=1.5)
        pm.Potential("c", 0.6 * x[0] * pt.eq(z, 2) - 0.2 * k * x[1] + 0.3 * pt.switch(x[1], z, 0))
        pm.Normal("y", mu=k + pt.as_tensor([0.0, 1.0, -1.0])[z], sigma=1.0, observed=1.5)
    return m


@entry(["x"], multilinear=False)
def integer_max_of_binary():
    """``max`` of binary values (an "any") and ``min``: equal on discrete points, not linear."""
    with pm.Model() as m:
        x = pm.Bernoulli("x", p=0.3, shape=3)
        pm.Potential("any", 0.8 * pt.max(x) - 0.5 * pt.min(x[1:]))
    return m


ENTRIES = {e.name: e for e in CORPUS}


# -- the checks --------------------------------------------------------------------------------
def _block(model, names):
    vars = [model.rvs_to_values[model[n]] for n in names]
    ip = model.initial_point()
    specs = describe_block(model, vars, ip)
    return vars, ip, specs, BlockLayout(specs)


def _states(specs, int_range, seed=0):
    ranges = []
    for spec in specs:
        for _ in range(spec.size):
            if spec.kind == "binary":
                ranges.append(np.arange(2))
            elif spec.kind == "categorical":
                ranges.append(np.arange(spec.n_categories))
            else:
                ranges.append(np.arange(int_range[0], int_range[1] + 1))
    n_states = np.prod([len(r) for r in ranges], dtype=float)
    if n_states <= MAX_ENUMERATED:
        return [np.array(s, dtype=np.int64) for s in itertools.product(*ranges)]
    rng = np.random.default_rng(seed)
    return [np.array([rng.choice(r) for r in ranges], dtype=np.int64) for _ in range(N_RANDOM)]


def _leaf_values(specs, x):
    """Independent construction of the relaxed inputs at a discrete point."""
    leaves = []
    for spec in specs:
        piece = x[spec.offset : spec.offset + spec.size].reshape(spec.shape)
        if spec.kind == "categorical":
            leaves.append(np.eye(spec.n_categories)[piece])
        else:
            leaves.append(piece.astype(np.float64))
    return leaves


def _other_point(model, vars, ip, rng):
    """The other value variables at a random point (transformed space)."""
    point = {}
    names = {v.name for v in vars}
    for v in model.value_vars:
        if v.name in names:
            continue
        value = np.asarray(ip[v.name])
        if value.dtype.kind == "f":
            value = value + rng.normal(scale=0.5, size=value.shape)
        point[v.name] = value
    return point


def check_relaxed_equals_logp(model, names, int_range=None):
    vars, ip, specs, layout = _block(model, names)
    relaxed = relaxed_logp(model, specs)
    others = [v for v in model.value_vars if v not in vars]
    f_relaxed = pytensor.function(
        relaxed.inputs + others, relaxed.logp, on_unused_input="ignore", **FAST
    )
    f_logp = model.compile_logp(**FAST)
    rng = np.random.default_rng(1)
    n_zero = 0
    for x in _states(specs, int_range):
        point = _other_point(model, vars, ip, rng)
        for spec in specs:
            point[spec.name] = x[spec.offset : spec.offset + spec.size].reshape(spec.shape)
        logp = float(f_logp(point))
        value = float(f_relaxed(*_leaf_values(specs, x), *[point[v.name] for v in others]))
        assert not np.isnan(value), x
        if np.isfinite(logp):
            assert value == pytest.approx(logp, rel=1e-9, abs=1e-9), x
        else:
            n_zero += 1
            assert value <= 0.5 * LOG_FLOOR, x
    return relaxed, n_zero


def check_first_order_equals_exact(model, names, int_range=None, exact_needed=True):
    vars, ip, specs, layout = _block(model, names)
    shared = pm.make_shared_replacements(ip, vars, model)
    grad = GradientDifferences(model, specs, layout, shared, compile_kwargs=FAST)
    exact = ExactDifferences(model, specs, layout, shared, compile_kwargs=FAST)
    for x in _states(specs, int_range, seed=2):
        grad.refresh_bounds(x)
        exact.refresh_bounds(x)
        logp, d_exact = exact(x)
        logp_g, d_grad = grad(x)
        assert not np.isnan(d_grad).any()
        if not np.isfinite(logp):
            assert logp_g == logp
            continue
        assert logp_g == pytest.approx(logp, rel=1e-12)
        if exact_needed:
            np.testing.assert_array_equal(np.isinf(d_exact), np.isinf(d_grad), err_msg=str(x))
            finite = np.isfinite(d_exact)
            np.testing.assert_allclose(
                d_grad[finite], d_exact[finite], rtol=1e-9, atol=1e-9, err_msg=str(x)
            )
    return grad


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 30
    assert len({e.name for e in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("name", list(ENTRIES))
def test_corpus_entry(name):
    """(a) relaxed logp == logp at discrete points; (c) gradient differences build; (b) on
    multilinear entries first-order == exact differences (elsewhere: same logp, no NaN)."""
    e = ENTRIES[name]
    model = e.build()
    check_relaxed_equals_logp(model, e.block, e.int_range)
    check_first_order_equals_exact(model, e.block, e.int_range, exact_needed=e.multilinear)


def test_relaxed_logp_reads_no_block_value():
    """Shape reads of block variables become constants: the relaxed logp is a function of its
    float inputs (and the model's other variables) alone."""
    from pytensor.graph.traversal import graph_inputs

    for name in ("ising_with_roll", "shapes_sizes_and_fills", "dims_and_coords"):
        e = ENTRIES[name]
        model = e.build()
        vars, _, specs, _ = _block(model, e.block)
        inputs = set(graph_inputs([relaxed_logp(model, specs).logp]))
        assert not inputs & set(vars), name


def test_zero_probability_states_are_checked():
    """Entries with zero-probability states inside the support do reach them."""
    for name in (
        "n_mixture_abundance",
        "occupancy_detections",
        "hidden_markov_chain",
        "hard_constraint_switch_to_minus_inf",
    ):
        e = ENTRIES[name]
        _, n_zero = check_relaxed_equals_logp(e.build(), e.block, e.int_range)
        assert n_zero > 0, name


def test_set_data_changes_the_relaxed_target():
    """``pm.Data`` is a shared input: after ``set_data`` the compiled differences follow it."""
    m = quadratic_form_with_data_matrix()
    grad = check_first_order_equals_exact(m, ["x"])
    x = np.array([1, 0, 1, 1, 0])
    before = grad(x)[1].copy()
    with m:
        pm.set_data({"h": np.array([3.0, -1.0, 0.0, 2.0, 0.5])})
    after = grad(x)[1]
    assert not np.allclose(before, after)
    check_first_order_equals_exact(m, ["x"])
    check_relaxed_equals_logp(m, ["x"])


def test_auto_picks_the_gradient_on_user_written_ising(monkeypatch):
    """Never the whole-model fallback: with the numba kernels on, the lattice is a pairwise
    binary block and auto takes its couplings (exact, and cheaper than first-order differences);
    without them, auto takes first-order differences (the relaxation holds)."""
    from pymc_lbp import LocallyBalanced
    from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel

    m = ising_with_roll()
    with m, warnings.catch_warnings():
        warnings.simplefilter("error")
        step = LocallyBalanced([m["b"]], differences="auto", compile_kwargs=FAST)
    assert step.differences_kind == "exact" and step.differences.method == "pairwise"
    monkeypatch.setattr(pairwise_kernel, "ENABLED", False)
    with m, warnings.catch_warnings():
        warnings.simplefilter("error")
        step = LocallyBalanced([m["b"]], differences="auto", compile_kwargs=FAST)
    assert step.differences_kind == "gradient"


def test_integer_division_of_unbounded_value_is_not_relaxable_and_named():
    """``k // 2`` of a Poisson count has no differentiable extension: the error names the
    operation, the block variable and the model term."""
    with pm.Model() as m:
        pm.Bernoulli("x", p=0.5, shape=2)
        k = pm.Poisson("k", mu=3.0, shape=3)
        pm.Potential("halves", 0.5 * pt.sum(k // 2))
    _, _, specs, _ = _block(m, ["x", "k"])
    with pytest.raises(NotRelaxableError, match=r"(?i)int_?div") as info:
        relaxed_logp(m, specs)
    message = str(info.value)
    assert "`k`" in message and "`x`" not in message and "`halves`" in message


@pytest.mark.parametrize(
    "use, match",
    [
        (lambda z: pt.sum(pt.bincount(z, minlength=3) ** 2), "determines a shape"),
        (lambda z: pt.sum(pt.nonzero(z)[0]), "Nonzero"),
    ],
    ids=["bincount", "nonzero"],
)
def test_value_dependent_shapes_are_not_relaxable(use, match):
    with pm.Model() as m:
        z = pm.Categorical("z", p=np.ones(3) / 3, shape=4)
        pm.Potential("counts", use(z))
    _, _, specs, _ = _block(m, ["z"])
    with pytest.raises(NotRelaxableError, match=match) as info:
        relaxed_logp(m, specs)
    assert "`z`" in str(info.value) and "`counts`" in str(info.value)
