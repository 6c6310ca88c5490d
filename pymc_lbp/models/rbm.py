"""Restricted Boltzmann machines (visible units, hidden units summed out) as PyMC models.

``log pi(v) = b_v . v + sum_j softplus(c_j + W_j . v)`` for binary visible units ``v``: the
target of the RBM experiments of Grathwohl et al. (2021) and Sun, Dai, Schuurmans (2022). It is
not multilinear in ``v`` (softplus of a linear form), so first-order neighbour differences are an
approximation here, as in those papers; the MH correction keeps the samplers exact.

* :func:`random_rbm_params`: the random RBM of the Gibbs-with-gradients code (100 visible,
  25 hidden, ``W ~ N(0, 0.05)``, biases ``N(0, 1)``).
* :func:`train_rbm_cd`: an RBM trained by contrastive divergence on binary data, e.g. the 8x8
  digits bundled with scikit-learn (:func:`binarized_digits`; scikit-learn is a benchmark-only
  extra).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt


@dataclass(frozen=True)
class RBMParams:
    """Weights ``W`` (n_hidden, n_visible), visible biases ``b_v`` and hidden biases ``b_h``."""

    W: np.ndarray
    b_v: np.ndarray
    b_h: np.ndarray

    @property
    def n_visible(self) -> int:
        return self.W.shape[1]

    @property
    def n_hidden(self) -> int:
        return self.W.shape[0]

    def log_density(self, v: np.ndarray) -> np.ndarray:
        """Unnormalised ``log pi(v)`` of 0/1 states ``v`` (..., n_visible)."""
        v = np.asarray(v, dtype=float)
        return v @ self.b_v + np.logaddexp(0.0, v @ self.W.T + self.b_h).sum(axis=-1)

    def gibbs_sweeps(self, v: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` block-Gibbs sweeps ``h | v, v | h`` from states ``v`` (batch, n_visible)."""
        v = np.asarray(v, dtype=float)
        for _ in range(n):
            h = rng.random((v.shape[0], self.n_hidden)) < _sigmoid(v @ self.W.T + self.b_h)
            v = (rng.random(v.shape) < _sigmoid(h @ self.W + self.b_v)).astype(float)
        return v


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * a))


def random_rbm_params(
    n_visible: int = 100, n_hidden: int = 25, weight_var: float = 0.05, seed: int = 0
) -> RBMParams:
    """A random RBM as in the Gibbs-with-gradients code: ``W ~ N(0, weight_var)``, biases
    ``N(0, 1)``."""
    rng = np.random.default_rng(seed)
    W = rng.normal(0.0, np.sqrt(weight_var), size=(n_hidden, n_visible))
    return RBMParams(W, rng.normal(size=n_visible), rng.normal(size=n_hidden))


def binarized_digits(threshold: float = 8.0) -> np.ndarray:
    """The 8x8 digits of scikit-learn (1797 images, grey levels 0-16) thresholded to 0/1.

    Raises
    ------
    ImportError
        Without scikit-learn (install the ``bench`` extra).
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "binarized_digits needs scikit-learn (pip install 'pymc_lbp[bench]')"
        ) from err
    return (load_digits().data > threshold).astype(np.int64)


def train_rbm_cd(
    data: np.ndarray,
    n_hidden: int = 50,
    *,
    epochs: int = 30,
    batch_size: int = 50,
    lr: float = 0.05,
    cd_steps: int = 5,
    seed: int = 0,
) -> RBMParams:
    """Train an RBM on binary ``data`` (n, n_visible) by contrastive divergence (CD-k, SGD).

    Visible biases start at the data's log-odds (clipped means), weights at ``N(0, 0.01^2)``.
    """
    rng = np.random.default_rng(seed)
    data = np.asarray(data, dtype=float)
    n, d = data.shape
    mean = np.clip(data.mean(axis=0), 0.01, 0.99)
    W = rng.normal(0.0, 0.01, size=(n_hidden, d))
    b_v = np.log(mean / (1 - mean))
    b_h = np.zeros(n_hidden)
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            v0 = data[order[start : start + batch_size]]
            ph0 = _sigmoid(v0 @ W.T + b_h)
            vk = RBMParams(W, b_v, b_h).gibbs_sweeps(v0, cd_steps, rng)
            phk = _sigmoid(vk @ W.T + b_h)
            m = v0.shape[0]
            W += lr * (ph0.T @ v0 - phk.T @ vk) / m
            b_v += lr * (v0 - vk).mean(axis=0)
            b_h += lr * (ph0 - phk).mean(axis=0)
    return RBMParams(W, b_v, b_h)


def rbm_model(params: RBMParams, *, name: str = "v") -> pm.Model:
    """The RBM's visible marginal as a PyMC model (Bernoulli variable ``name``).

    The parameters are stored as ``model.rbm``.
    """
    with pm.Model() as model:
        v = pm.Bernoulli(name, logit_p=params.b_v, shape=params.n_visible)
        vf = pt.cast(v, "float64")
        pm.Potential("hidden", pt.sum(pt.softplus(pt.dot(params.W, vf) + params.b_h)))
    model.rbm = params
    return model
