"""Training of the mixture density network: the memory limit, the report and ``fit``.

:class:`MixtureDensityTraining` is a mixin of
:class:`pymc_lbp.samplers.block.mdn.MixtureDensityNetwork` holding
:meth:`~MixtureDensityTraining.fit` (maximum likelihood with ``pymc.variational.updates.adam``,
the loss and the updates compiled once, in float64); :class:`TrainingReport` is what a run
returns, and :data:`MAX_TRAINING_BYTES` the largest training memory a network may need (both
importable from :mod:`pymc_lbp.samplers.block.mdn`). Used through
:meth:`pymc_lbp.samplers.block.neural_proposal.NeuralProposal.fit` and the proposal training
scripts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.variational.updates import adam

from pymc_lbp.samplers.block.mdn_functions import LAYER_NAMES, _positive_int

__all__ = ["MAX_TRAINING_BYTES", "MixtureDensityTraining", "TrainingReport"]

MAX_TRAINING_BYTES = 2**31
"""Largest memory estimate (2 GiB) accepted for a network's training (see
:meth:`MixtureDensityNetwork.training_memory_bytes`): sizes above it are refused at construction
(weights) or when ``fit`` is called (minibatch)."""

_BYTES_PER_WEIGHT = 32
"""Training holds every weight four times in float64: value, gradient and Adam's two moments."""

_ACTIVATION_COPIES = 6
"""float64 copies of each minibatch activation in the training graph (forward values, ELU
intermediates and their gradients)."""


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


class MixtureDensityTraining:
    """Training of :class:`~pymc_lbp.samplers.block.mdn.MixtureDensityNetwork` (a mixin: it
    uses the network's weights, sizes and :meth:`log_mixture_graph`)."""

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
        steps = _positive_int("steps", steps)
        batch_size = _positive_int("batch_size", batch_size)
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
