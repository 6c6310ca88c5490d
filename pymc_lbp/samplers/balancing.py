"""Balancing functions of locally balanced proposals, in log space.

A balancing function ``g: (0, inf) -> (0, inf)`` with ``g(t) = t g(1/t)`` turns the target ratios
``t_j = pi(x^(j)) / pi(x)`` of the neighbours of ``x`` into proposal weights ``g(t_j)``
(Zanella 2020). Everything here works with ``d = log t`` and returns ``log g(e^d)``, so that
``-inf`` neighbours (zero target probability) get weight ``exp(-inf) = 0`` and huge log-ratios do
not overflow. In log space the balance condition reads ``log g(e^d) - log g(e^-d) = d``.

======== ============================== ========================
name     g(t)                           log g(e^d)
======== ============================== ========================
sqrt     sqrt(t)                        d / 2
barker   t / (1 + t)                    -log(1 + e^-d)
min      min(1, t)                      min(d, 0)
max      max(1, t)                      max(d, 0)
======== ============================== ========================
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

LogBalancing = Callable[[np.ndarray], np.ndarray]
"""A balancing function in log space: maps log-ratios ``d`` to ``log g(e^d)``, elementwise."""


def log_sqrt(d: np.ndarray) -> np.ndarray:
    """``log g(e^d)`` for ``g(t) = sqrt(t)``."""
    return 0.5 * np.asarray(d, dtype=float)


def log_barker(d: np.ndarray) -> np.ndarray:
    """``log g(e^d)`` for Barker's ``g(t) = t / (1 + t)``; exact at ``d = +-inf``."""
    return -np.logaddexp(0.0, -np.asarray(d, dtype=float))


def log_min(d: np.ndarray) -> np.ndarray:
    """``log g(e^d)`` for ``g(t) = min(1, t)``."""
    return np.minimum(np.asarray(d, dtype=float), 0.0)


def log_max(d: np.ndarray) -> np.ndarray:
    """``log g(e^d)`` for ``g(t) = max(1, t)``."""
    return np.maximum(np.asarray(d, dtype=float), 0.0)


def balanced_log_weights(deltas: np.ndarray, log_g: LogBalancing) -> np.ndarray:
    """Proposal log-weights ``log g(e^Delta)``, with ``-inf`` wherever ``Delta = -inf``.

    A neighbour of zero probability (or a masked slot) is never proposed, whatever ``g(0)`` is
    (``g(t) = max(1, t)`` has ``g(0) = 1``). Forward and reverse proposals use the same rule, so
    the MH correction stays exact.
    """
    log_w = log_g(deltas)
    return np.where(deltas == -np.inf, -np.inf, log_w)


def graph_log_balancing(name: str):
    """The built-in balancing function ``name`` as a pytensor expression builder (or None)."""
    import pytensor.tensor as pt

    graphs = {
        "sqrt": lambda d: 0.5 * d,
        "barker": lambda d: -pt.softplus(-d),
        "min": lambda d: pt.minimum(d, 0.0),
        "max": lambda d: pt.maximum(d, 0.0),
    }
    return graphs.get(name)


BALANCING_FUNCTIONS: dict[str, LogBalancing] = {
    "sqrt": log_sqrt,
    "barker": log_barker,
    "min": log_min,
    "max": log_max,
}
"""The four standard balancing functions, by name."""

_CHECK_GRID = np.linspace(-30.0, 30.0, 121)


def resolve_balancing(balancing: str | LogBalancing) -> tuple[str, LogBalancing]:
    """Turn a user's ``balancing`` option into ``(name, log-space function)``.

    Parameters
    ----------
    balancing : str or callable
        One of ``"sqrt"``, ``"barker"``, ``"min"``, ``"max"``, or a vectorised callable mapping an
        array of log-ratios ``d`` to ``log g(e^d)``.

    Returns
    -------
    name : str
        The name (the callable's ``__name__`` for a custom function).
    fn : callable
        The log-space balancing function.

    Raises
    ------
    ValueError
        For an unknown name, or a callable that is not vectorised, returns NaN, or is not
        balanced (``log g(e^d) - log g(e^-d) != d`` on a grid of ``d`` in [-30, 30]).
    """
    if isinstance(balancing, str):
        try:
            return balancing, BALANCING_FUNCTIONS[balancing]
        except KeyError:
            raise ValueError(
                f"Unknown balancing function {balancing!r}; choose one of "
                f"{sorted(BALANCING_FUNCTIONS)} or pass a callable d -> log g(e^d)."
            ) from None
    if not callable(balancing):
        raise ValueError(
            f"balancing must be a name or a callable d -> log g(e^d), got {type(balancing)!r}"
        )
    try:
        values = np.asarray(balancing(_CHECK_GRID), dtype=float)
        mirrored = np.asarray(balancing(-_CHECK_GRID), dtype=float)
    except Exception as err:  # noqa: BLE001 - re-raised with context
        raise ValueError(f"The balancing callable failed on an array of log-ratios: {err}") from err
    if values.shape != _CHECK_GRID.shape:
        raise ValueError(
            "The balancing callable must be vectorised: it returned shape "
            f"{values.shape} for an input of shape {_CHECK_GRID.shape}."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("The balancing callable returned non-finite values for finite log-ratios.")
    if not np.allclose(values - mirrored, _CHECK_GRID, atol=1e-8, rtol=1e-8):
        raise ValueError(
            "The balancing callable is not balanced: log g(e^d) - log g(e^-d) must equal d "
            "(g(t) = t g(1/t)). Locally balanced proposals need a balanced g."
        )
    return getattr(balancing, "__name__", "custom"), balancing
