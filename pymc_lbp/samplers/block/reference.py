"""Pure block-proposal math: mixtures of products of categoricals, clamping, exact block updates.

A block proposal ``q(x_B | x_C)`` of :class:`~pymc_lbp.NeuralBlock` is a mixture of ``K``
components, each a product of per-variable categorical tables, given as normalised log weights
``log_w`` (K,) and log tables ``log_tables`` (K, D, C) (``-inf`` for categories a variable does
not have). Because ``q`` does not depend on the current ``x_B``, the MH ratio of a proposed
``y_B`` is ``pi(y) q(x_B) / (pi(x) q(y_B))`` with both ``q`` values from one network evaluation.

Block entries that the step does not sample (evidence, variables of other steps) are *clamped*:
the proposal is conditioned on their current values, which for a mixture of products is exact
and cheap (reweight component ``k`` by ``prod_{clamped i} q_{k,i}(x_i)``).
"""

from __future__ import annotations

import numpy as np

from pymc_lbp.samplers.common import draw_categorical, inverse_cdf, log_normalize

__all__ = [
    "block_log_prob",
    "block_log_probs",
    "blocks_log_probs",
    "clamp_mixture",
    "draw_block",
    "draw_blocks",
    "enumerate_block_states",
    "exact_block_log_probs",
    "pick_index",
]


def clamp_mixture(
    log_w: np.ndarray, log_tables: np.ndarray, clamped: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Condition a mixture of products on the values of some of its variables.

    Parameters
    ----------
    log_w : ndarray, shape (K,)
        Normalised log mixture weights.
    log_tables : ndarray, shape (K, D, C)
    clamped : ndarray of bool, shape (D,)
        Which variables are fixed.
    values : ndarray of int, shape (D,)
        Their values (entries of unclamped variables are ignored).

    Returns
    -------
    log_w : ndarray, shape (K,)
        Weights of the conditional mixture (all ``-inf`` if the clamped values are impossible
        under every component, which cannot happen with a positive epsilon floor).
    log_tables : ndarray, shape (K, D_free, C)
        The free variables' tables (unchanged).
    """
    clamped = np.asarray(clamped, dtype=bool)
    if not clamped.any():
        return log_w, log_tables
    idx = np.flatnonzero(clamped)
    fixed = log_tables[:, idx, np.asarray(values)[idx]].sum(axis=1)
    return log_normalize(log_w + fixed), log_tables[:, ~clamped]


def draw_block(log_w: np.ndarray, log_tables: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw block values from a mixture of products: a component, then every variable.

    Returns
    -------
    ndarray of int, shape (D,)
    """
    k = draw_categorical(log_w, rng)
    tab = log_tables[k]
    top = tab.max(axis=1, keepdims=True)
    return pick_index(np.exp(tab - top), rng.random(tab.shape[0])).astype(np.int64)


def pick_index(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF picks along the last axis: index ``j`` with probability ``weights[..., j] /
    sum`` for uniforms ``u`` (shape ``weights.shape[:-1]``); a zero weight is never picked, even
    where ``u * total`` rounds up to the total (:func:`~pymc_lbp.samplers.common.inverse_cdf`).
    Where every weight is zero, the last entry, as the graph's ``pick_index_graph``."""
    cdf = np.cumsum(weights, axis=-1)
    return np.where(cdf[..., -1] > 0, inverse_cdf(cdf, u), weights.shape[-1] - 1)


def draw_blocks(log_w: np.ndarray, log_tables: np.ndarray, u: np.ndarray) -> np.ndarray:
    """:func:`draw_block` for ``B`` independent mixtures at once (the blocks of a colour class),
    from given uniforms.

    Parameters
    ----------
    log_w : ndarray, shape (B, K)
        Normalised log mixture weights, one row per block.
    log_tables : ndarray, shape (B, K, D, C)
    u : ndarray, shape (B, 1 + D)
        Uniform(0, 1) draws: column 0 picks each block's component, column ``1 + i`` its
        variable ``i`` (inverse CDF).

    Returns
    -------
    ndarray of int, shape (B, D)
    """
    B = log_tables.shape[0]
    top = np.max(log_w, axis=1, keepdims=True)
    k = pick_index(np.exp(log_w - top), u[:, 0])
    tab = log_tables[np.arange(B), k]  # (B, D, C)
    top = tab.max(axis=-1, keepdims=True)
    return pick_index(np.exp(tab - top), u[:, 1:]).astype(np.int64)


def block_log_prob(log_w: np.ndarray, log_tables: np.ndarray, values: np.ndarray) -> float:
    """``log sum_k w_k prod_i q_{k,i}(values_i)`` for one block state."""
    values = np.asarray(values, dtype=np.int64)
    comp = log_w + log_tables[:, np.arange(values.size), values].sum(axis=1)
    top = np.max(comp)
    if not np.isfinite(top):
        return -np.inf
    return float(top + np.log(np.sum(np.exp(comp - top))))


def block_log_probs(log_w: np.ndarray, log_tables: np.ndarray, values: np.ndarray) -> np.ndarray:
    """:func:`block_log_prob` for several block states at once (rows of ``values``)."""
    values = np.asarray(values, dtype=np.int64)
    D = values.shape[1]
    comp = log_w + log_tables[:, np.arange(D)[None, :], values].sum(axis=-1).T  # (S, K)
    top = np.max(comp, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return (top + np.log(np.sum(np.exp(comp - top), axis=-1, keepdims=True)))[:, 0]


def blocks_log_probs(log_w: np.ndarray, log_tables: np.ndarray, values: np.ndarray) -> np.ndarray:
    """:func:`block_log_probs` for ``B`` mixtures at once: ``log_w`` (B, K), ``log_tables``
    (B, K, D, C), ``values`` (B, S, D) -> (B, S)."""
    values = np.asarray(values, dtype=np.int64)
    B, S, D = values.shape
    b = np.arange(B)[:, None, None, None]
    k = np.arange(log_w.shape[1])[None, :, None, None]
    d = np.arange(D)[None, None, None, :]
    picked = log_tables[b, k, d, values[:, None, :, :]]  # (B, K, S, D)
    comp = log_w[:, :, None] + picked.sum(axis=-1)  # (B, K, S)
    top = np.max(comp, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return (top + np.log(np.sum(np.exp(comp - top), axis=1, keepdims=True)))[:, 0, :]


def enumerate_block_states(cards: np.ndarray) -> np.ndarray:
    """All joint states of variables with cardinalities ``cards``, last one fastest.

    Returns
    -------
    ndarray of int, shape (prod(cards), len(cards))
    """
    cards = np.asarray(cards, dtype=np.int64)
    grids = np.meshgrid(*[np.arange(c) for c in cards], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)


def exact_block_log_probs(logp_states: np.ndarray) -> np.ndarray:
    """Exact conditional ``log p(y_B | rest)`` from the model logp at every block state.

    ``-inf`` (and NaN) entries get probability 0; all ``-inf`` if no state is possible.
    """
    lp = np.where(np.isnan(logp_states), -np.inf, np.asarray(logp_states, dtype=float))
    return log_normalize(lp)
