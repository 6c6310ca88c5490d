"""Rao-Blackwellised marginals of UAI networks: every draw's full conditionals.

A draw ``x`` of a network's free variables estimates the marginal ``P(x_i = k)`` by the
indicator ``[x_i = k]`` (counting) or, with less variance, by the full conditional

    ``p_i(k | x) = prod_{f ∋ i} f(x with x_i = k) / sum_j prod_{f ∋ i} f(x with x_i = j)``

that only reads the factors containing ``i`` (its Markov blanket). Both are unbiased for the
marginal under the posterior (``E[p_i(k | x_-i)] = P(x_i = k)``), so the average over draws of a
chain that targets the posterior converges to the same marginals; the conditionals are never
further from it than the counts and make use of every state a draw is next to.

:class:`FullConditionals` evaluates a draw's conditionals as one fancy-indexing gather of
``draws x incidences x K`` table entries and one ``np.add.reduceat`` per variable, in chunks of
draws; no Python loop runs over draws.

* :func:`rao_blackwell_marginals`: the averaged conditionals (all variables, fixed ones deltas).
* :func:`count_marginals`: the frequencies, from the same states.
* :func:`marginal_mcse`: Monte Carlo standard errors of either estimate, ArviZ's ``az.mcse``
  (mean) of the per-draw values of each entry, its chains pooled as ArviZ pools them.

A draw in which some variable has no possible value (every entry of its conditional is zero:
the draw itself has probability zero, which a chain started at a feasible state never reaches)
contributes that variable's indicator instead, so no estimate is ever NaN.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from pymc_lbp.factor_graph.network import UAINetwork, reduce_factors

__all__ = [
    "FullConditionals",
    "count_marginals",
    "marginal_mcse",
    "rao_blackwell_marginals",
]

_CHUNK_ENTRIES = 1 << 21
"""About how many gathered table entries (draws x incidences x K) one chunk holds."""


@dataclass(frozen=True, eq=False)
class FullConditionals:
    """The gather plan of the full conditionals of a network's free variables.

    Build it with :meth:`from_network`; :meth:`probabilities` evaluates it on states.

    Attributes
    ----------
    n_vars : int
        Number of network variables.
    free : numpy.ndarray of int, shape (V,)
        The free variables (not fixed by the evidence), increasing.
    free_cards : numpy.ndarray of int, shape (V,)
        Their cardinalities.
    fixed : dict of int to int
        The fixed variables and their values.
    kmax : int
        The largest cardinality of a free variable (the last axis of the conditionals).
    flat : numpy.ndarray of float, shape (T,)
        ``0.0`` then every conditioned log table, C order (zeros of the tables are ``-inf``).
    factor_vars, factor_strides : numpy.ndarray of int, shape (F + 1, A)
        Per conditioned factor, its free scope (padded with ``n_vars``, a column of zeros) and
        the strides of its table; the last row is an empty factor (index 0 always).
    factor_offsets : numpy.ndarray of int, shape (F + 1,)
        Where each table starts in ``flat`` (the empty factor: 0, the ``0.0``).
    inc_var, inc_factor, inc_stride : numpy.ndarray of int, shape (E,)
        The incidences, sorted by variable: the variable (its position in ``free``), the
        factor, the variable's stride in that factor's table. Every variable has one incidence
        with the empty factor (stride 0, value 0), so no variable's segment is empty.
    seg_starts : numpy.ndarray of int, shape (V + 1,)
        Where each variable's incidences start (the last entry is ``E``).
    """

    n_vars: int
    free: np.ndarray
    free_cards: np.ndarray
    fixed: dict[int, int]
    kmax: int
    flat: np.ndarray
    factor_vars: np.ndarray
    factor_strides: np.ndarray
    factor_offsets: np.ndarray
    inc_var: np.ndarray
    inc_factor: np.ndarray
    inc_stride: np.ndarray
    seg_starts: np.ndarray

    @classmethod
    def from_network(cls, network: UAINetwork, evidence: Mapping[int, int]) -> FullConditionals:
        """Plan the conditionals of ``network`` given ``evidence``.

        Parameters
        ----------
        network : UAINetwork
            The target (for a BAYES model, the network with its CPT rows rescaled as the model
            does, :meth:`UAINetwork.normalised_cpts`).
        evidence : mapping of int to int
            Every fixed variable (evidence, and cardinality-1 variables) and its value.

        Returns
        -------
        FullConditionals
        """
        fixed = {int(v): int(x) for v, x in evidence.items()}
        n = network.n_vars
        free = np.array([v for v in range(n) if v not in fixed], dtype=np.int64)
        position = np.full(n, -1, dtype=np.int64)
        position[free] = np.arange(free.size)
        factors, _ = reduce_factors(network, fixed)
        arity = max([len(scope) for scope, _ in factors], default=1)
        n_fac = len(factors)
        factor_vars = np.full((n_fac + 1, arity), n, dtype=np.int64)
        factor_strides = np.zeros((n_fac + 1, arity), dtype=np.int64)
        factor_offsets = np.zeros(n_fac + 1, dtype=np.int64)
        pieces: list[np.ndarray] = [np.zeros(1)]
        incidences: list[tuple[int, int, int]] = []  # (variable position, factor, stride)
        offset = 1
        for f, (scope, table) in enumerate(factors):
            table = np.ascontiguousarray(table, dtype=np.float64)
            strides = [s // table.itemsize for s in table.strides]
            factor_vars[f, : len(scope)] = scope
            factor_strides[f, : len(scope)] = strides
            factor_offsets[f] = offset
            pieces.append(table.ravel())
            offset += table.size
            incidences += [(int(position[v]), f, st) for v, st in zip(scope, strides, strict=True)]
        incidences += [(i, n_fac, 0) for i in range(free.size)]  # the empty factor
        inc = np.array(sorted(incidences), dtype=np.int64).reshape(-1, 3)
        seg_starts = np.searchsorted(inc[:, 0], np.arange(free.size + 1))
        free_cards = network.cards[free].astype(np.int64)
        return cls(
            n_vars=n,
            free=free,
            free_cards=free_cards,
            fixed=fixed,
            kmax=int(free_cards.max(initial=1)),
            flat=np.concatenate(pieces),
            factor_vars=factor_vars,
            factor_strides=factor_strides,
            factor_offsets=factor_offsets,
            inc_var=inc[:, 0],
            inc_factor=inc[:, 1],
            inc_stride=inc[:, 2],
            seg_starts=seg_starts,
        )

    def draws_per_chunk(self, start: int = 0, stop: int | None = None) -> int:
        """How many draws one chunk of :meth:`probabilities` on ``free[start:stop]`` takes."""
        stop = self.free.size if stop is None else stop
        n_inc = int(self.seg_starts[stop] - self.seg_starts[start])
        return max(1, _CHUNK_ENTRIES // max(1, n_inc * self.kmax))

    def probabilities(
        self, states: np.ndarray, start: int = 0, stop: int | None = None
    ) -> np.ndarray:
        """The full conditionals of ``free[start:stop]`` at every state.

        Parameters
        ----------
        states : numpy.ndarray of int, shape (D, n_vars)
            Full assignments (the fixed variables' columns are not read).
        start, stop : int
            A range of free variables (positions in :attr:`free`); default all.

        Returns
        -------
        numpy.ndarray of float, shape (D, stop - start, kmax)
            ``out[d, i, k] = p(x_{free[start + i]} = k | the rest of states[d])``; entries
            ``k >= card`` are 0. A variable without a possible value at a state (every entry
            zero) gets its indicator at that state.
        """
        return np.moveaxis(self._probabilities(states, start, stop), 0, -1)

    def _probabilities(
        self, states: np.ndarray, start: int = 0, stop: int | None = None
    ) -> np.ndarray:
        """:meth:`probabilities` with the categories first: shape ``(kmax, D, stop - start)``
        (every slice ``[k]`` contiguous, so the reductions over k are elementwise)."""
        stop = self.free.size if stop is None else stop
        # 32-bit indices where the tables allow: half the memory traffic of the gathers
        index = np.int32 if self.flat.size < 2**31 - 1 else np.int64
        states = np.asarray(states).astype(index, copy=False)
        lo, hi = int(self.seg_starts[start]), int(self.seg_starts[stop])
        inc_var = self.inc_var[lo:hi]
        inc_stride = self.inc_stride[lo:hi].astype(index)
        cards = self.free_cards[start:stop]
        # per k and incidence: the offset of entry k from entry 0 of the state's row
        ks = np.arange(self.kmax)
        steps = (np.minimum(ks[:, None], cards[inc_var - start] - 1) * inc_stride).astype(index)
        factors, used = np.unique(self.inc_factor[lo:hi], return_inverse=True)
        fvars = self.factor_vars[factors]
        fstrides = self.factor_strides[factors].astype(index)
        foffsets = self.factor_offsets[factors].astype(index)
        var_cols = self.free[inc_var]
        segments = self.seg_starts[start:stop] - lo
        out = np.empty((self.kmax, states.shape[0], stop - start))
        for lo_d, hi_d in _chunks(states.shape[0], self.draws_per_chunk(start, stop)):
            # the states, and a column of zeros (the padding of the scopes)
            x = np.concatenate([states[lo_d:hi_d], np.zeros((hi_d - lo_d, 1), index)], axis=1)
            base = foffsets + (x[:, fvars] * fstrides).sum(axis=-1, dtype=index)  # (D, F')
            row = base[:, used] - x[:, var_cols] * inc_stride  # (D, E): entry 0 of the row
            # categories in groups of about _CHUNK_ENTRIES gathered entries (all of them at once
            # unless one draw's are more): no Python loop over the states of a large variable
            per_k = max(1, row.size)
            for lo_k, hi_k in _chunks(self.kmax, max(1, _CHUNK_ENTRIES // per_k)):
                gathered = self.flat[row[None] + steps[lo_k:hi_k, None, :]]  # (K', D, E)
                out[lo_k:hi_k, lo_d:hi_d] = np.add.reduceat(gathered, segments, axis=2)
        missing = ks[:, None] >= cards[None, :]  # (kmax, V): categories a variable does not have
        np.putmask(out, np.broadcast_to(missing[:, None, :], out.shape), -np.inf)
        _normalise(out, states[:, self.free[start:stop]])
        return out


def _chunks(total: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, total, size):
        yield lo, min(total, lo + size)


def _normalise(logits: np.ndarray, values: np.ndarray) -> None:
    """Softmax over the first axis, in place; where every entry is ``-inf`` (no possible value)
    the indicator of ``values`` (shape ``logits.shape[1:]``) instead."""
    top = logits.max(axis=0)
    dead = ~np.isfinite(top)
    top[dead] = 0.0
    logits -= top
    np.exp(logits, out=logits)
    total = logits.sum(axis=0)  # the first axis: added in order, one slice after the other
    total[dead] = 1.0
    logits /= total
    if dead.any():
        logits[:, dead] = values[dead][None, :] == np.arange(logits.shape[0])[:, None]


def _deltas(plan: FullConditionals, cards: np.ndarray) -> list[np.ndarray]:
    out = [np.zeros(int(k)) for k in cards]
    for v, x in plan.fixed.items():
        out[v][x] = 1.0
    return out


def rao_blackwell_marginals(
    network: UAINetwork,
    evidence: Mapping[int, int],
    states: np.ndarray,
    *,
    plan: FullConditionals | None = None,
) -> list[np.ndarray]:
    """Marginals as the average full conditional over the states.

    Parameters
    ----------
    network : UAINetwork
        The target network.
    evidence : mapping of int to int
        Every fixed variable and its value (evidence, cardinality-1 variables).
    states : array_like of int, shape (..., n)
        Draws (full assignments); all leading axes are pooled.
    plan : FullConditionals, optional
        A plan made by :meth:`FullConditionals.from_network` for the same network and evidence.

    Returns
    -------
    list of numpy.ndarray
        ``marginals[i][k]``, in network order; fixed variables are deltas.
    """
    plan = plan or FullConditionals.from_network(network, evidence)
    states = np.asarray(states, dtype=np.int64).reshape(-1, network.n_vars)
    if states.shape[0] == 0:
        raise ValueError("no draws to average")
    total = np.zeros((plan.kmax, plan.free.size))
    for lo, hi in _chunks(states.shape[0], plan.draws_per_chunk()):
        total += plan._probabilities(states[lo:hi]).sum(axis=1)
    out = _deltas(plan, network.cards)
    mean = total / states.shape[0]
    for i, v in enumerate(plan.free.tolist()):
        out[v] = mean[: plan.free_cards[i], i]
    return out


def count_marginals(
    network: UAINetwork, evidence: Mapping[int, int], states: np.ndarray
) -> list[np.ndarray]:
    """Marginals as the fraction of states with ``x_i = k`` (fixed variables: deltas).

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int
        Every fixed variable and its value.
    states : array_like of int, shape (..., n)
        Draws; all leading axes are pooled.

    Returns
    -------
    list of numpy.ndarray
    """
    states = np.asarray(states, dtype=np.int64).reshape(-1, network.n_vars)
    if states.shape[0] == 0:
        raise ValueError("no draws to count")
    out = [np.zeros(int(k)) for k in network.cards]
    for v in range(network.n_vars):
        if v in evidence:
            out[v][int(evidence[v])] = 1.0
        else:
            out[v] = np.bincount(states[:, v], minlength=int(network.cards[v])) / states.shape[0]
    return out


def marginal_mcse(
    network: UAINetwork,
    evidence: Mapping[int, int],
    states: np.ndarray,
    *,
    rao_blackwellize: bool = True,
    plan: FullConditionals | None = None,
) -> list[np.ndarray]:
    """Monte Carlo standard errors of the marginal estimates, by ArviZ.

    Each marginal entry's estimate is the mean of a per-draw series (the full conditional
    ``p_i(k | x)``, or the indicator ``[x_i = k]`` when ``rao_blackwellize`` is False); its
    standard error is ``az.mcse`` (method ``"mean"``) of that series with its chains, i.e. the
    series' standard deviation over the square root of ArviZ's (multi-chain) ESS.

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int
        Every fixed variable and its value.
    states : array_like of int, shape (chain, draw, n)
        Draws by chain, all chains of the same length (a 2-d array is one chain).
    rao_blackwellize : bool
        The estimator whose error is wanted.
    plan : FullConditionals, optional
        A plan for the same network and evidence.

    Returns
    -------
    list of numpy.ndarray
        In the layout of the marginals: 0 for fixed variables and for entries whose series is
        constant; NaN where ArviZ cannot estimate one (fewer than 4 draws per chain).
    """
    import arviz as az

    plan = plan or FullConditionals.from_network(network, evidence)
    states = np.asarray(states, dtype=np.int64)
    if states.ndim == 2:
        states = states[None]
    n_chains, n_draws, n = states.shape
    flat_states = states.reshape(-1, n).astype(np.int32 if plan.flat.size < 2**31 - 1 else np.int64)
    errors = np.zeros((plan.free.size, plan.kmax))
    # variables in groups whose per-draw series (chains x draws x group x K) fit in memory
    per_var = max(1, n_chains * n_draws * plan.kmax)
    group = max(1, (8 * _CHUNK_ENTRIES) // per_var)
    for start in range(0, plan.free.size, group):
        stop = min(plan.free.size, start + group)
        if rao_blackwellize:
            series = plan.probabilities(flat_states, start, stop)
        else:
            values = flat_states[:, plan.free[start:stop]]
            series = (values[..., None] == np.arange(plan.kmax)).astype(np.float64)
        series = series.reshape(n_chains, n_draws, -1)
        constant = np.ptp(series, axis=(0, 1)) == 0
        found = np.zeros(series.shape[-1])
        if not constant.all():
            data = az.convert_to_dataset(series[:, :, ~constant])
            found[~constant] = np.asarray(az.mcse(data, method="mean")["x"])
        errors[start:stop] = found.reshape(stop - start, plan.kmax)
    out = [np.zeros(int(k)) for k in network.cards]
    for i, v in enumerate(plan.free.tolist()):
        out[v] = errors[i, : plan.free_cards[i]]
    return out
