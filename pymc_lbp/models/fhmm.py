"""A factorial hidden Markov model (binary chains, Gaussian emission) as a PyMC model.

The target of Sun, Dai, Schuurmans (2022) and of the path auxiliary sampler paper: ``K``
independent binary Markov chains ``x_{t,k}`` of length ``L`` and a scalar observation per time
step,

* ``x_{0,k} ~ Bernoulli(alpha)``,
* ``P(x_{t,k} = x_{t-1,k}) = beta`` (persistence),
* ``y_t ~ Normal(sum_k W_k x_{t,k} + b, sigma)``.

The sampled block is the posterior ``p(x | y)`` with the correct log-joint (the public reference
code has the prior terms with the wrong sign and the transition probability as a logit). The
paper's settings are ``alpha = 0.1, beta = 0.8, L = 1000``, ``K`` in {5, 10, 20} and ``sigma`` in
{sqrt 2, 1, 1/sqrt 2}.

Multilinear form. The Gaussian emission contains ``(W . x_t)^2``, whose diagonal terms
``W_k^2 x_{t,k}^2`` are not multilinear in a relaxed ``x``; on 0/1 values they equal
``W_k^2 x_{t,k}``. The model therefore adds the potential ``"multilinear"`` =
``sum_{t,k} W_k^2 (x_{t,k}^2 - x_{t,k}) / (2 sigma^2)``, which is exactly 0 at every discrete
state (the target is unchanged) and makes the relaxed log-density multilinear, so first-order
neighbour differences are exact on this model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt


@dataclass(frozen=True)
class FHMMData:
    """A simulated FHMM data set: hidden chains ``x`` (L, K), observations ``y`` (L,), and the
    emission weights ``W`` (K,) and bias ``b``."""

    x: np.ndarray
    y: np.ndarray
    W: np.ndarray
    b: float
    sigma: float
    alpha: float
    beta: float


def fhmm_data(
    length: int = 1000,
    n_chains: int = 10,
    sigma: float = 1.0,
    alpha: float = 0.1,
    beta: float = 0.8,
    seed: int = 0,
) -> FHMMData:
    """Simulate hidden chains and observations from the FHMM (``W, b ~ N(0, 1)``)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=n_chains)
    b = float(rng.normal())
    x = np.empty((length, n_chains), dtype=np.int64)
    x[0] = rng.random(n_chains) < alpha
    for t in range(1, length):
        stay = rng.random(n_chains) < beta
        x[t] = np.where(stay, x[t - 1], 1 - x[t - 1])
    y = x @ W + b + sigma * rng.normal(size=length)
    return FHMMData(x, y, W, b, float(sigma), float(alpha), float(beta))


def fhmm_model(
    *args, data: FHMMData | None = None, name: str = "x", multilinear: bool = True, **kwargs
) -> pm.Model:
    """The FHMM posterior over the hidden chains as a PyMC model.

    Parameters
    ----------
    *args, **kwargs
        The simulation's settings, as :func:`fhmm_data` takes them (``length``, ``n_chains``,
        ``sigma``, ``alpha``, ``beta``, ``seed``; ignored when ``data`` is given).
    data : FHMMData, optional
        Use these observations instead of simulating.
    name : str, default "x"
        The Bernoulli variable, shape ``(length, n_chains)``.
    multilinear : bool, default True
        Add the zero potential that makes the relaxed log-density multilinear (see the module
        docs); ``False`` only to see first-order differences go wrong without it.

    Returns
    -------
    pymc.Model
        The simulated data set is stored as ``model.fhmm_data``.
    """
    if data is None:
        data = fhmm_data(*args, **kwargs)
    L, K = data.x.shape
    p_first = np.full((L, K), 0.5)  # t >= 1: the flat 1/2 is a constant; transitions below
    p_first[0] = data.alpha
    log_stay, log_move = np.log(data.beta), np.log1p(-data.beta)
    with pm.Model() as model:
        x = pm.Bernoulli(name, p=p_first, shape=(L, K))
        xf = pt.cast(x, "float64")
        same = xf[1:] * xf[:-1] + (1.0 - xf[1:]) * (1.0 - xf[:-1])
        pm.Potential(
            "persistence",
            pt.sum(same * log_stay + (1.0 - same) * log_move) + (L - 1) * K * np.log(2.0),
        )
        pm.Normal("y", mu=pt.dot(xf, data.W) + data.b, sigma=data.sigma, observed=data.y)
        if multilinear:
            correction = pt.sum(pt.dot(xf**2 - xf, data.W**2)) / (2.0 * data.sigma**2)
            pm.Potential("multilinear", correction)
    model.fhmm_data = data
    return model
