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

from pymc_lbp.samplers.block.motifs.chain import (
    canonical_chain_params,
    chain_potentials_from_reference,
    chain_reference_states,
)
from pymc_lbp.samplers.common import (
    inverse_cdf,
    log_normalize,
    mh_accept_probs,
    mh_log_ratios,
)

__all__ = [
    "block_log_probs",
    "blocks_log_probs",
    "clamp_mixture",
    "colour_update",
    "draw_blocks",
    "enumerate_block_states",
    "exact_block_log_probs",
    "logsumexp",
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


def pick_index(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF picks along the last axis: index ``j`` with probability ``weights[..., j] /
    sum`` for uniforms ``u`` (shape ``weights.shape[:-1]``); a zero weight is never picked, even
    where ``u * total`` rounds up to the total (:func:`~pymc_lbp.samplers.common.inverse_cdf`).
    Where every weight is zero, the last entry, as the graph's ``pick_index_graph``."""
    cdf = np.cumsum(weights, axis=-1)
    return np.where(cdf[..., -1] > 0, inverse_cdf(cdf, u), weights.shape[-1] - 1)


def draw_blocks(log_w: np.ndarray, log_tables: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Block values drawn from ``B`` independent mixtures of products at once (the blocks of a
    colour class), from given uniforms: a component, then every variable.

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


def logsumexp(comp: np.ndarray, axis: int) -> np.ndarray:
    """``log sum exp`` over ``axis`` (kept, as size 1), max-shifted; a non-finite maximum
    counts as 0, so an all ``-inf`` slice gives ``-inf``."""
    top = np.max(comp, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return top + np.log(np.sum(np.exp(comp - top), axis=axis, keepdims=True))


def block_log_probs(log_w: np.ndarray, log_tables: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``log sum_k w_k prod_i q_{k,i}(values_i)`` for block states (rows of ``values``)."""
    values = np.asarray(values, dtype=np.int64)
    D = values.shape[1]
    comp = log_w + log_tables[:, np.arange(D)[None, :], values].sum(axis=-1).T  # (S, K)
    return logsumexp(comp, -1)[:, 0]


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
    return logsumexp(comp, 1)[:, 0, :]


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


# ------------------------------------------------------------------ the compiled sweep's oracle
def _batched_target(step, units: list, x: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Model logp at ``x`` with each unit's sites set to each of ``states`` (one batched
    call): shape (len(units), len(states))."""
    S = states.shape[0]
    Y = np.repeat(x[None, :], len(units) * S, axis=0)
    for j, unit in enumerate(units):
        Y[j * S : (j + 1) * S, unit.sites] = states
    step._draw_evals += Y.shape[0]
    return step.target.logp_batch(Y).reshape(len(units), S)


def colour_update(
    step, colour: np.ndarray, x: np.ndarray, logp: float, uniforms: np.ndarray | None = None
) -> tuple[np.ndarray, float, float, int]:
    """Update every chain block of one colour class of a ``NeuralBlock`` ``step`` at once: the
    numpy reference of the compiled sweep (:mod:`pymc_lbp.samplers.block.sweep_graph`, which
    takes the same uniforms and makes the same moves, tested); the steps run the compiled sweep.

    The blocks share no term (``step.colours``), so given the rest their updates are
    independent and each is the unit's own update (exact block Gibbs, or the MH step of its
    proposal): the same kernel as updating them one after another, with one batched logp
    call for all blocks' reference states (or joint states) and one for all proposals, and
    one batched network evaluation. Returns ``(x, logp, sum of acceptances, accepted)``; the
    logp evaluations are added to ``step._draw_evals``.

    ``uniforms`` (drawn from ``step.rng`` when not given): for neural blocks shape
    ``(blocks, block size + 2)``, per block the component's uniform, one per entry, and the
    MH coin; for exact blocks ``(blocks, 1)``, the joint state's (inverse CDF).
    """
    units = [step._units[u] for u in colour]
    x = x.copy()
    if units[0].kind == "exact":
        states = units[0].states
        sites = np.stack([u.sites for u in units])  # (B, block size)
        lp = _batched_target(step, units, x, states)  # (B, joint states)
        lp = np.where(np.isnan(lp), -np.inf, lp)
        u = step.rng.random((len(units), 1)) if uniforms is None else uniforms
        new = pick_index(np.exp(lp - lp.max(axis=1, keepdims=True)), u[:, 0])
        current = np.argmax((states[None] == x[sites][:, None]).all(axis=-1), axis=1)
        rows = np.arange(len(units))
        x[sites] = states[new]
        logp += float(np.sum(lp[rows, new] - lp[rows, current]))
        return x, logp, float(len(units)), len(units)
    K, L = units[0].chain
    lp = _batched_target(step, units, x, chain_reference_states(K, L))
    a, b = chain_potentials_from_reference(lp, K, L)
    params = canonical_chain_params(a, b)
    log_w, log_tables = step.proposal.net.mixture_from_preactivation(step.proposal.prepare(params))
    sites = np.stack([u.sites for u in units])  # (B, block size)
    old = x[sites]
    # per block: a component's uniform, one per entry, the MH coin
    u = step.rng.random((len(units), sites.shape[1] + 2)) if uniforms is None else uniforms
    new = draw_blocks(log_w, log_tables, u[:, :-1])
    moved = np.flatnonzero((new != old).any(axis=1))
    accept = np.ones(len(units))
    n_accepted = len(units) - moved.size  # a proposal equal to the block: accepted as is
    if moved.size:
        Y = np.repeat(x[None, :], moved.size, axis=0)
        Y[np.arange(moved.size)[:, None], sites[moved]] = new[moved]
        step._draw_evals += moved.size
        lp_y = step.target.logp_batch(Y)
        log_q = blocks_log_probs(
            log_w[moved], log_tables[moved], np.stack([new[moved], old[moved]], axis=1)
        )
        # the blocks share no term: independent MH decisions, additive logp changes
        ratio = mh_log_ratios(np.full(moved.size, logp), lp_y, log_q[:, 0], log_q[:, 1])
        accept[moved] = mh_accept_probs(ratio)
        won = u[moved, -1] < accept[moved]
        x[sites[moved[won]]] = new[moved[won]]
        logp += float(np.sum(lp_y[won] - logp))
        n_accepted += int(won.sum())
    return x, logp, float(accept.sum()), n_accepted
