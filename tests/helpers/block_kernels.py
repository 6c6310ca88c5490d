"""Independent numpy enumeration of NeuralBlock's kernel on tiny models.

Nothing here uses pymc_lbp's proposal code: the network's forward pass, the mixture, the
clamping of fixed block entries, the MH acceptance and the single-site Gibbs fallback are
written out from their definitions with explicit loops, so comparing the step with these
kernels checks the implementation against the math, and ``pi T = pi`` checks the math itself.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.sparse.csgraph import connected_components


def mdn_tables(weights: dict, u: np.ndarray, cards: list[int], K: int, eps: float):
    """Mixture weights (K,) and per-variable probability tables [K][D] of one input vector."""

    def elu(z):
        return np.array([v if v > 0 else np.exp(v) - 1.0 for v in z])

    W = {k: np.asarray(v, dtype=float) for k, v in weights.items()}
    h = elu(u @ W["W0"] + W["b0"])
    h = elu(h @ W["W1"] + W["b1"])
    out = h @ W["W2"] + W["b2"]
    w = np.exp(out[:K] - out[:K].max())
    w /= w.sum()
    tables = []
    pos = K
    for _k in range(K):
        per_var = []
        for c in cards:
            logits = np.concatenate([[0.0], out[pos : pos + c - 1]])
            pos += c - 1
            p = np.exp(logits - logits.max())
            p /= p.sum()
            per_var.append((1 - eps) * p + eps / c)
        tables.append(per_var)
    return w, tables


def features(x_cond, cond_cards, params):
    """The motif encoding, written out: binary 2x-1, categorical one-hot, then parameters."""
    out = []
    for v, c in zip(x_cond, cond_cards, strict=True):
        if c == 2:
            out.append(2.0 * v - 1.0)
        else:
            out += [1.0 if v == k else 0.0 for k in range(c)]
    return np.array(out + list(params), dtype=float)


def block_q(w, tables, values, fixed):
    """q(values of the free entries) for a mixture conditioned on the fixed entries.

    ``fixed[i]`` is the clamped value of entry i or None; ``values[i]`` the proposed value of a
    free entry.
    """
    num = 0.0
    den = 0.0
    for k in range(len(w)):
        pf = np.prod([tables[k][i][v] for i, v in enumerate(fixed) if v is not None])
        pv = np.prod([tables[k][i][values[i]] for i, v in enumerate(fixed) if v is None])
        num += w[k] * pf * pv
        den += w[k] * pf
    return num / den


def neural_block_kernel(
    states: np.ndarray,
    log_pi: np.ndarray,
    units: list[dict],
    weights: dict,
    motif_cards: tuple,
    K: int,
    eps: float,
) -> np.ndarray:
    """Transition matrix of NeuralBlock's random-scan kernel over full states.

    Parameters
    ----------
    states : (S, n) every full state (fixed variables at their values)
    log_pi : (S,) unnormalised log target (-inf allowed)
    units : list of dicts, either ``{"kind": "site", "site": v, "card": c}`` or
        ``{"kind": "neural", "block": [...], "cond": [...], "pad": [...], "params": [...],
        "free": [bool, ...]}`` with full-state indices (-1 in cond: the pad value); ``params``
        may be a function of the full state (parameters read from the model, as chain blocks)
    weights, motif_cards=(block_cards, cond_cards), K, eps : the network
    """
    block_cards, cond_cards = motif_cards
    lookup = {tuple(s): i for i, s in enumerate(states)}
    S = len(states)
    T = np.zeros((S, S))
    for a, x in enumerate(states):
        if not np.isfinite(log_pi[a]):
            T[a, a] = 1.0
            continue
        for unit in units:
            row = np.zeros(S)
            if unit["kind"] == "site":
                v = unit["site"]
                cands = []
                for c in range(unit["card"]):
                    y = x.copy()
                    y[v] = c
                    cands.append(lookup[tuple(y)])
                p = np.exp(log_pi[cands] - np.max(log_pi[cands]))
                p /= p.sum()
                for b, pb in zip(cands, p, strict=True):
                    row[b] += pb
            else:
                pairs = zip(unit["cond"], unit["pad"], strict=True)
                x_cond = [x[i] if i >= 0 else pad for i, pad in pairs]
                params = unit["params"](x) if callable(unit["params"]) else unit["params"]
                u = features(x_cond, cond_cards, params)
                w, tables = mdn_tables(weights, u, list(block_cards), K, eps)
                block = unit["block"]
                fixed = [None if f else x[i] for i, f in zip(block, unit["free"], strict=True)]
                free_pos = [j for j, f in enumerate(unit["free"]) if f]
                cur = [x[block[j]] for j in range(len(block))]
                q_cur = block_q(w, tables, cur, fixed)
                stay = 0.0
                for vals in itertools.product(*[range(block_cards[j]) for j in free_pos]):
                    prop = list(cur)
                    for j, v in zip(free_pos, vals, strict=True):
                        prop[j] = v
                    q_new = block_q(w, tables, prop, fixed)
                    y = x.copy()
                    for j in free_pos:
                        y[block[j]] = prop[j]
                    b = lookup[tuple(y)]
                    if b == a:
                        row[a] += q_new
                        continue
                    if not np.isfinite(log_pi[b]):
                        acc = 0.0
                    else:
                        acc = min(1.0, np.exp(log_pi[b] - log_pi[a]) * q_cur / q_new)
                    row[b] += q_new * acc
                    stay += q_new * (1.0 - acc)
                row[a] += stay
            T[a] += row / len(units)
    return T


def block_gibbs_kernel(states, pi, blocks) -> np.ndarray:
    """Random-scan exact block Gibbs, from its definition: pick a block uniformly, draw it from
    pi restricted to the states that agree with the current one off the block."""
    index = {tuple(s): i for i, s in enumerate(states)}
    S = len(states)
    T = np.zeros((S, S))
    for a, x in enumerate(states):
        for block in blocks:
            rest = [i for i in range(states.shape[1]) if i not in block]
            same = [index[tuple(y)] for y in states if np.array_equal(y[rest], x[rest])]
            w = pi[same]
            if w.sum() == 0:  # an impossible state with no possible state in reach: stay
                T[a, a] += 1.0 / len(blocks)
                continue
            T[a, same] += w / w.sum() / len(blocks)
    return T


def irreducible_on_support(T, pi) -> bool:
    """Whether T connects every pair of states of positive pi (one strongly connected class)."""
    keep = pi > 0
    n, _ = connected_components(T[keep][:, keep] > 0, directed=True, connection="strong")
    return n == 1
