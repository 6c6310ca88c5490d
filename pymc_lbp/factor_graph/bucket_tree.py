"""Bucket-tree elimination in log space: the tables and the passes of exact inference.

:class:`_BucketTree` distributes the evidence-conditioned log factors of a UAI network over the
steps of an :class:`~pymc_lbp.factor_graph.elimination.EliminationPlan` and runs the upward pass
(log Z), the downward pass (every marginal) and backward sampling, with plain numpy broadcasting.
"""

from __future__ import annotations

import numpy as np

from pymc_lbp.factor_graph.elimination import EliminationPlan
from pymc_lbp.factor_graph.network import UAINetwork, reduce_factors


def _lse(a: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """log-sum-exp over ``axis`` with a per-slice shift; all-``-inf`` slices give ``-inf``."""
    m = np.max(a, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    tmp = a - m
    np.exp(tmp, out=tmp)
    total = tmp.sum(axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        np.log(total, out=total)
    total += m
    return np.squeeze(total, axis=axis)


def _expand(table: np.ndarray, axes: tuple[int, ...], ndim: int) -> np.ndarray:
    """Reshape a table whose axes are the (increasing) cluster positions ``axes``."""
    shape = [1] * ndim
    for a, k in zip(axes, table.shape, strict=True):
        shape[a] = k
    return table.reshape(shape)


def _sum_tables(
    shape: tuple[int, ...], funcs: list[tuple[tuple[int, ...], np.ndarray]]
) -> np.ndarray:
    """Sum log tables (each on increasing cluster axes) into one table of ``shape``.

    The sum is grown one axis at a time and each table is added as soon as its last axis is
    present, so tables on leading axes cost only the size of that prefix, not of the cluster.
    """
    by_last: list[list[tuple[tuple[int, ...], np.ndarray]]] = [[] for _ in shape]
    acc = np.zeros(())
    for axes, table in funcs:
        if axes:
            by_last[axes[-1]].append((axes, table))
        else:
            acc = acc + table
    for j in range(len(shape)):
        acc = acc[..., None]
        for axes, table in by_last[j]:
            term = _expand(table, axes, j + 1)
            if acc.shape == shape[: j + 1]:
                acc += term
            else:
                acc = acc + term
    if acc.shape != shape:
        acc = acc + np.zeros(shape)
    return acc


class _BucketTree:
    """Log factors distributed over the steps of an elimination plan."""

    def __init__(self, network: UAINetwork, evidence: dict[int, int], plan: EliminationPlan):
        self.network = network
        self.plan = plan
        self.cards = network.cards
        self.step = {v: s for s, v in enumerate(plan.order)}
        self.position = [{v: i for i, v in enumerate(cl)} for cl in plan.clusters]
        self.children: list[list[int]] = [[] for _ in plan.order]
        for s, p in enumerate(plan.parent):
            if p >= 0:
                self.children[p].append(s)
        factors, log_constant = reduce_factors(network, evidence)
        merged: dict[tuple[int, ...], np.ndarray] = {}
        for scope, table in factors:
            perm = self.step_order(scope)
            key = tuple(scope[i] for i in perm)
            table = np.transpose(table, perm)
            merged[key] = merged[key] + table if key in merged else table
        self.load(merged, log_constant)

    def step_order(self, scope: tuple[int, ...]) -> list[int]:
        """Positions of ``scope`` sorted by elimination step (a factor's axes in its bucket)."""
        return sorted(range(len(scope)), key=lambda i: self.step[scope[i]])

    def load(
        self,
        merged: dict[tuple[int, ...], np.ndarray],
        log_constant: float,
        keep: list[bool] | None = None,
    ) -> None:
        """Put log tables (keyed by their scope in elimination-step order) into their buckets.

        A tree reloaded with tables of the same scopes (in the same order) keeps its cached
        cluster axes: :class:`~pymc_lbp.samplers.block.elimination.BlockSampler` reloads one tree
        for every update of a block. ``keep[s]`` keeps step ``s``'s message of the last
        :meth:`forward` (the caller vouches that no table below ``s`` changed).
        """
        kept = (
            None
            if keep is None
            else [m if k else None for m, k in zip(self.messages, keep, strict=True)]
        )
        self.log_constant = log_constant
        bucket: list[list[tuple[tuple[int, ...], np.ndarray]]] = [[] for _ in self.plan.order]
        for scope, table in merged.items():
            bucket[self.step[scope[0]]].append((scope, table))
        scopes = list(merged)
        if scopes != getattr(self, "_scopes", None):  # the cached axes follow the scopes
            self._scopes = scopes
            self._axes: list[list[tuple[int, ...]] | None] = [None] * len(self.plan.order)
        self.bucket = bucket
        self.messages: list[np.ndarray | None] = kept or [None] * len(self.plan.order)

    def axes(self, s: int, scope: tuple[int, ...]) -> tuple[int, ...]:
        pos = self.position[s]
        return tuple(pos[v] for v in scope)

    def _step_axes(self, s: int) -> list[tuple[int, ...]]:
        """Cluster axes of step ``s``'s factors then of its children's messages (cached)."""
        axes = self._axes[s]
        if axes is None:
            axes = [self.axes(s, scope) for scope, _ in self.bucket[s]]
            axes += [self.axes(s, self.plan.clusters[c][1:]) for c in self.children[s]]
            self._axes[s] = axes
        return axes

    def cluster_table(self, s: int, incoming: np.ndarray | None = None) -> np.ndarray:
        """Sum of step ``s``'s factors, its children's messages and ``incoming`` (parent)."""
        cl = self.plan.clusters[s]
        tables = [table for _, table in self.bucket[s]]
        tables += [self.messages[c] for c in self.children[s]]
        shape = tuple(int(self.cards[v]) for v in cl)
        funcs = list(zip(self._step_axes(s), tables, strict=True))
        if incoming is not None:
            funcs.append((tuple(range(1, len(cl))), incoming))
        return _sum_tables(shape, funcs)

    def forward(self) -> float:
        """Upward pass; stores the messages and returns log Z."""
        log_z = self.log_constant
        for s in range(len(self.plan.order)):
            if self.messages[s] is None:  # else kept by load(keep=...)
                self.messages[s] = _lse(self.cluster_table(s), axis=0)
            if self.plan.parent[s] < 0:
                log_z += float(self.messages[s])
        return log_z

    def backward(self) -> dict[int, np.ndarray]:
        """Downward pass (after :meth:`forward`); returns the marginal of every free variable.

        The cluster tables of this pass are full (unnormalised) joint marginals, so a single
        shift by the cluster maximum is safe: an entry that underflows has posterior
        probability below 1e-300.
        """
        n_steps = len(self.plan.order)
        down: list[np.ndarray | None] = [None] * n_steps
        marginals = {}
        for s in reversed(range(n_steps)):
            cl = self.plan.clusters[s]
            acc = self.cluster_table(s, down[s])
            shift = float(acc.max())
            shift = shift if np.isfinite(shift) else 0.0
            np.subtract(acc, shift, out=acc)
            np.exp(acc, out=acc)
            m = acc.reshape(acc.shape[0], -1).sum(axis=1)
            marginals[cl[0]] = m / m.sum()
            for c in self.children[s]:
                axes = self.axes(s, self.plan.clusters[c][1:])
                other = tuple(i for i in range(len(cl)) if i not in axes)
                up = self.messages[c]
                with np.errstate(divide="ignore", invalid="ignore"):
                    msg = np.log(acc.sum(axis=other)) + shift - up
                msg[up == -np.inf] = -np.inf
                down[c] = msg
        return marginals

    def sample(self, states: np.ndarray, rng: np.random.Generator) -> None:
        """Fill the free variables of ``states`` (S, n) by sampling backwards (after forward)."""
        size = states.shape[0]
        for s in reversed(range(len(self.plan.order))):
            v = self.plan.order[s]
            logits = np.zeros((int(self.cards[v]), size))
            funcs = list(self.bucket[s])
            funcs += [(self.plan.clusters[c][1:], self.messages[c]) for c in self.children[s]]
            for scope, table in funcs:
                if len(scope) == 1:
                    logits = logits + table[:, None]
                else:
                    logits = logits + table[(slice(None), *(states[:, u] for u in scope[1:]))]
            states[:, v] = np.argmax(logits - np.log(-np.log(rng.random(logits.shape))), axis=0)
