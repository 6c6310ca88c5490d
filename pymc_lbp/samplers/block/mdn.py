"""Mixture density network over a block of discrete variables, in pytensor (and a numpy twin).

:class:`MixtureDensityNetwork` maps an input vector ``u`` (the values of a conditioning set and
local parameters, see :mod:`pymc_lbp.samplers.block.neural_proposal`) to a mixture of ``K``
components, each a product of per-variable categorical tables over a block of ``D`` variables with
cardinalities ``cards``::

    q(y | u) = sum_k w_k(u) prod_i q_{k,i}(y_i | u)

The trunk is an MLP with two ELU hidden layers (Wang et al. 2018 use about 4-5 x
max(input, output) units and 4-16 components). Its output holds ``K`` mixture logits and, per
component, ``cards[i] - 1`` logits per variable (category 0 has logit 0, so a binary variable
costs one output). Every per-variable table is mixed with a uniform floor::

    q_{k,i}(c) = (1 - epsilon) softmax(logits_{k,i})_c + epsilon / cards[i]

so every configuration of the block has probability at least ``prod_i epsilon / cards[i]``. A
Metropolis-Hastings proposal needs that: the reverse move to the current state must have positive
probability even where the network has learned a (near-)deterministic conditional.

**Continuous block entries** (mixed blocks, Wang et al.'s Gaussian-mixture experiment): with
``n_continuous = C > 0`` every component also holds a Gaussian for each of ``C`` continuous
entries, ``N(m_{k,j}(u), s_{k,j}(u)^2)`` with ``s = sd_floor + softplus(raw)`` (the floor keeps
the density bounded, as the tables' epsilon keeps them positive), so

    q(y, v | u) = sum_k w_k prod_i q_{k,i}(y_i) prod_j N(v_j; m_{k,j}, s_{k,j}^2).

Their outputs come after the tables' (``K`` means then ``K`` raw scales per entry), so a network
without continuous entries has exactly the layout it always had.

Training maximises the mixture log-likelihood itself (not a per-variable surrogate) with
``pymc.variational.updates.adam``; the loss and the Adam updates are compiled once. The weights
are stored as float32 (so a saved and reloaded network is bit-identical); the numpy forward pass
(:meth:`MixtureDensityNetwork.mixture`, used on the sampler's hot path) computes in float64 and
agrees with the pytensor graph (:meth:`MixtureDensityNetwork.log_mixture_graph`) to rounding.

The module-level functions are in :mod:`pymc_lbp.samplers.block.mdn_functions`; the class is put
together from mixins: :mod:`pymc_lbp.samplers.block.mdn_graph` (the pytensor graph) and
:mod:`pymc_lbp.samplers.block.mdn_training` (``fit``, :class:`TrainingReport`). Every name this
module had stays importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pymc_lbp.samplers.block.mdn_functions import (
    _PAD_LOGIT,
    LAYER_NAMES,  # noqa: F401 (re-exported: neural_proposal imports it from here)
    _elu_np,
    _log_softmax_np,
    _positive_int,
    _softplus_np,
    gaussian_log_density,
    mixture_log_prob,
)
from pymc_lbp.samplers.block.mdn_graph import MixtureDensityGraph
from pymc_lbp.samplers.block.mdn_training import (
    _ACTIVATION_COPIES,
    _BYTES_PER_WEIGHT,
    MAX_TRAINING_BYTES,
    MixtureDensityTraining,
    TrainingReport,
)

__all__ = ["MixtureDensityNetwork", "TrainingReport", "gaussian_log_density", "mixture_log_prob"]


class MixtureDensityNetwork(MixtureDensityGraph, MixtureDensityTraining):
    """MLP (two ELU hidden layers) to a mixture of products of categoricals.

    Parameters
    ----------
    n_inputs : int
        Length of the input vector.
    cards : sequence of int
        Cardinality of every block variable (each >= 2).
    n_components : int, default 8
        Mixture components K.
    hidden : int, optional
        Units per hidden layer; default ``4 * max(n_inputs, n_outputs)``. A network whose
        training would hold more than ``MAX_TRAINING_BYTES`` (2 GiB) of float64 weights,
        gradients and Adam moments is refused (see :meth:`training_memory_bytes`); so is a
        ``fit`` minibatch that would.
    epsilon : float, default 1e-3
        Uniform floor mixed into every per-variable table (see the module docstring), in
        ``(0, 1)``.
    weights : dict of str to ndarray, optional
        Layer arrays ``W0, b0, W1, b1, W2, b2`` (float32); default: a random initialisation
        from ``seed``.
    seed : int, default 0
        Seed of the random initialisation.
    n_continuous : int, default 0
        Continuous block entries (after the discrete ones): each component holds a Gaussian
        for each (see the module docstring).
    sd_floor : float, default 0.01
        Smallest standard deviation of those Gaussians (> 0).
    """

    def __init__(
        self,
        n_inputs: int,
        cards: Sequence[int],
        n_components: int = 8,
        hidden: int | None = None,
        epsilon: float = 1e-3,
        weights: dict[str, np.ndarray] | None = None,
        seed: int = 0,
        n_continuous: int = 0,
        sd_floor: float = 0.01,
    ):
        cards = tuple(int(c) for c in cards)
        if not cards or min(cards) < 2:
            raise ValueError(f"cards must be a non-empty sequence of ints >= 2, got {cards}")
        n_inputs = _positive_int("n_inputs", n_inputs)
        n_components = _positive_int("n_components", n_components)
        if hidden is not None:
            hidden = _positive_int("hidden", hidden)
        if not 0.0 < float(epsilon) < 1.0:
            raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
        if isinstance(n_continuous, bool) or not isinstance(n_continuous, int | np.integer):
            raise ValueError(f"n_continuous must be an int >= 0, got {n_continuous!r}")
        if n_continuous < 0:
            raise ValueError(f"n_continuous must be an int >= 0, got {n_continuous!r}")
        if not (np.isfinite(sd_floor) and float(sd_floor) > 0):
            raise ValueError(f"sd_floor must be a positive finite number, got {sd_floor!r}")
        self.n_inputs = int(n_inputs)
        self.cards = cards
        self.n_components = int(n_components)
        self.epsilon = float(epsilon)
        self.n_continuous = int(n_continuous)
        self.sd_floor = float(sd_floor)
        self._n_table_outputs = self.n_components * (1 + sum(c - 1 for c in cards))
        self.n_outputs = self._n_table_outputs + 2 * self.n_components * self.n_continuous
        self.hidden = int(hidden) if hidden is not None else 4 * max(self.n_inputs, self.n_outputs)
        need = self.training_memory_bytes(0)
        if need > MAX_TRAINING_BYTES:
            raise ValueError(
                f"a mixture density network with {self.n_parameters} weights (hidden={self.hidden},"
                f" n_components={self.n_components}) is out of range: training it would hold about "
                f"{need / 2**30:.1f} GiB of float64 weights, gradients and Adam moments (limit "
                f"{MAX_TRAINING_BYTES / 2**30:.0f} GiB); use fewer hidden units or components"
            )
        self._index = self._logit_index()
        if weights is None:
            weights = self._init_weights(np.random.default_rng(seed))
        self.set_weights(weights)

    # ---------------------------------------------------------------- parameters
    @property
    def layer_shapes(self) -> dict[str, tuple[int, ...]]:
        """Expected shape of every layer array."""
        n, h, o = self.n_inputs, self.hidden, self.n_outputs
        return {"W0": (n, h), "b0": (h,), "W1": (h, h), "b1": (h,), "W2": (h, o), "b2": (o,)}

    @property
    def n_parameters(self) -> int:
        """Number of weights."""
        return int(sum(np.prod(s) for s in self.layer_shapes.values()))

    def training_memory_bytes(self, batch_size: int) -> int:
        """Estimated memory (bytes) of training with minibatches of ``batch_size`` rows.

        ``32 * n_parameters`` (float64 weights, gradients and Adam's two moments) plus
        ``6 * 8 * batch_size * (n_inputs + 2 * hidden + n_outputs + K * D * C)`` (each
        minibatch activation, the one-hot targets and the per-component tables in float64,
        forward and backward).
        """
        K, D, C = self.n_components, len(self.cards), max(self.cards)
        width = self.n_inputs + 2 * self.hidden + self.n_outputs + 2 * K * D * C
        width += 4 * K * self.n_continuous
        return _BYTES_PER_WEIGHT * self.n_parameters + (
            _ACTIVATION_COPIES * 8 * int(batch_size) * width
        )

    def _init_weights(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        shapes = self.layer_shapes
        out = {}
        for i, scale in zip(range(3), (1.0, 1.0, 0.1), strict=True):
            fan_in = shapes[f"W{i}"][0]
            out[f"W{i}"] = rng.normal(scale=scale / np.sqrt(fan_in), size=shapes[f"W{i}"])
            out[f"b{i}"] = np.zeros(shapes[f"b{i}"])
        return out

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Replace the weights (cast to float32), checking every layer's shape.

        Raises
        ------
        ValueError
            If a layer is missing, has the wrong shape or holds non-finite numbers.
        """
        new = {}
        for name, shape in self.layer_shapes.items():
            if name not in weights:
                raise ValueError(f"layer {name!r} is missing")
            arr = np.asarray(weights[name])
            if arr.shape != shape:
                raise ValueError(f"layer {name!r} has shape {arr.shape}, expected {shape}")
            arr = arr.astype(np.float32)
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"layer {name!r} holds non-finite numbers")
            new[name] = arr
        self.weights = new
        self._w64 = {k: v.astype(np.float64) for k, v in new.items()}
        self.version = getattr(self, "version", 0) + 1  # invalidates callers' caches

    def _logit_index(self) -> np.ndarray:
        """(D, C) positions into ``[0, per-variable logits..., pad]`` for every category."""
        C = max(self.cards)
        S = sum(c - 1 for c in self.cards)
        index = np.full((len(self.cards), C), S + 1, dtype=np.int64)
        start = 1
        for i, c in enumerate(self.cards):
            index[i, 0] = 0
            index[i, 1:c] = np.arange(start, start + c - 1)
            start += c - 1
        return index

    @property
    def _log_floor(self) -> np.ndarray:
        """``log(epsilon / cards[i])`` per variable, shape (D, 1)."""
        return np.log(self.epsilon / np.asarray(self.cards, dtype=float))[:, None]

    @property
    def _valid(self) -> np.ndarray:
        C = max(self.cards)
        return np.arange(C)[None, :] < np.asarray(self.cards)[:, None]

    # ---------------------------------------------------------------- numpy forward
    def mixture(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mixture at inputs ``u`` (numpy, float64).

        Parameters
        ----------
        u : ndarray, shape (n, n_inputs)

        Returns
        -------
        log_w : ndarray, shape (n, K)
            Normalised log mixture weights.
        log_tables : ndarray, shape (n, K, D, C)
            ``log q_{k,i}(c)`` with the epsilon floor; ``-inf`` for categories a variable does
            not have (``C = max(cards)``).
        """
        w = self._w64
        u = np.asarray(u, dtype=np.float64)
        if u.ndim != 2 or u.shape[1] != self.n_inputs:
            raise ValueError(f"inputs must have shape (n, {self.n_inputs}), got {u.shape}")
        return self.mixture_from_preactivation(u @ w["W0"] + w["b0"])

    def mixture_from_preactivation(self, a0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`mixture` given the first layer's pre-activation ``u @ W0 + b0`` (n, hidden).

        Lets callers precompute the part of ``u @ W0`` that does not change between calls.
        """
        return self._tables(self._outputs(a0))

    def _outputs(self, a0: np.ndarray) -> np.ndarray:
        w = self._w64
        h = _elu_np(a0)
        h = _elu_np(h @ w["W1"] + w["b1"])
        return h @ w["W2"] + w["b2"]

    def gaussians_from_preactivation(self, a0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(means, sds)`` of the continuous entries, each (n, K, C), given the first
        layer's pre-activation (see :meth:`mixture_from_preactivation`)."""
        return self._gaussians(self._outputs(a0))

    def full_mixture_from_preactivation(self, a0: np.ndarray):
        """``(log_w, log_tables, means, sds)`` from one forward pass."""
        out = self._outputs(a0)
        return (*self._tables(out), *self._gaussians(out))

    def _gaussians(self, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        K, C = self.n_components, self.n_continuous
        start = self._n_table_outputs
        means = out[:, start : start + K * C].reshape(-1, K, C)
        raw = out[:, start + K * C :].reshape(-1, K, C)
        return means, self.sd_floor + _softplus_np(raw)

    def _tables(self, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        K = self.n_components
        log_w = _log_softmax_np(out[:, :K])
        logits = out[:, K : self._n_table_outputs].reshape(out.shape[0], K, -1)
        pad = np.zeros(logits.shape[:-1] + (1,))
        full = np.concatenate([pad, logits, pad + _PAD_LOGIT], axis=-1)[..., self._index]
        log_sm = _log_softmax_np(full)
        log_tables = np.logaddexp(np.log1p(-self.epsilon) + log_sm, self._log_floor)
        return log_w, np.where(self._valid, log_tables, -np.inf)

    def log_prob(self, u: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``log q(y | u)`` for rows of inputs ``u`` and block values ``y`` (shape (n, D + C):
        the discrete entries, then the continuous ones)."""
        u = np.asarray(u, dtype=np.float64)
        a0 = u @ self._w64["W0"] + self._w64["b0"]
        y = np.asarray(y)
        D = len(self.cards)
        if not self.n_continuous:
            return mixture_log_prob(*self.mixture_from_preactivation(a0), y)
        log_w, log_tables, means, sds = self.full_mixture_from_preactivation(a0)
        return mixture_log_prob(log_w, log_tables, y[:, :D], (means, sds), y[:, D:])
