"""The four mixed (discrete + continuous) models of ``benchmarks.compiled_mixed``.

Each model is a :class:`MixedModel`: the PyMC model, its NumPyro twin (the same log density up
to a constant, checked by :func:`check_same_density` at random states), the discrete and key
continuous variables, and the discrete summary whose ESS is measured.

* ``spike_slab``: :func:`benchmarks.vs_numpyro.spike_slab_pymc` on
  :func:`benchmarks.vs_numpyro.spike_slab_data` (n=200, p=30); summary: included indicators.
* ``gmm``: a 3-component Gaussian mixture with explicit assignments (N=500, means -3, 0, 3,
  sd 1, fixed seed), ordered means; summary: the mean assignment.
* ``hidden_markov``: ``examples/gallery/hidden_markov.py``; summary: fraction of time in state 1.
* ``coal_mining``: ``examples/gallery/coal_mining.py``; summary: the switch point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from benchmarks.vs_numpyro import (
    make_target,
    numpyro_model,
    spike_slab_data,
    spike_slab_pymc,
)
from examples.gallery import coal_mining, hidden_markov

GMM_K, GMM_N, GMM_MEANS = 3, 500, np.array([-3.0, 0.0, 3.0])


@dataclass
class MixedModel:
    """One benchmark model: PyMC model, NumPyro twin and what is measured on it."""

    name: str
    build: Callable[[], pm.Model]
    numpyro_model: Callable[[], Callable]
    discrete: list[str]
    continuous: list[str]
    summary_name: str
    summary: Callable[[dict[str, np.ndarray]], np.ndarray]
    random_state: Callable[[np.random.Generator], dict[str, np.ndarray]]
    numpyro_offset: dict[str, int] = field(default_factory=dict)
    """Per discrete site: the NumPyro twin's value is PyMC's minus this offset (NumPyro's
    discrete Gibbs proposals take a site's values to be 0, 1, ..., support size - 1)."""

    def to_numpyro(self, state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A PyMC state in the NumPyro twin's values."""
        return {k: v - self.numpyro_offset.get(k, 0) for k, v in state.items()}

    def from_numpyro(self, state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """NumPyro draws in the PyMC model's values."""
        return {k: v + self.numpyro_offset.get(k, 0) for k, v in state.items()}


def gmm_data(seed: int = 0) -> np.ndarray:
    """``GMM_N`` points from equal-weight components at ``GMM_MEANS`` with sd 1."""
    rng = np.random.default_rng(seed)
    z = rng.integers(GMM_K, size=GMM_N)
    return rng.normal(GMM_MEANS[z], 1.0)


GMM_Y = gmm_data()


def gmm_pymc(y: np.ndarray = GMM_Y) -> pm.Model:
    """w ~ Dir(1), ordered mu ~ N(0, 5), sigma ~ HN(2), z ~ Cat(w), y ~ N(mu[z], sigma)."""
    with pm.Model() as model:
        w = pm.Dirichlet("w", a=np.ones(GMM_K))
        mu = pm.Normal(
            "mu",
            0.0,
            5.0,
            shape=GMM_K,
            transform=pm.distributions.transforms.ordered,
            initval=np.array([-1.0, 0.0, 1.0]),
        )
        sigma = pm.HalfNormal("sigma", 2.0)
        z = pm.Categorical("z", p=w, shape=y.size)
        pm.Normal("y", mu[z], sigma, observed=y)
    return model


def gmm_numpyro(y: np.ndarray = GMM_Y) -> Callable:
    """The NumPyro twin: mu an ordered vector (improper) plus the Normal(0, 5) prior as a factor,
    so that its density is PyMC's restricted to ordered vectors (HMC works on the ordered
    transform's unconstrained space, with its Jacobian, as PyMC's NUTS)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    n, y = y.size, jnp.asarray(y)

    def model():
        w = numpyro.sample("w", dist.Dirichlet(jnp.ones(GMM_K)))
        mu = numpyro.sample(
            "mu", dist.ImproperUniform(dist.constraints.ordered_vector, (), (GMM_K,))
        )
        numpyro.factor("mu_prior", dist.Normal(0.0, 5.0).log_prob(mu).sum())
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
        with numpyro.plate("obs", n):
            z = numpyro.sample("z", dist.Categorical(probs=w))
            numpyro.sample("y", dist.Normal(mu[z], sigma), obs=y)

    return model


def spike_slab_numpyro() -> Callable:
    """The spike-and-slab regression in NumPyro: :func:`benchmarks.vs_numpyro.numpyro_model`."""
    return numpyro_model(make_target("spike_slab"))


def hmm_numpyro() -> Callable:
    """The gallery HMM in NumPyro: Dirichlet rows, uniform states, the chain as a factor."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    y, levels, n = jnp.asarray(hidden_markov.Y), jnp.asarray(hidden_markov.MU), hidden_markov.T

    def model():
        P = numpyro.sample("P", dist.Dirichlet(jnp.ones((2, 2))))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        with numpyro.plate("time", n):
            z = numpyro.sample("z", dist.Categorical(probs=jnp.full(2, 0.5)))
            numpyro.sample("y", dist.Normal(levels[z], sigma), obs=y)
        numpyro.factor("transitions", jnp.log(P[z[:-1], z[1:]]).sum())

    return model


def coal_numpyro() -> Callable:
    """The gallery switch-point model in NumPyro: the switch point as its offset from the first
    year, ``DiscreteUniform(0, 110)`` (NumPyro's discrete Gibbs proposals assume a support
    0, 1, ...: with ``DiscreteUniform(1851, 1961)`` they propose 0..110, outside the support,
    and the chain never moves)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    years, counts = jnp.asarray(coal_mining.YEARS), jnp.asarray(coal_mining.DISASTERS)
    first, n_years = int(coal_mining.YEARS.min()), len(coal_mining.YEARS)

    def model():
        tau = first + numpyro.sample("switchpoint", dist.DiscreteUniform(0, n_years - 1))
        early = numpyro.sample("early_rate", dist.Exponential(1.0))
        late = numpyro.sample("late_rate", dist.Exponential(1.0))
        rate = jnp.where(tau >= years, early, late)
        with numpyro.plate("years", years.shape[0]):
            numpyro.sample("disasters", dist.Poisson(rate), obs=counts)

    return model


def _simplex(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform random points of the simplex along the last axis of ``shape``."""
    return rng.dirichlet(np.ones(shape[-1]), size=shape[:-1] or None)


def gmm_state(n: int) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
    """Random states of the mixture with ``n`` points (for the density checks)."""

    def state(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {
            "w": _simplex(rng, (GMM_K,)),
            "mu": np.sort(rng.normal(0.0, 3.0, size=GMM_K)),
            "sigma": np.array(rng.uniform(0.5, 2.0)),
            "z": rng.integers(GMM_K, size=n),
        }

    return state


MODELS: dict[str, MixedModel] = {
    "spike_slab": MixedModel(
        "spike_slab",
        lambda: spike_slab_pymc(*spike_slab_data()),
        spike_slab_numpyro,
        ["gamma"],
        ["beta", "sigma"],
        "n_included",
        lambda post: post["gamma"].sum(-1).astype(float),
        lambda rng: {
            "gamma": rng.integers(0, 2, size=30),
            "beta": rng.normal(size=30),
            "sigma": np.array(rng.uniform(0.5, 2.0)),
        },
    ),
    "gmm": MixedModel(
        "gmm",
        gmm_pymc,
        gmm_numpyro,
        ["z"],
        ["w", "mu", "sigma"],
        "mean_assignment",
        lambda post: post["z"].mean(-1).astype(float),
        gmm_state(GMM_N),
    ),
    "hidden_markov": MixedModel(
        "hidden_markov",
        hidden_markov.build_model,
        hmm_numpyro,
        ["z"],
        list(hidden_markov.CONTINUOUS),
        "time_in_state_1",
        lambda post: post["z"].mean(-1).astype(float),
        lambda rng: {
            "P": _simplex(rng, (2, 2)),
            "sigma": np.array(rng.uniform(0.5, 2.0)),
            "z": rng.integers(2, size=hidden_markov.T),
        },
    ),
    "coal_mining": MixedModel(
        "coal_mining",
        coal_mining.build_model,
        coal_numpyro,
        ["switchpoint"],
        list(coal_mining.CONTINUOUS),
        "switchpoint",
        lambda post: post["switchpoint"].astype(float),
        lambda rng: {
            "switchpoint": np.array(rng.integers(1851, 1962)),
            "early_rate": np.array(rng.uniform(0.5, 4.0)),
            "late_rate": np.array(rng.uniform(0.3, 2.0)),
        },
        {"switchpoint": int(coal_mining.YEARS.min())},
    ),
}


def pymc_log_density(model: pm.Model, states: list[dict[str, np.ndarray]]) -> np.ndarray:
    """The PyMC model's log density without Jacobians at constrained ``states``.

    Each value is mapped to the value variable's space by the variable's transform (if any).
    """
    logp = model.compile_logp(jacobian=False)
    out = []
    for st in states:
        point = {}
        for rv in model.free_RVs:
            value_var = model.rvs_to_values[rv]
            v = np.asarray(st[rv.name])
            transform = model.rvs_to_transforms[rv]
            if transform is not None:
                v = transform.forward(pt.as_tensor(v), *rv.owner.inputs).eval()
            point[value_var.name] = np.asarray(v, dtype=value_var.dtype)
        out.append(float(logp(point)))
    return np.array(out)


def numpyro_log_density(spec: MixedModel, states: list[dict[str, np.ndarray]]) -> np.ndarray:
    """The NumPyro twin's log density at constrained ``states``."""
    from numpyro.infer.util import log_density

    model = spec.numpyro_model()
    return np.array([float(log_density(model, (), {}, spec.to_numpyro(st))[0]) for st in states])


def check_same_density(spec: MixedModel, k: int = 6, seed: int = 7) -> float:
    """Spread (max - min) of PyMC minus NumPyro log densities over ``k`` random states.

    Raises
    ------
    AssertionError
        When the spread exceeds ``1e-6 * (1 + max |log density|)``: not the same target.
    """
    rng = np.random.default_rng(seed)
    states = [spec.random_state(rng) for _ in range(k)]
    ref = pymc_log_density(spec.build(), states)
    spread = float(np.ptp(ref - numpyro_log_density(spec, states)))
    if not spread <= 1e-6 * (1.0 + np.abs(ref).max()):
        raise AssertionError(f"{spec.name}: PyMC and NumPyro log densities differ by {spread:.3g}")
    return spread


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Check every NumPyro twin against its PyMC model; print and return the spreads.

    Run: ``python -m benchmarks.compiled_mixed_models [--models gmm ...]``.
    """
    import jax

    from benchmarks.common import benchmark_parser

    parser = benchmark_parser(__doc__, quick=None)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # as benchmarks.compiled_mixed samples
    spreads = {name: check_same_density(MODELS[name]) for name in args.models}
    for name, spread in spreads.items():
        print(f"{name:14s} PyMC - NumPyro log density spread {spread:.3g}")
    return spreads


if __name__ == "__main__":
    main()
