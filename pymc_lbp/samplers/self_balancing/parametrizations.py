"""Learned balancing functions (Sansone 2022, LSB) and their mutual-information objective.

Pure functions and small stateless classes; the step :class:`~pymc_lbp.SelfBalancing` is a thin
shell around them. Everything works in log space, as in :mod:`pymc_lbp.samplers.balancing`: a
balancing function is represented by ``d -> log g(e^d)`` for log-ratios ``d = log pi(y) - log
pi(x)``, and
``g(t) = t g(1/t)`` reads ``log g(e^d) - log g(e^-d) = d``. Every function ``log g`` with
``log g(e^d) = d / 2 + e(d)`` and ``e`` even is balanced, and every balanced ``g`` has this form.

Parametrizations
----------------
``"lsb1"`` (:class:`MixtureBalancing`)
    ``g = sum_k softmax(theta)_k g_k`` over the four standard functions (sqrt, Barker, min, max),
    ``theta`` in R^4 (starts at 0: equal weights). A convex combination of balanced functions is
    balanced.
``"lsb2"`` (:class:`NeuralBalancing`, ``form="sum"``)
    ``g(t) = (h(t) + t h(1/t)) / 2`` with ``h(t) = sqrt(t) exp(m(log t))`` positive and ``m`` a
    one-hidden-layer softplus MLP (:class:`pymc_lbp.samplers.self_balancing.nets.ScalarMLP`). In log
    space ``log g(e^d) = d / 2 + logaddexp(m(d), m(-d)) - log 2``: balanced and positive for any
    parameters. ``m == 0`` at initialisation, so the untuned function is exactly ``sqrt``.
``"lsb2_min"`` (:class:`NeuralBalancing`, ``form="min"``)
    The variant of the paper's first version, ``g(t) = min{h(t), t h(1/t)}``, i.e.
    ``log g(e^d) = d / 2 + min(m(d), m(-d))``. Its even part falls as soon as one branch of the
    network falls, so light (Barker/min-like, ``g ~ t``) tails at ``t -> 0`` are easier to reach
    than with the sum form, whose ``logaddexp`` needs both branches to fall: near-impossible
    neighbours of near-deterministic targets then get almost no proposal mass.

The objective (see :func:`lsb_objective`)
-----------------------------------------
The mutual information between consecutive states of the stationary chain is
``I = E_{x~pi} KL(T(.|x) || pi)``. Split ``T(.|x)`` into the moves ``A_j(x) = Q(j|x) alpha_j(x)``
to the neighbours ``y_j`` and the rejection mass ``R(x) = 1 - sum_j A_j(x)``; subtracting the
parameter-free ``E log pi(x)`` leaves, per state,

    L(x) = sum_j A_j (log A_j - Delta_j) + R log R,     Delta_j = log pi(y_j) - log pi(x).

The sum over neighbours is estimated from one draw ``j ~ Q_sg(.|x)`` (the proposal with the
current parameters, treated as a constant) with the importance weight ``rho = A_j / Q_sg(j|x)``
(its value is the acceptance probability; its gradient is that of ``A_j``). ``R log R`` is not
linear in ``R``; as in the paper a variational scalar ``eta`` linearises it,
``R log R = max_eta [R (1 + log eta) - eta]``, and ``R`` is estimated by ``1 - rho`` from the
same draw (exact: ``E_j[rho] = sum_j A_j``; the paper draws a separate uniform neighbour, which
needs another evaluation and has a much larger variance). The maximising ``eta`` for a batch is
the batch's estimated rejection mass, which is used in closed form (held constant for the
gradient) instead of being chased by gradient ascent. The batch estimate of the loss is then

    L_hat = sum_i w_i rho_i (log A_i - Delta_i) + R_bar log R_bar,   R_bar = sum_i w_i (1 - rho_i),

whose gradient is ``sum_i w_i grad(A_i) / Q_sg,i (log A_i - Delta_i - log R_bar)``: unbiased for
the first term and consistent for the second. ``w_i`` are the particles' weights (uniform, or
proportional to ``pi`` over the batch as in the paper's code).

Numerical guards
----------------
* Log space throughout; proposal normalisers by ``logsumexp`` (max-shifted).
* ``-inf`` differences (masked slots, zero-probability neighbours) get ``log g = -inf`` (weight 0)
  explicitly, for every parametrization (``max(1, t)`` at ``t = 0`` would otherwise give them
  weight 1), and are replaced by 0 before entering any function so that no ``inf - inf`` or NaN
  reaches a gradient.
* The LSB2 network only sees grid points in ``[-D_CLIP, D_CLIP]``; the ``d / 2`` term is not
  clipped, so the function stays exactly balanced.
* ``rho = exp(log alpha) <= 1`` cannot overflow; ``R_bar`` is clipped to ``[1e-12, 1]`` before
  its log.
* Transitions to states of zero probability (possible with first-order differences) or without a
  possible reverse move have ``A = 0``; they enter with weight 0 and placeholder inputs.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import disconnected_grad
from pytensor.graph.basic import Variable

from pymc_lbp.samplers.self_balancing.nets import ScalarMLP

BASE_FUNCTIONS: tuple[str, ...] = ("sqrt", "barker", "min", "max")
"""The base functions of LSB1, in the order of ``theta``."""

PARAMETRIZATIONS: tuple[str, ...] = ("lsb1", "lsb2", "lsb2_min")
"""Accepted values of ``parametrization``."""

D_CLIP = 30.0
"""LSB2: the even part of ``log g`` is constant for ``|d| >= D_CLIP``."""

GRID_DENSITY = 16
"""LSB2: grid points per unit of ``|d|`` at which the network is evaluated (then interpolated)."""

R_FLOOR = 1e-12
"""Floor of the estimated rejection mass before its log (the variational ``eta``)."""


class BalancingParametrization:
    """A family of balancing functions ``log g(e^d; params)`` (base class).

    Attributes
    ----------
    name : str
        ``"lsb1"``, ``"lsb2"`` or ``"lsb2_min"``.
    n_params : int
        Length of the flat parameter vector.
    """

    name = ""
    n_params = 0

    def initial_params(self, rng: np.random.Generator) -> np.ndarray:
        """The untuned parameter vector."""
        raise NotImplementedError

    def _log_g_np(self, d: np.ndarray, params: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _log_g_pt(self, d: Variable, params: Variable) -> Variable:
        raise NotImplementedError

    def log_g(self, d: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``log g(e^d)`` elementwise in numpy; ``-inf`` (and NaN) ``d`` give ``-inf``."""
        d = np.asarray(d, dtype=float)
        ok = np.isfinite(d)
        if ok.all():
            return self._log_g_np(d, params)
        out = np.full(d.shape, -np.inf)
        out[ok] = self._log_g_np(d[ok], params)
        return out

    def log_g_pt(self, d: Variable, params: Variable) -> Variable:
        """``log g(e^d)`` elementwise as a pytensor graph, with non-finite ``d`` masked to -inf."""
        ok = ~(pt.isinf(d) | pt.isnan(d))
        safe = pt.switch(ok, d, 0.0)
        return pt.switch(ok, self._log_g_pt(safe, params), -np.inf)

    def describe(self, params: np.ndarray) -> dict[str, float]:
        """Scalar summaries of the parameters, reported as sampler stats (default: none)."""
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class MixtureBalancing(BalancingParametrization):
    """LSB1: ``g = sum_k softmax(theta)_k g_k`` over (sqrt, Barker, min, max).

    ``theta`` starts at zero (equal weights); the weights are ``softmax(theta)``.
    """

    name = "lsb1"
    n_params = len(BASE_FUNCTIONS)

    def initial_params(self, rng: np.random.Generator | None = None) -> np.ndarray:
        return np.zeros(self.n_params)

    @staticmethod
    def log_weights(params: np.ndarray) -> np.ndarray:
        """``log softmax(theta)``."""
        params = np.asarray(params, dtype=float)
        top = np.max(params)
        return params - (top + np.log(np.sum(np.exp(params - top))))

    def weights(self, params: np.ndarray) -> np.ndarray:
        """The mixture weights ``softmax(theta)``, in the order of :data:`BASE_FUNCTIONS`."""
        return np.exp(self.log_weights(params))

    @staticmethod
    def _mixture(d, w, lib):
        # log g(e^d) = d / 2 + e(|d|); for u = |d| and z = exp(-u / 2),
        # g(e^u) e^-u = w_max + w_sqrt z + w_barker z^2 / (1 + z^2) + w_min z^2, so
        # e(u) = u / 2 + log(that): one exp, no overflow, exact (not an approximation).
        u = lib.abs(d)
        z = lib.exp(-0.5 * u)
        z2 = z * z
        poly = w[3] + w[0] * z + w[1] * z2 / (1.0 + z2) + w[2] * z2
        return 0.5 * d + 0.5 * u + lib.log(poly)

    def _log_g_np(self, d, params):
        params = np.asarray(params, dtype=float)
        key = params.tobytes()
        cached = getattr(self, "_weights_cache", None)
        if cached is None or cached[0] != key:
            cached = (key, self.weights(params))
            self._weights_cache = cached
        return self._mixture(d, cached[1], np)

    def _log_g_pt(self, d, params):
        return self._mixture(d, pt.special.softmax(params), pt)

    def describe(self, params):
        weights = self.weights(params)
        return {f"lsb_weight_{k}": float(w) for k, w in zip(BASE_FUNCTIONS, weights, strict=True)}


class NeuralBalancing(BalancingParametrization):
    """LSB2: ``g(t) = (h(t) + t h(1/t)) / 2`` (or ``min{h(t), t h(1/t)}``), ``h`` a positive MLP.

    ``log h(e^d) = d / 2 + m(d)`` with ``m`` a
    :class:`~pymc_lbp.samplers.self_balancing.nets.ScalarMLP` whose output weights start at zero, so
    the untuned function is ``sqrt``. Then ``log g(e^d) = d / 2 + e(|d|)`` with the even part ``e(u)
    = logaddexp(m(u), m(-u)) - log 2`` (sum form) or ``min(m(u), m(-u))`` (min form).

    The even part is evaluated by the network on the grid ``u_k = k / GRID_DENSITY`` of
    ``[0, D_CLIP]`` and linearly interpolated in ``|d|`` (constant beyond ``D_CLIP``); that
    interpolant *is* the balancing function used by the sampler and by the objective (numpy and
    pytensor agree). It is exactly balanced and positive for any parameters, and the network runs
    on the grid's few hundred points instead of on every neighbour of every particle.

    Parameters
    ----------
    hidden : int, default 10
        Hidden units of the MLP.
    form : {"sum", "min"}, default "sum"
        ``"sum"``: ``g = (h(t) + t h(1/t)) / 2`` (``"lsb2"``); ``"min"``:
        ``g = min{h(t), t h(1/t)}`` (``"lsb2_min"``).
    """

    def __init__(self, hidden: int = 10, form: str = "sum"):
        if form not in ("sum", "min"):
            raise ValueError(f"form must be 'sum' or 'min', got {form!r}")
        self.mlp = ScalarMLP(hidden)
        self.form = form
        self.name = "lsb2" if form == "sum" else "lsb2_min"
        self.n_params = self.mlp.n_params
        self.grid = np.arange(int(D_CLIP * GRID_DENSITY) + 1) / GRID_DENSITY

    def initial_params(self, rng: np.random.Generator) -> np.ndarray:
        return self.mlp.init_params(rng)

    def _even(self, m_pos, m_neg, lib):
        if self.form == "sum":
            return lib.logaddexp(m_pos, m_neg) - np.log(2.0)
        return lib.minimum(m_pos, m_neg)

    def even_part(self, params: np.ndarray) -> np.ndarray:
        """``e(u_k)`` on the grid (numpy; cached for the last parameter vector)."""
        params = np.asarray(params, dtype=float)
        key = params.tobytes()
        cached = getattr(self, "_table_cache", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        table = self._even(
            self.mlp.numpy(params, self.grid), self.mlp.numpy(params, -self.grid), np
        )
        self._table_cache = (key, table)
        return table

    def _log_g_np(self, d, params):
        table = self.even_part(params)
        pos = np.minimum(np.abs(d), D_CLIP) * GRID_DENSITY
        idx = np.minimum(pos.astype(np.int64), self.grid.size - 2)
        frac = pos - idx
        return 0.5 * d + (1.0 - frac) * table[idx] + frac * table[idx + 1]

    def _log_g_pt(self, d, params):
        grid = pt.constant(self.grid)
        table = self._even(self.mlp.pytensor(params, grid), self.mlp.pytensor(params, -grid), pt)
        pos = pt.clip(pt.abs(d), 0.0, D_CLIP) * GRID_DENSITY
        idx = pt.clip(pt.floor(pos), 0, self.grid.size - 2).astype("int64")
        frac = pos - idx
        return 0.5 * d + (1.0 - frac) * table[idx] + frac * table[idx + 1]


def make_parametrization(name: str, hidden: int = 10) -> BalancingParametrization:
    """The parametrization called ``name`` (one of :data:`PARAMETRIZATIONS`).

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if name == "lsb1":
        return MixtureBalancing()
    if name == "lsb2":
        return NeuralBalancing(hidden, "sum")
    if name == "lsb2_min":
        return NeuralBalancing(hidden, "min")
    raise ValueError(
        f"Unknown parametrization {name!r}; choose one of {list(PARAMETRIZATIONS)} "
        "('lsb1': softmax mixture of sqrt/barker/min/max; 'lsb2': (h(t) + t h(1/t)) / 2 with an "
        "MLP h; 'lsb2_min': min{h(t), t h(1/t)})."
    )


def lsb_objective(
    parametrization: BalancingParametrization,
    params: Variable,
    deltas_x: Variable,
    deltas_y: Variable,
    slot: Variable,
    reverse: Variable,
    dlogp: Variable,
    feasible: Variable,
    weights: Variable,
) -> tuple[Variable, Variable]:
    """The batch estimate of the LSB objective as a pytensor graph (see the module docstring).

    Parameters
    ----------
    parametrization : BalancingParametrization
    params : Variable
        Flat parameter vector.
    deltas_x, deltas_y : Variable
        ``(B, S)`` neighbour log-differences (exact or first-order, ``-inf`` for masked slots) at
        each particle's state ``x_i`` and at its proposal ``y_i``.
    slot, reverse : Variable
        ``(B,)`` int: the proposed slot at ``x_i`` and the slot of the move back at ``y_i``.
    dlogp : Variable
        ``(B,)``: the exact ``log pi(y_i) - log pi(x_i)`` (0 where infeasible).
    feasible : Variable
        ``(B,)`` 0/1: 0 where the move has ``A = 0`` (zero-probability ``y_i`` or impossible
        reverse move); those rows must carry finite placeholder inputs.
    weights : Variable
        ``(B,)`` particle weights summing to 1.

    Returns
    -------
    loss : Variable
        ``sum_i w_i rho_i (log A_i - Delta_i) + R_bar log R_bar`` in value; its gradient in
        ``params`` is the LSB gradient estimate.
    rejection : Variable
        ``R_bar``, the estimated rejection mass (the variational ``eta``).
    """
    rows = pt.arange(deltas_x.shape[0])
    lg_x = parametrization.log_g_pt(deltas_x, params)
    lg_y = parametrization.log_g_pt(deltas_y, params)
    log_q_fwd = lg_x[rows, slot] - pt.logsumexp(lg_x, axis=1)
    log_q_rev = lg_y[rows, reverse] - pt.logsumexp(lg_y, axis=1)
    log_alpha = pt.minimum(0.0, dlogp + log_q_rev - log_q_fwd)
    log_a = log_q_fwd + log_alpha
    rho = feasible * pt.exp(log_a - disconnected_grad(log_q_fwd))
    rejection = disconnected_grad(pt.clip(pt.sum(weights * (1.0 - rho)), R_FLOOR, 1.0))
    log_eta = pt.log(rejection)
    loss = pt.sum(weights * rho * (log_a - dlogp - 1.0 - log_eta)) + (1.0 + log_eta) - rejection
    return loss, rejection


__all__ = [
    "BASE_FUNCTIONS",
    "D_CLIP",
    "GRID_DENSITY",
    "PARAMETRIZATIONS",
    "BalancingParametrization",
    "MixtureBalancing",
    "NeuralBalancing",
    "lsb_objective",
    "make_parametrization",
]
