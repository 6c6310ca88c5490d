"""Independent numpy enumeration of transition kernels, and helpers to compare steps with them.

Nothing here imports pymc_lbp's proposal code: the kernels are written from the algorithms'
definitions, so a test that compares a step with them checks the implementation against the
math, and ``pi T = pi`` checks the math itself.

Slot layout convention (the same as the package's, so rows can be compared): sites in order;
a binary site has one slot (flip), a categorical site K slots (slot c moves it to c, masked when
it is already c), an integer site two slots (-1, +1), masked outside its support.
"""

from __future__ import annotations

import itertools

import numpy as np


def enumerate_states(kinds: list[tuple]) -> np.ndarray:
    """All states of sites described by ``("binary",)``, ``("cat", K)``, ``("int", lo, hi)``."""
    ranges = []
    for k in kinds:
        if k[0] == "binary":
            ranges.append(range(2))
        elif k[0] == "cat":
            ranges.append(range(k[1]))
        else:
            ranges.append(range(k[1], k[2] + 1))
    return np.array(list(itertools.product(*ranges)), dtype=np.int64)


def neighbour_moves(x: np.ndarray, kinds: list[tuple]) -> list[tuple[int, int] | None]:
    """``(site, new value)`` of every slot at ``x``, or None for a masked slot."""
    moves = []
    for i, k in enumerate(kinds):
        if k[0] == "binary":
            moves.append((i, 1 - x[i]))
        elif k[0] == "cat":
            for c in range(k[1]):
                moves.append(None if c == x[i] else (i, c))
        else:
            for d in (-1, 1):
                v = x[i] + d
                moves.append((i, v) if k[1] <= v <= k[2] else None)
    return moves


def log_g(name: str, d: np.ndarray) -> np.ndarray:
    """Balancing functions, written independently: log of g(t) at t = exp(d)."""
    d = np.asarray(d, dtype=float)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        t = np.exp(d)
        if name == "sqrt":
            g = np.sqrt(t)
        elif name == "barker":
            g = t / (1.0 + t)
            g = np.where(np.isinf(t), 1.0, g)
        elif name == "min":
            g = np.minimum(1.0, t)
        elif name == "max":
            g = np.maximum(1.0, t)
        else:
            raise ValueError(name)
        out = np.log(g)
    return np.where(d == -np.inf, -np.inf, out)


def locally_balanced_kernel(
    states: np.ndarray,
    log_pi: np.ndarray,
    kinds: list[tuple],
    balancing: str,
    proposal_deltas=None,
) -> np.ndarray:
    """Transition matrix of the single-site locally balanced MH chain.

    ``proposal_deltas(x) -> array over slots`` gives the log-ratios the proposal uses (exact by
    default; pass first-order estimates for Gibbs-with-gradients). Zero-probability neighbours and
    masked slots are never proposed.
    """
    index = {tuple(s): n for n, s in enumerate(states)}

    def exact(x):
        out = []
        for mv in neighbour_moves(x, kinds):
            if mv is None:
                out.append(-np.inf)
                continue
            y = x.copy()
            y[mv[0]] = mv[1]
            out.append(log_pi[index[tuple(y)]] - log_pi[index[tuple(x)]])
        return np.array(out)

    deltas_fn = proposal_deltas or exact

    def q(x):
        d = np.asarray(deltas_fn(x), dtype=float)
        masked = np.array([mv is None for mv in neighbour_moves(x, kinds)])
        d = np.where(masked, -np.inf, d)
        w = np.exp(log_g(balancing, d))
        return w / w.sum()

    n = len(states)
    T = np.zeros((n, n))
    for a, x in enumerate(states):
        if not np.isfinite(log_pi[a]):
            T[a, a] = 1.0
            continue
        qx = q(x)
        for s, mv in enumerate(neighbour_moves(x, kinds)):
            if mv is None or qx[s] == 0:
                continue
            y = x.copy()
            y[mv[0]] = mv[1]
            b = index[tuple(y)]
            if not np.isfinite(log_pi[b]):
                continue
            qy = q(y)
            back = [m for m in neighbour_moves(y, kinds)].index((mv[0], x[mv[0]]))
            ratio = np.exp(log_pi[b] - log_pi[a]) * qy[back] / qx[s]
            T[a, b] += qx[s] * min(1.0, ratio)
        T[a, a] += 1.0 - T[a].sum()
    return T


def stationary_error(T: np.ndarray, log_pi: np.ndarray) -> float:
    """``max |pi T - pi|`` for the normalised target."""
    pi = np.exp(log_pi - np.max(log_pi))
    pi /= pi.sum()
    return float(np.max(np.abs(pi @ T - pi)))


def step_kernel(step, states: np.ndarray) -> np.ndarray:
    """Transition matrix of a single-site pymc_lbp step, from the step's own proposal pieces.

    Uses ``step.differences.evaluate`` (the compiled differences and prepared weights) and the
    step's layout for every proposal; the MH acceptance is computed here from those numbers.
    """
    index = {tuple(s): n for n, s in enumerate(states)}
    n = len(states)
    T = np.zeros((n, n))
    lay = step.layout
    for a, x in enumerate(states):
        logp_x, _, prep = step.differences.evaluate(x)
        if prep is None or not np.isfinite(logp_x):
            T[a, a] = 1.0
            continue
        log_w, _, log_z = prep
        qx = np.exp(log_w - log_z)
        for slot in np.flatnonzero(qx > 0):
            y = x.copy()
            y[lay.slot_site[slot]] = lay.new_value(x, slot)
            logp_y, _, prep_y = step.differences.evaluate(y)
            if prep_y is None or not np.isfinite(logp_y):
                continue
            back = lay.reverse_slot(slot, x[lay.slot_site[slot]])
            q_back = np.exp(prep_y[0][back] - prep_y[2])
            T[a, index[tuple(y)]] += qx[slot] * min(
                1.0, np.exp(logp_y - logp_x) * q_back / qx[slot]
            )
        T[a, a] += 1.0 - T[a].sum()
    return T


def compiled_step_kernel(step, states: np.ndarray, kinds: list[tuple]) -> np.ndarray:
    """Transition matrix of a single-site step's compiled kernel (``step.kernel``), one step.

    For every state and every slot of positive proposal probability (from the kernel's own
    proposal graph), the kernel is run once with the slot uniform at the middle of that slot's
    CDF interval and MH coin ``u = 0`` (accepted iff the acceptance probability is positive); the
    kernel reports the acceptance probability, and its move is checked against
    :func:`neighbour_moves`.
    """
    import pytensor.tensor as pt
    from pymc.pytensorf import compile as pm_compile

    from pymc_lbp.samplers.single_site.graph import balanced_weights, graph_balancing

    d = pt.vector("d", dtype="float64")
    log_w, _, log_z = balanced_weights(d, graph_balancing(step.balancing, step.log_g))
    log_q_fn = pm_compile([d], log_w - log_z)  # log Q(s|x) over slots, the kernel's row
    index = {tuple(s): n for n, s in enumerate(states)}
    n = len(states)
    T = np.zeros((n, n))
    for a, x in enumerate(states):
        logp_x, deltas = step.differences(x)
        q = np.exp(log_q_fn(deltas))
        if not np.all(np.isfinite(q)):  # no move at all
            T[a, a] = 1.0
            continue
        cdf = np.cumsum(q)
        moves = neighbour_moves(x, kinds)
        for slot in np.flatnonzero(q > 0):
            lo = cdf[slot - 1] if slot else 0.0
            u = np.array([[0.5 * (lo + cdf[slot]) / cdf[-1], 0.0]])
            res = step.kernel(x, logp_x, deltas, u)
            if res.n_accepted:
                y = x.copy()
                y[moves[slot][0]] = moves[slot][1]
                assert np.array_equal(res.x, y), (x, slot, res.x, y)
                T[a, index[tuple(y)]] += q[slot] * res.sum_accept
        T[a, a] += 1.0 - T[a].sum()
    return T


def empirical_row(step, x: np.ndarray, states: np.ndarray, n: int) -> np.ndarray:
    """Frequencies of the states reached by ``n`` one-step draws of the step from ``x``
    (``step.run_steps`` with ``steps_per_draw = 1``: the path ``astep`` takes)."""
    assert step.steps_per_draw == 1
    index = {tuple(s): k for k, s in enumerate(states)}
    counts = np.zeros(len(states))
    logp, deltas = step.differences(x)
    for _ in range(n):
        res = step.run_steps(x.copy(), logp, deltas, 1)
        counts[index[tuple(res.x)]] += 1
    return counts


def chi_square_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson chi-square p-value of counts against probabilities (cells with p > 0)."""
    from scipy import stats

    keep = probs > 0
    assert counts[~keep].sum() == 0, "a zero-probability outcome was observed"
    n = counts.sum()
    expected = n * probs[keep]
    stat = np.sum((counts[keep] - expected) ** 2 / expected)
    return float(stats.chi2.sf(stat, df=max(int(keep.sum()) - 1, 1)))
