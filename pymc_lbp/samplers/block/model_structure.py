"""The structure of a discrete PyMC model that ``BlockGibbs`` builds its default blocks from.

:func:`model_structure` reads, from the model's own graph, what
:func:`~pymc_lbp.factor_graph.clusters.graph_clusters` needs (the algorithm of
:func:`~pymc_lbp.models.uai.uai_clusters`, on any interaction graph):

* **The interaction graph of the step's sites.** Every logp term is read as its elements (a summed
  ``pm.Potential`` as its summands, :func:`pymc_lbp.logp.site_pieces.linear_pieces`), and the
  dependency analysis (:mod:`pymc_lbp.logp.dependency_analysis`) names the sites each element
  reads; two sites interact when one element reads both. The analysis is structural and
  conservative: an element may be said to read a site it does not use (never the reverse). When
  some element reads sites it cannot name (it reads more than 32 sites, or its shape depends on
  the values), or the graph cannot be analysed at all, every pair of sites is taken to interact
  (:attr:`ModelStructure.analysed` is False; the blocks are then consecutive runs of sites up to
  the budget).
* **Must-stay-together scopes.** An element that reads two or more sites is evaluated at every
  joint state of its sites (all its elements with the same sites at once, the other sites at the
  start point, which the element does not read), when that scope has at most
  ``max_scope_states`` joint states. If the element is ``-inf`` (or NaN) at some of them, the
  scope is kept inside one block: a zero-probability table entry (``pm.Categorical("b",
  p=T[a])`` with a zero in ``T``, a Bernoulli whose ``p`` is 0 or 1 for some parent values), a
  ``pm.Potential`` that is ``-inf`` on some joint values (``switch(x0 != x1, 0, -inf)``), a
  parameter check that fails for some values. What is not detected: zeros that appear only at
  other values of variables outside the step (continuous parameters, other steps' variables are
  read at the start point), elements whose sites could not be named (above), and scopes of more
  than ``max_scope_states`` joint states (listed in :attr:`ModelStructure.unchecked`). A scope
  whose ``-inf`` entries only rule out single values of single sites (``p`` with a zero column)
  is kept together all the same, as :func:`~pymc_lbp.models.uai.deterministic_scopes` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from pymc_lbp.compiling import pm_compile
from pymc_lbp.factor_graph.clusters import graph_clusters
from pymc_lbp.logp.site_pieces import site_pieces
from pymc_lbp.logp.vectorising import unblock_gathers
from pymc_lbp.samplers.block.reference import enumerate_block_states

__all__ = ["MAX_SCOPE_STATES", "ModelStructure", "model_structure", "structure_clusters"]

MAX_SCOPE_STATES = 65536
"""Largest scope (joint states of an element's sites) whose element is enumerated to find out
whether it is ever ``-inf``."""

_CHUNK_ENTRIES = 2**22  # rows x elements evaluated at once


@dataclass(frozen=True)
class ModelStructure:
    """The interaction graph, cardinalities and must-stay-together scopes of a step's sites.

    Attributes
    ----------
    cards : tuple of int
        Cardinality of every site (positions in the step's raveled variables).
    adjacency : dict of int to frozenset of int
        The sites each site shares an element of a logp term with (itself excluded).
    scopes : tuple of tuple of int
        Sites of the elements that are ``-inf`` (or NaN) at some of their joint states.
    unchecked : tuple of tuple of int
        Sites of elements with more than ``max_scope_states`` joint states, not enumerated.
    analysed : bool
        Whether the elements' sites were named (False: every pair of sites taken to interact).
    reason : str
        What was found, in words.
    """

    cards: tuple[int, ...]
    adjacency: dict[int, frozenset[int]] = field(repr=False)
    scopes: tuple[tuple[int, ...], ...]
    unchecked: tuple[tuple[int, ...], ...]
    analysed: bool
    reason: str


def model_structure(
    model,
    replace: dict,
    x,
    cards: np.ndarray,
    x0: np.ndarray,
    *,
    max_scope_states: int = MAX_SCOPE_STATES,
    compile_kwargs: dict | None = None,
) -> ModelStructure:
    """The structure of the model's logp in the sites of ``x`` (see the module docstring).

    Parameters
    ----------
    model : pymc.Model
    replace : dict
        The step's replacements of the model's value variables (its sites as slices of ``x``,
        the other variables as shared values), as the step's target has them.
    x : Variable
        The step's int64 site vector.
    cards : ndarray of int
        Cardinality of every site.
    x0 : ndarray of int
        A state of the sites (shapes, constant indices; the sites an element does not read).
    max_scope_states : int
        Largest scope enumerated.
    compile_kwargs : dict, optional
        Passed to the compilation of the elements' graph.

    Returns
    -------
    ModelStructure
    """
    cards = np.asarray(cards, dtype=np.int64)
    n = int(cards.size)
    pieces = site_pieces(model, replace, x, n, np.asarray(x0, dtype=np.int64))
    if pieces is None:
        everyone = frozenset(range(n))
        return ModelStructure(
            tuple(cards.tolist()),
            {v: everyone - {v} for v in range(n)},
            (),
            (),
            False,
            "the model graph could not be analysed into elements with named sites (a term reads "
            "more than 32 sites, or its shape depends on the values): every pair of sites taken "
            "to interact, no must-stay-together scopes looked for",
        )
    inc = pieces.element_sites.tocsr()
    inc.sort_indices()
    scope_elements: dict[tuple[int, ...], list[int]] = {}
    neighbours: list[set[int]] = [set() for _ in range(n)]
    for e in range(inc.shape[0]):
        sites = tuple(int(s) for s in inc.indices[inc.indptr[e] : inc.indptr[e + 1]])
        for s in sites:
            neighbours[s].update(sites)
        if len(sites) > 1:
            scope_elements.setdefault(sites, []).append(e)
    adjacency = {v: frozenset(nb - {v}) for v, nb in enumerate(neighbours)}
    checked, unchecked = [], []
    for scope in sorted(scope_elements):
        size = math.prod(int(cards[s]) for s in scope)
        (checked if size <= max_scope_states else unchecked).append(scope)
    scopes, failed = _impossible_scopes(
        pieces, checked, scope_elements, cards, x0, compile_kwargs or {}
    )
    unchecked += failed
    reason = (
        f"{sum(len(nb) for nb in adjacency.values()) // 2} interacting pairs of sites from "
        f"{inc.shape[0]} logp elements; {len(scopes)} must-stay-together scopes (an element "
        f"that is -inf at some joint values of its sites) among {len(checked)} enumerated"
    )
    if unchecked:
        reason += f"; {len(unchecked)} scopes not enumerated (too many joint states)"
    return ModelStructure(
        tuple(cards.tolist()), adjacency, tuple(scopes), tuple(unchecked), True, reason
    )


def _impossible_scopes(pieces, scopes, scope_elements, cards, x0, compile_kwargs):
    """``(scopes whose elements are -inf or NaN at some joint state, scopes that failed to
    evaluate)``: every scope's elements at all joint states of its sites, in chunks of rows."""
    if not scopes:
        return [], []
    X = pt.matrix("X_scopes", dtype="int64")
    batch = unblock_gathers(vectorize_graph(pieces.elements, replace={pieces.x: X}))
    fn = pm_compile([X], batch, on_unused_input="ignore", **compile_kwargs)
    base = np.asarray(x0, dtype=np.int64)
    chunk_rows = max(1, _CHUNK_ENTRIES // max(1, int(pieces.element_sites.shape[0])))

    def chunks():  # lazily: only one chunk of rows is held at a time
        chunk, n_rows = [], 0
        for scope in scopes:
            states = enumerate_block_states(cards[list(scope)])
            rows = np.repeat(base[None, :], states.shape[0], axis=0)
            rows[:, list(scope)] = states
            if chunk and n_rows + rows.shape[0] > chunk_rows:
                yield chunk
                chunk, n_rows = [], 0
            chunk.append((scope, rows))
            n_rows += rows.shape[0]
        yield chunk

    found, failed = [], []
    for chunk in chunks():
        try:
            values = np.asarray(fn(np.concatenate([r for _, r in chunk])))
        except Exception:  # noqa: BLE001 - a check that raises: these scopes stay unknown
            failed.extend(scope for scope, _ in chunk)
            continue
        start = 0
        for scope, r in chunk:
            part = values[start : start + r.shape[0], scope_elements[scope]]
            start += r.shape[0]
            if np.any(np.isnan(part) | np.isneginf(part)):
                found.append(scope)
    return found, failed


def structure_clusters(structure: ModelStructure, max_states: int) -> list[tuple[int, ...]]:
    """Blocks of sites for exact block Gibbs: :func:`~pymc_lbp.factor_graph.clusters.
    graph_clusters` on the structure (every site in a block, every scope inside one)."""
    return graph_clusters(
        structure.adjacency, structure.cards, structure.scopes, max_states=max_states
    )
