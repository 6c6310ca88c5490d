"""The in-memory form of a UAI network and small structural helpers.

A network has ``n`` discrete variables ``0 .. n-1`` with cardinalities ``cards`` and ``m``
factors. Factor ``f`` has the scope ``scopes[f]`` (variable indices in FILE order, never sorted)
and the non-negative table ``tables[f]`` of shape ``cards[scopes[f]]`` in C order, i.e. the last
scope variable varies fastest, exactly as the numbers are written in the file. The unnormalised
measure of a full assignment ``x`` is ``prod_f tables[f][x[scopes[f]]]``. In a ``BAYES`` network
every factor is the conditional probability table of its LAST scope variable (the child) given
the others (the parents).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

__all__ = ["NETWORK_KINDS", "UAINetwork", "check_evidence", "reduce_factors", "zero_factor"]

NETWORK_KINDS = ("MARKOV", "BAYES")


@dataclass(frozen=True, eq=False)
class UAINetwork:
    """A discrete graphical model in UAI form.

    Parameters
    ----------
    kind : {"MARKOV", "BAYES"}
        The network type as declared (``BAYES``: every factor is the CPT of its last variable).
    cards : array_like of int, shape (n,)
        Cardinality of every variable (>= 1).
    scopes : list of tuple of int
        Scope of every factor, in file order.
    tables : list of numpy.ndarray
        Factor tables; ``tables[f].shape == tuple(cards[scopes[f]])``, C order.
    path : pathlib.Path or None
        The file the network was read from, if any.
    """

    kind: str
    cards: np.ndarray
    scopes: list[tuple[int, ...]]
    tables: list[np.ndarray]
    path: Path | None = field(default=None)

    def __post_init__(self) -> None:
        if self.kind not in NETWORK_KINDS:
            raise ValueError(f"unknown network kind {self.kind!r}; expected MARKOV or BAYES")
        cards = np.asarray(self.cards, dtype=np.int64)
        if cards.ndim != 1 or np.any(cards < 1):
            raise ValueError("cards must be a 1-d array of integers >= 1")
        object.__setattr__(self, "cards", cards)
        scopes = [tuple(int(v) for v in s) for s in self.scopes]
        object.__setattr__(self, "scopes", scopes)
        if len(self.tables) != len(scopes):
            raise ValueError(f"{len(scopes)} scopes but {len(self.tables)} tables")
        card_list = cards.tolist()
        n = len(card_list)
        tables = []
        for f, (scope, table) in enumerate(zip(scopes, self.tables, strict=True)):
            if len(set(scope)) != len(scope):
                raise ValueError(f"factor {f}: repeated variable in scope {scope}")
            if scope and (min(scope) < 0 or max(scope) >= n):
                raise ValueError(f"factor {f}: scope {scope} has a variable outside 0..n-1")
            table = np.asarray(table, dtype=np.float64)
            shape = tuple(card_list[v] for v in scope)
            if table.shape != shape:
                raise ValueError(
                    f"factor {f}: table shape {table.shape} != cardinalities {shape} of scope "
                    f"{scope}"
                )
            tables.append(table)
        object.__setattr__(self, "tables", tables)
        if self.path is not None:
            object.__setattr__(self, "path", Path(self.path))

    @property
    def n_vars(self) -> int:
        """Number of variables."""
        return int(self.cards.size)

    @property
    def n_factors(self) -> int:
        """Number of factors."""
        return len(self.scopes)

    @property
    def name(self) -> str:
        """File name without directories (or ``"<network>"`` when not read from a file)."""
        return self.path.name if self.path is not None else "<network>"

    @cached_property
    def log_tables(self) -> list[np.ndarray]:
        """Natural-log factor tables; zero entries are ``-inf``."""
        with np.errstate(divide="ignore"):
            return [np.log(t) for t in self.tables]

    @cached_property
    def factors_of_variable(self) -> list[list[int]]:
        """For every variable, the indices of the factors whose scope contains it."""
        out: list[list[int]] = [[] for _ in range(self.n_vars)]
        for f, scope in enumerate(self.scopes):
            for v in scope:
                out[v].append(f)
        return out

    def log_factor_product(self, states: np.ndarray) -> np.ndarray:
        """Sum of log factor entries, ``sum_f log tables[f][x[scope_f]]``, for full assignments.

        Parameters
        ----------
        states : array_like of int, shape (..., n)
            Full assignments.

        Returns
        -------
        numpy.ndarray, shape (...)
            Log of the unnormalised measure (``-inf`` where some factor is zero).
        """
        states = np.asarray(states, dtype=np.int64)
        self.check_states(states)
        total = np.zeros(states.shape[:-1])
        for scope, log_table in zip(self.scopes, self.log_tables, strict=True):
            total = total + log_table[tuple(states[..., v] for v in scope)]
        return total

    def check_states(self, states: np.ndarray) -> None:
        """Raise ``ValueError`` unless ``states`` (shape (..., n)) are valid assignments."""
        states = np.asarray(states)
        if states.shape[-1:] != (self.n_vars,):
            raise ValueError(
                f"{self.name}: a state needs {self.n_vars} values, got shape {states.shape}"
            )
        if states.size and (np.any(states < 0) or np.any(states >= self.cards)):
            bad = np.argwhere((states < 0) | (states >= self.cards))[0]
            raise ValueError(
                f"{self.name}: value {states[tuple(bad)]} of variable {bad[-1]} is outside "
                f"0..{self.cards[bad[-1]] - 1}"
            )

    # ------------------------------------------------------------------ Bayesian structure
    def cpt_children(self) -> np.ndarray:
        """The child (last scope variable) of every factor, checked to form a Bayesian network.

        Returns
        -------
        numpy.ndarray of int, shape (m,)
            ``children[f]`` is the last variable of factor ``f``'s scope.

        Raises
        ------
        ValueError
            If a factor has an empty scope, a variable is the child of no factor or of several,
            or the parent graph has a cycle.
        """
        where = f"{self.name}: not a Bayesian network"
        empty = [f for f, s in enumerate(self.scopes) if not s]
        if empty:
            raise ValueError(f"{where}: factor {empty[0]} has an empty scope (no child)")
        children = np.array([s[-1] for s in self.scopes], dtype=np.int64)
        counts = np.bincount(children, minlength=self.n_vars)
        if np.any(counts != 1):
            v = int(np.flatnonzero(counts != 1)[0])
            raise ValueError(
                f"{where}: variable {v} is the last (child) variable of {counts[v]} factors; "
                "each variable needs exactly one CPT"
            )
        self.topological_layers()  # raises on cycles
        return children

    def normalised_cpts(self, atol: float = 1e-4) -> UAINetwork:
        """The network with every CPT row rescaled to sum to exactly 1, after checking it.

        The one check of a Bayesian-network reading of the tables, used by both the sampled
        (:func:`~pymc_lbp.models.uai.read_uai` with ``kind="BAYES"``) and the exact paths.

        Parameters
        ----------
        atol : float, default 1e-4
            Allowed deviation of a row sum from 1 (finite, >= 0).

        Returns
        -------
        UAINetwork
            ``kind="BAYES"``, same scopes and path, the tables divided by their row sums.

        Raises
        ------
        ValueError
            The factors do not form a Bayesian network (see :meth:`cpt_children`), or a CPT row
            does not sum to 1 within ``atol`` (the message names the factor, the child, the
            parent values of the row and its sum).
        """
        if isinstance(atol, bool) or not np.isfinite(atol) or atol < 0:
            raise ValueError(f"cpt_atol must be a finite number >= 0, got {atol!r}")
        children = self.cpt_children()
        tables = []
        for f, v in enumerate(children.tolist()):
            sums = self.tables[f].sum(axis=-1, keepdims=True)
            dev = np.abs(sums - 1.0)
            if dev.size and dev.max() > atol:
                row = np.unravel_index(int(np.argmax(dev)), sums.shape[:-1])
                raise ValueError(
                    f"{self.name}: factor {f} is not a conditional distribution of variable {v}:"
                    f" the row for parents {self.scopes[f][:-1]} = {tuple(int(r) for r in row)}"
                    f" sums to {float(sums[row][0])!r} (cpt_atol={atol}); build it with "
                    "kind='MARKOV'"
                )
            tables.append(self.tables[f] / sums)
        return UAINetwork("BAYES", self.cards, self.scopes, tables, path=self.path)

    def parents(self) -> list[tuple[int, ...]]:
        """Parents of every variable (the other variables of its CPT, in file order)."""
        out: list[tuple[int, ...]] = [() for _ in range(self.n_vars)]
        for scope in self.scopes:
            if scope:
                out[scope[-1]] = scope[:-1]
        return out

    def topological_layers(self) -> np.ndarray:
        """Layer of every variable: 0 for roots, else 1 + the largest layer of its parents.

        Raises
        ------
        ValueError
            If the parent graph (last scope variable = child) has a directed cycle.
        """
        parents = self.parents()
        n = self.n_vars
        children: list[list[int]] = [[] for _ in range(n)]
        missing = np.zeros(n, dtype=np.int64)
        for v, ps in enumerate(parents):
            missing[v] = len(ps)
            for u in ps:
                children[u].append(v)
        layer = np.zeros(n, dtype=np.int64)
        ready = [v for v in range(n) if missing[v] == 0]
        done = 0
        while ready:
            u = ready.pop()
            done += 1
            for v in children[u]:
                layer[v] = max(layer[v], layer[u] + 1)
                missing[v] -= 1
                if missing[v] == 0:
                    ready.append(v)
        if done != n:
            cyc = int(np.flatnonzero(missing > 0)[0])
            raise ValueError(
                f"{self.name}: not a Bayesian network: the parent graph has a directed cycle "
                f"(through variable {cyc})"
            )
        return layer


def check_evidence(source: Mapping[int, int] | None, network: UAINetwork) -> dict[int, int]:
    """Evidence ``{variable: value}`` checked against ``network`` and sorted by variable (None:
    none); a ``ValueError`` names a variable or a value out of range. (Evidence files are read
    by :func:`pymc_lbp.models.uai.read_evidence`.)"""
    if source is None:
        return {}
    evidence = {}
    for v, x in source.items():
        if int(v) != v or not 0 <= int(v) < network.n_vars:
            raise ValueError(
                f"{network.name}: evidence variable {v!r} is not in 0..{network.n_vars - 1}"
            )
        card = int(network.cards[int(v)])
        if int(x) != x or not 0 <= int(x) < card:
            raise ValueError(
                f"{network.name}: evidence value {x!r} of variable {v} is outside 0..{card - 1}"
            )
        evidence[int(v)] = int(x)
    return dict(sorted(evidence.items()))


def reduce_factors(
    network: UAINetwork, evidence: Mapping[int, int]
) -> tuple[list[tuple[tuple[int, ...], np.ndarray]], float]:
    """Condition the log factors on evidence.

    Parameters
    ----------
    network : UAINetwork
    evidence : mapping of int to int
        Fixed variables and their values (assumed valid).

    Returns
    -------
    factors : list of (scope, log_table)
        One entry per factor that still has a free variable; the scope keeps file order minus
        the evidence variables.
    log_constant : float
        Sum of the log values of the factors whose whole scope is fixed (``-inf`` if one is
        zero).
    """
    factors = []
    log_constant = 0.0
    for scope, log_table in zip(network.scopes, network.log_tables, strict=True):
        index = tuple(evidence.get(v, slice(None)) for v in scope)
        reduced = log_table[index]
        free = tuple(v for v in scope if v not in evidence)
        if free:
            factors.append((free, reduced))
        else:
            log_constant += float(reduced)
    return factors, log_constant


def zero_factor(
    network: UAINetwork, evidence: Mapping[int, int]
) -> tuple[int, tuple[int, ...]] | None:
    """The first factor that alone rules the evidence out, if any (``network`` and ``evidence``
    as :func:`reduce_factors` takes them).

    Returns
    -------
    (factor, fixed) or None
        ``factor`` is zero for every value of its free variables at the evidence values of its
        variables ``fixed`` (in scope order; empty when the factor is zero everywhere); None
        when every factor has a non-zero entry that agrees with the evidence.
    """
    for f, (scope, table) in enumerate(zip(network.scopes, network.tables, strict=True)):
        reduced = table[tuple(evidence.get(v, slice(None)) for v in scope)]
        if not np.any(reduced > 0):
            return f, tuple(v for v in scope if v in evidence)
    return None
