"""The mixture density network's module-level functions and constants.

The layer names, the positive-int check of the network's sizes, the activations and
log-softmax in numpy (the hot-path forward pass) and in pytensor, and the mixture
log-probability of block values (:func:`mixture_log_prob`, :func:`gaussian_log_density`). Used
by :mod:`pymc_lbp.samplers.block.mdn` (:class:`~pymc_lbp.samplers.block.mdn.MixtureDensityNetwork`)
and its mixins :mod:`pymc_lbp.samplers.block.mdn_graph` and
:mod:`pymc_lbp.samplers.block.mdn_training`; the public names are importable from
:mod:`pymc_lbp.samplers.block.mdn`.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

__all__ = ["LAYER_NAMES", "gaussian_log_density", "mixture_log_prob"]

LAYER_NAMES = ("W0", "b0", "W1", "b1", "W2", "b2")


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


_PAD_LOGIT = -1e4  # logit of a category a variable does not have (exp underflows to 0)


def _elu_np(z: np.ndarray) -> np.ndarray:
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0.0)))


def _elu_graph(z):
    return pt.switch(z > 0, z, pt.expm1(pt.minimum(z, 0.0)))


def _log_softmax_np(z: np.ndarray, axis: int = -1) -> np.ndarray:
    top = np.max(z, axis=axis, keepdims=True)
    shifted = z - top
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _softplus_np(z: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, z)


def gaussian_log_density(v: np.ndarray, means: np.ndarray, sds: np.ndarray) -> np.ndarray:
    """``sum_j log N(v_j; m_{k,j}, s_{k,j}^2)`` per component: ``v`` (n, C), ``means`` and
    ``sds`` (n, K, C); shape (n, K)."""
    z = (np.asarray(v, dtype=np.float64)[:, None, :] - means) / sds
    return np.sum(-0.5 * z**2 - np.log(sds) - 0.5 * np.log(2 * np.pi), axis=-1)


def mixture_log_prob(
    log_w: np.ndarray,
    log_tables: np.ndarray,
    y: np.ndarray,
    gaussians: tuple[np.ndarray, np.ndarray] | None = None,
    v: np.ndarray | None = None,
) -> np.ndarray:
    """Log-probability of block values under mixtures of products of categoricals.

    Parameters
    ----------
    log_w : ndarray, shape (n, K)
        Normalised log mixture weights.
    log_tables : ndarray, shape (n, K, D, C)
        ``log q_{k,i}(c)``; categories a variable does not have are ``-inf``.
    y : ndarray of int, shape (n, D)
        Block values.
    gaussians : (means, sds), each of shape (n, K, C), optional
        The components' Gaussians of the continuous entries.
    v : ndarray, shape (n, C), optional
        Values of the continuous entries (with ``gaussians``).

    Returns
    -------
    ndarray, shape (n,)
        ``log sum_k w_k prod_i q_{k,i}(y_i) prod_j N(v_j; m_{k,j}, s_{k,j}^2)``.
    """
    y = np.asarray(y, dtype=np.int64)
    n, K, D, _ = log_tables.shape
    picked = np.take_along_axis(
        log_tables, np.broadcast_to(y[:, None, :, None], (n, K, D, 1)), axis=-1
    )[..., 0]
    comp = log_w + picked.sum(axis=-1)
    if gaussians is not None:
        comp = comp + gaussian_log_density(v, *gaussians)
    top = np.max(comp, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return (top + np.log(np.sum(np.exp(comp - top), axis=-1, keepdims=True)))[:, 0]
