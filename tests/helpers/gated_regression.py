"""The exact posterior of a linear-Gaussian regression whose coefficients are gated by flags.

``g_j ~ Bernoulli(p_on)``, ``b_j ~ N(0, prior_sd^2)``, ``y ~ N(X (g * b), 1)``: given ``g`` the
coefficients are Gaussian, so each flag configuration's marginal likelihood and the
coefficients' conditional law are closed form (the prior where a flag is off).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
from scipy import stats
from scipy.special import logsumexp


class GatedPosterior(NamedTuple):
    """Configurations ``(K, p)``, their posterior probabilities ``(K,)``, and the coefficients'
    conditional means ``(K, p)`` and covariances ``(K, p, p)`` given each."""

    configs: np.ndarray
    weights: np.ndarray
    means: np.ndarray
    covs: np.ndarray

    def moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``P(g_j = 1)``, ``E[b_j]`` and ``E[b_j^2]``."""
        second = np.diagonal(self.covs, axis1=1, axis2=2) + self.means**2
        return self.weights @ self.configs, self.weights @ self.means, self.weights @ second

    def draws(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` exact posterior draws: flags ``(n, p)`` int64, coefficients ``(n, p)``."""
        k = rng.choice(len(self.configs), size=n, p=self.weights)
        chol = np.linalg.cholesky(self.covs)
        z = rng.normal(size=(n, self.configs.shape[1]))
        return self.configs[k].astype(np.int64), self.means[k] + np.einsum("nij,nj->ni", chol[k], z)


def gated_posterior(x: np.ndarray, y: np.ndarray, p_on: float, prior_sd: float) -> GatedPosterior:
    """The exact posterior (module docs) by enumerating the ``2^p`` configurations."""
    n, p = x.shape
    configs = np.array(list(itertools.product((0, 1), repeat=p)))
    logw, means, covs = [], [], []
    for c in configs:
        xc = x * c
        cov_y = np.eye(n) + prior_sd**2 * xc @ xc.T
        logw.append(
            np.sum(np.where(c == 1, np.log(p_on), np.log(1 - p_on)))
            + stats.multivariate_normal(np.zeros(n), cov_y).logpdf(y)
        )
        cov = np.linalg.inv(np.eye(p) / prior_sd**2 + xc.T @ xc)
        means.append(cov @ xc.T @ y)
        covs.append(cov)
    w = np.exp(np.array(logw) - logsumexp(logw))
    return GatedPosterior(configs, w, np.array(means), np.array(covs))
