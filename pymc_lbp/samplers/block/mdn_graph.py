"""The mixture density network as a pytensor graph: the mixture log-likelihood and its pieces.

:class:`MixtureDensityGraph` is a mixin of
:class:`pymc_lbp.samplers.block.mdn.MixtureDensityNetwork` holding the graph twins of its numpy
forward pass: :meth:`~MixtureDensityGraph.log_mixture_graph` (the training loss of
:mod:`pymc_lbp.samplers.block.mdn_training`),
:meth:`~MixtureDensityGraph.mixture_graph_from_preactivation` (used by the compiled sweep and
random scan, :mod:`pymc_lbp.samplers.block.sweep_graph`,
:mod:`pymc_lbp.samplers.block.random_scan_graph`), with the continuous entries' Gaussians
:meth:`~MixtureDensityGraph.full_mixture_graph_from_preactivation` (NeuralMixedBlock's pair
update, :mod:`pymc_lbp.samplers.block.flag_value_graph`), the one-hot encoding and
:meth:`~MixtureDensityGraph.compile_log_prob` (for checks).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytensor
import pytensor.tensor as pt

from pymc_lbp.logp.graphs import dim
from pymc_lbp.samplers.block.mdn_functions import _PAD_LOGIT, _elu_graph

__all__ = ["MixtureDensityGraph"]


def _log_softmax_graph(z):
    """Log-softmax over the last axis, max-shifted: the arithmetic of ``_log_softmax_np``.
    Written out rather than ``pt.special.log_softmax``: PyTensor's numba backend compiles its
    LogSoftmax op on each first use (a network under ``compile_kwargs={"mode": "NUMBA"}``) far
    more slowly than these elementwise ops and reductions (docs/test_suite.md)."""
    shifted = z - pt.max(z, axis=-1, keepdims=True)
    return shifted - pt.log(pt.sum(pt.exp(shifted), axis=-1, keepdims=True))


class MixtureDensityGraph:
    """The pytensor graph of :class:`~pymc_lbp.samplers.block.mdn.MixtureDensityNetwork` (a
    mixin: it uses the network's sizes, epsilon floor and weights)."""

    # ---------------------------------------------------------------- pytensor graph
    def _outputs_graph(self, a0, layers: dict):
        """The network's outputs from the first layer's pre-activation (graph)."""
        h = _elu_graph(a0)
        h = _elu_graph(pt.dot(h, layers["W1"]) + layers["b1"])
        return pt.dot(h, layers["W2"]) + layers["b2"]

    def _tables_graph(self, out):
        """``(log_w, log_tables)`` from the outputs (graph); a category a variable does not have
        keeps its floor value here (the training graph multiplies by one-hot values)."""
        K = self.n_components
        log_w = _log_softmax_graph(out[:, :K])
        n = dim(out, 0)
        logits = out[:, K : self._n_table_outputs].reshape((n, K, -1))
        zeros = pt.zeros((n, K, 1))
        full = pt.concatenate([zeros, logits, zeros + _PAD_LOGIT], axis=-1)[:, :, self._index]
        log_sm = _log_softmax_graph(full)
        return log_w, pt.logaddexp(np.log1p(-self.epsilon) + log_sm, self._log_floor)

    def mixture_graph_from_preactivation(self, a0, layers: dict):
        """:meth:`mixture_from_preactivation` as a graph (the same arithmetic): ``(log_w (n, K),
        log_tables (n, K, D, C))`` from the first layer's pre-activation ``a0 (n, hidden)`` and
        tensors of the other layers (``W1, b1, W2, b2``)."""
        log_w, log_tables = self._tables_graph(self._outputs_graph(a0, layers))
        return log_w, pt.switch(self._valid, log_tables, -np.inf)

    def _gaussians_graph(self, out):
        """``(means, sds)``, each ``(n, K, n_continuous)``, from the outputs (graph)."""
        K, C, start = self.n_components, self.n_continuous, self._n_table_outputs
        n = dim(out, 0)
        means = out[:, start : start + K * C].reshape((n, K, C))
        sds = self.sd_floor + pt.softplus(out[:, start + K * C :].reshape((n, K, C)))
        return means, sds

    def full_mixture_graph_from_preactivation(self, a0, layers: dict):
        """:meth:`full_mixture_from_preactivation` as a graph: ``(log_w, log_tables, means,
        sds)`` from one forward pass (a network with continuous entries)."""
        out = self._outputs_graph(a0, layers)
        log_w, log_tables = self._tables_graph(out)
        return log_w, pt.switch(self._valid, log_tables, -np.inf), *self._gaussians_graph(out)

    def log_mixture_graph(self, params: dict, u, onehot_y, v=None):
        """Mixture log-likelihood as a pytensor graph.

        Parameters
        ----------
        params : dict of str to tensor
            Layer tensors (``W0 .. b2``), e.g. shared variables.
        u : tensor, shape (n, n_inputs)
        onehot_y : tensor, shape (n, D, C)
            One-hot block values.
        v : tensor, shape (n, n_continuous), optional
            Values of the continuous entries (required when the network has them).

        Returns
        -------
        tensor, shape (n,)
            ``log q(y | u)``.
        """
        out = self._outputs_graph(pt.dot(u, params["W0"]) + params["b0"], params)
        log_w, log_tables = self._tables_graph(out)
        picked = pt.sum(log_tables * onehot_y[:, None, :, :], axis=(-1, -2))  # (n, K)
        if self.n_continuous:
            means, sds = self._gaussians_graph(out)
            z = (v[:, None, :] - means) / sds
            picked = picked + pt.sum(-0.5 * z**2 - pt.log(sds) - 0.5 * np.log(2 * np.pi), axis=-1)
        return pt.logsumexp(log_w + picked, axis=-1)

    def onehot(self, y: np.ndarray) -> np.ndarray:
        """One-hot encoding (n, D, C) of the discrete block values (the first D columns of
        ``y``)."""
        y = np.asarray(y)[..., : len(self.cards)].astype(np.int64)
        C = max(self.cards)
        return (y[..., None] == np.arange(C)).astype(np.float64)

    def continuous(self, y: np.ndarray) -> np.ndarray:
        """The continuous entries of block values ``y`` (its last ``n_continuous`` columns)."""
        y = np.asarray(y, dtype=np.float64)
        return y[..., len(self.cards) :].reshape(y.shape[0], self.n_continuous)

    def compile_log_prob(self) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """``f(u, y) -> log q(y | u)`` compiled from the pytensor graph (for checks)."""
        with pytensor.config.change_flags(floatX="float64"):
            u = pt.matrix("u", dtype="float64")
            oh = pt.tensor3("onehot_y", dtype="float64")
            v = pt.matrix("v", dtype="float64")
            params = {k: pt.as_tensor_variable(w) for k, w in self._w64.items()}
            fn = pytensor.function(
                [u, oh, v], self.log_mixture_graph(params, u, oh, v), on_unused_input="ignore"
            )
        return lambda uu, yy: fn(
            np.asarray(uu, dtype=np.float64), self.onehot(yy), self.continuous(yy)
        )
