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
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.variational.updates import adam

from pymc_lbp.logp.graphs import dim
from pymc_lbp.samplers.block.reference import logsumexp

__all__ = [
    "LAYER_NAMES",
    "MAX_TRAINING_BYTES",
    "MixtureDensityNetwork",
    "TrainingReport",
    "gaussian_log_density",
    "mixture_log_prob",
]


LAYER_NAMES = ("W0", "b0", "W1", "b1", "W2", "b2")


def positive_int(name: str, value) -> int:
    """``value`` as an int, or a ``ValueError`` naming the option when it is not a positive int."""
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
    return logsumexp(comp, -1)[:, 0]


def _log_softmax_graph(z):
    """Log-softmax over the last axis, max-shifted: the arithmetic of ``_log_softmax_np``.
    Written out rather than ``pt.special.log_softmax``: PyTensor's numba backend compiles its
    LogSoftmax op on each first use (a network under ``compile_kwargs={"mode": "NUMBA"}``) far
    more slowly than these elementwise ops and reductions (docs/test_suite.md)."""
    shifted = z - pt.max(z, axis=-1, keepdims=True)
    return shifted - pt.log(pt.sum(pt.exp(shifted), axis=-1, keepdims=True))


MAX_TRAINING_BYTES = 2**31
"""Largest memory estimate (2 GiB) accepted for a network's training (see
:meth:`MixtureDensityNetwork.training_memory_bytes`): sizes above it are refused at construction
(weights) or when ``fit`` is called (minibatch)."""


@dataclass
class TrainingReport:
    """What a training run did.

    Attributes
    ----------
    losses : ndarray
        Mean negative log-likelihood (nats per sample) of every minibatch.
    seconds : float
        Wall time of the optimisation loop (compilation included).
    steps, batch_size : int
    learning_rate : float
    seed : int
    """

    losses: np.ndarray
    seconds: float
    steps: int
    batch_size: int
    learning_rate: float
    seed: int

    def as_dict(self) -> dict:
        """JSON-friendly summary (no per-step losses)."""
        tail = self.losses[-max(1, len(self.losses) // 20) :]
        return {
            "steps": self.steps,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "seed": self.seed,
            "seconds": round(self.seconds, 1),
            "final_loss": float(np.mean(tail)) if len(tail) else None,
        }


class MixtureDensityNetwork:
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
        n_inputs = positive_int("n_inputs", n_inputs)
        n_components = positive_int("n_components", n_components)
        if hidden is not None:
            hidden = positive_int("hidden", hidden)
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

        ``32 * n_parameters`` (every weight four times in float64: value, gradient and Adam's
        two moments) plus ``6 * 8 * batch_size * (n_inputs + 2 * hidden + n_outputs + 2 K D C
        + 4 K n_continuous)`` (six float64 copies of each minibatch activation, the one-hot
        targets and the per-component tables: forward values, ELU intermediates and their
        gradients).
        """
        K, D, C = self.n_components, len(self.cards), max(self.cards)
        width = self.n_inputs + 2 * self.hidden + self.n_outputs + 2 * K * D * C
        width += 4 * K * self.n_continuous
        return 32 * self.n_parameters + 6 * 8 * int(batch_size) * width

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
        return means, self.sd_floor + np.logaddexp(0.0, raw)  # softplus

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

    # ---------------------------------------------------------------- training
    def fit(
        self,
        batches: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]
        | tuple[np.ndarray, np.ndarray],
        *,
        steps: int = 1000,
        batch_size: int = 256,
        learning_rate: float = 1e-3,
        final_learning_rate: float | None = None,
        seed: int = 0,
        progressbar: bool = True,
        report_every: int | None = None,
    ) -> TrainingReport:
        """Maximum-likelihood training with Adam (``pymc.variational.updates.adam``).

        Parameters
        ----------
        batches : callable or (inputs, targets)
            Either ``batches(rng, batch_size) -> (u, y)`` drawing a fresh minibatch (infinite
            data, e.g. forward samples), or fixed arrays ``(u, y)`` from which minibatches are
            drawn with replacement. ``y`` holds the discrete block values, then the continuous
            ones (float rows when the network has continuous entries).
        steps : int
            Optimisation steps.
        batch_size : int
        learning_rate : float
            Adam step size at the start.
        final_learning_rate : float, optional
            If given, the step size decays geometrically to this value at the last step.
        seed : int
            Seeds the minibatch draws (the initial weights are the network's current ones), so
            the same seed and start give the same trained weights.
        progressbar : bool
            Show progress (steps done, running loss, elapsed time) on stderr.
        report_every : int, optional
            Progress update period in steps (default: about 100 updates per run).

        Returns
        -------
        TrainingReport
            The per-step losses; the network holds the trained weights (rounded to float32).
        """
        steps = positive_int("steps", steps)
        batch_size = positive_int("batch_size", batch_size)
        for name, value in (
            ("learning_rate", learning_rate),
            ("final_learning_rate", final_learning_rate),
        ):
            if value is not None and not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        need = self.training_memory_bytes(batch_size)
        if need > MAX_TRAINING_BYTES:
            raise ValueError(
                f"batch_size={batch_size} is out of range for this network: training would need "
                f"about {need / 2**30:.1f} GiB (limit {MAX_TRAINING_BYTES / 2**30:.0f} GiB, see "
                "MixtureDensityNetwork.training_memory_bytes); use a smaller batch_size"
            )
        rng = np.random.default_rng(seed)
        if callable(batches):
            draw = batches
        else:
            u_all, y_all = (np.asarray(a) for a in batches)
            if u_all.shape[0] != y_all.shape[0]:
                raise ValueError("inputs and targets need the same number of rows")

            def draw(r, n):
                idx = r.integers(0, u_all.shape[0], size=n)
                return u_all[idx], y_all[idx]

        start = time.perf_counter()
        # the training graph is float64 whatever pytensor.config.floatX is (PyMC's adam makes
        # its step counter with floatX): the trained weights do not depend on the user's floatX
        with pytensor.config.change_flags(floatX="float64"):
            shared = {
                k: pytensor.shared(v.astype(np.float64), name=k) for k, v in self.weights.items()
            }
            lr = pytensor.shared(np.float64(learning_rate), name="learning_rate")
            u = pt.matrix("u", dtype="float64")
            oh = pt.tensor3("onehot_y", dtype="float64")
            v = pt.matrix("v", dtype="float64")
            loss = -pt.mean(self.log_mixture_graph(shared, u, oh, v))
            params = [shared[k] for k in LAYER_NAMES]
            updates = adam(loss, params, learning_rate=lr)
            train = pytensor.function([u, oh, v], loss, updates=updates, on_unused_input="ignore")
        decay = 1.0
        if final_learning_rate is not None and steps > 1:
            decay = (final_learning_rate / learning_rate) ** (1.0 / (steps - 1))
        losses = np.empty(int(steps))
        tty = sys.stderr.isatty()
        every = report_every or max(1, steps // (100 if tty else 10))
        for t in range(int(steps)):
            ub, yb = draw(rng, batch_size)
            losses[t] = float(
                train(np.asarray(ub, dtype=np.float64), self.onehot(yb), self.continuous(yb))
            )
            lr.set_value(np.float64(learning_rate * decay ** (t + 1)))
            if progressbar and ((t + 1) % every == 0 or t + 1 == steps):
                recent = losses[max(0, t + 1 - every) : t + 1].mean()
                elapsed = time.perf_counter() - start
                line = f"training: step {t + 1}/{steps}  loss {recent:.4f}  {elapsed:.0f}s"
                sys.stderr.write("\r" + line if tty else line + "\n")
                sys.stderr.flush()
        if progressbar and tty:
            sys.stderr.write("\n")
        self.set_weights({k: s.get_value() for k, s in shared.items()})
        return TrainingReport(
            losses, time.perf_counter() - start, int(steps), int(batch_size), learning_rate, seed
        )
