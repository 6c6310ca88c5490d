"""Small networks, as pure functions of a flat parameter vector (numpy and pytensor twins).

:class:`ScalarMLP` is the one-hidden-layer scalar-to-scalar network that the LSB2 balancing
function is built from (:mod:`pymc_lbp.samplers.self_balancing.parametrizations`). Each network here
keeps its parameters in one flat float64 vector, so that an optimiser state is a handful of plain
arrays (easy to pickle and to round-trip through a step's ``sampling_state``), and has a numpy
forward pass (used on the sampler's hot path) and a pytensor forward pass (used for autodiff while
learning) that compute the same function.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable


def _softplus_np(z: np.ndarray) -> np.ndarray:
    """``log(1 + e^z)`` without overflow."""
    return np.logaddexp(0.0, z)


class ScalarMLP:
    """A scalar-to-scalar MLP with one softplus hidden layer and a zero-initialised output layer.

    ``m(u) = sum_k v_k softplus(w_k u + b_k)`` for an input ``u`` (any shape; applied
    elementwise). The flat parameter vector is ``[w (H), b (H), v (H)]``. There is no output bias:
    the LSB2 balancing function built on ``m`` is invariant to it.

    Softplus hidden units let ``m`` grow linearly in ``|u|`` with any slope on each side, so the
    network can represent the tails of all four standard balancing functions.

    Parameters
    ----------
    hidden : int, default 10
        Number of hidden units H.
    """

    def __init__(self, hidden: int = 10):
        if isinstance(hidden, bool) or not isinstance(hidden, int | np.integer) or hidden < 1:
            raise ValueError(f"hidden must be a positive int, got {hidden!r}")
        self.hidden = int(hidden)

    @property
    def n_params(self) -> int:
        """Length of the flat parameter vector (``3 H``)."""
        return 3 * self.hidden

    def split(self, params):
        """``(w, b, v)`` views of a flat parameter vector (numpy array or pytensor vector)."""
        H = self.hidden
        return params[:H], params[H : 2 * H], params[2 * H : 3 * H]

    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        """Random hidden layer (``w, b ~ N(0, 1)``), zero output weights: ``m == 0`` at init."""
        H = self.hidden
        return np.concatenate([rng.normal(size=H), rng.normal(size=H), np.zeros(H)])

    def numpy(self, params: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``m(u)`` elementwise, in numpy."""
        w, b, v = self.split(np.asarray(params, dtype=float))
        u = np.asarray(u, dtype=float)
        hid = _softplus_np(u[..., None] * w + b)
        return hid @ v

    def pytensor(self, params: Variable, u: Variable) -> Variable:
        """``m(u)`` elementwise, as a pytensor graph of a flat parameter vector."""
        w, b, v = self.split(params)
        hid = pt.softplus(pt.shape_padright(u, 1) * w + b)
        return pt.tensordot(hid, v, axes=[[-1], [0]])


__all__ = ["ScalarMLP"]
