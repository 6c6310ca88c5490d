"""The plan of the local exact differences: the logp and every slot's difference as graphs of the
block (steps 3 and 4 of :mod:`pymc_lbp.logp.local_differences`).

:func:`build_local_plan` analyses the model's terms, colours the site graph, and builds the
moved states (one per colour and move), the segment sum that credits every element's change to
its moved site, and the exact evaluation of global pieces at every neighbour; the result is a
:class:`LocalPlan`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
import scipy.sparse as sp
from pytensor.graph.basic import Variable
from pytensor.graph.replace import clone_replace

from pymc_lbp.logp.dependency_analysis import NotLocalError, analyse_dependencies
from pymc_lbp.logp.graphs import substitute
from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.logp.site_colouring import greedy_colouring
from pymc_lbp.logp.site_pieces import elementwise_checks, linear_pieces
from pymc_lbp.logp.vectorising import one_site_rows


@dataclass
class LocalPlan:
    """Everything the local method needs, as graphs of the block ``x``.

    Attributes
    ----------
    logp : Variable
        The model logp at ``x``.
    deltas : Variable
        Exact differences to every slot's neighbour, ``-inf`` for masked slots and
        zero-probability neighbours.
    n_colours, n_rows : int
        Colours of the site graph and moved states evaluated per call.
    n_local_pieces, n_global_pieces : int
    n_pairs : int
        (slot, element) pairs of the segment sum.
    reason : str
        One line: what was found (for logs).
    """

    x: Variable
    logp: Variable
    deltas: Variable
    n_colours: int
    n_rows: int
    n_local_pieces: int
    n_global_pieces: int
    n_pairs: int
    colours: np.ndarray
    reason: str


def build_local_plan(
    model,
    layout,
    replace: dict,
    x: Variable,
    bounds=None,
    x0: np.ndarray | None = None,
    max_term_sites: int = 32,
    max_rows_fraction: float = 0.5,
    max_global_batch: int = 16_000_000,
) -> LocalPlan:
    """Analyse the model and build the graphs of the local exact differences.

    Parameters
    ----------
    model : pymc.Model
    layout : BlockLayout
    replace : dict
        Replacement of the model's value variables (block slices of ``x``, shared variables).
    x : Variable
        The block, an int64 vector.
    bounds : tuple of Variable, optional
        ``(lower, upper)`` support graphs of every site (integer sites).
    x0 : ndarray, optional
        A probe state (zeros by default); only shapes and constant indices are read from it.
    max_term_sites : int
        Elements depending on more sites are handled as global terms.
    max_rows_fraction : float
        Pieces whose colouring would need more moved states than this fraction of the slots are
        evaluated at every neighbour instead (as global pieces).
    max_global_batch : int
        Global pieces are evaluated at all neighbours in one batch of ``slots x sites`` values;
        refuse (``NotLocalError``) above this size (the batched method works in chunks).

    Raises
    ------
    NotLocalError
        With the reason, when no useful locality was found.
    """
    n_sites = layout.n_sites
    terms = elementwise_checks(clone_replace(model_logp(model, sum=False), replace=replace))
    logp = clone_replace(model_logp(model), replace=replace)
    if x0 is None:
        x0 = np.zeros(n_sites, dtype=np.int64)
    try:
        an = analyse_dependencies(terms, x, n_sites, x0, max_term_sites)
    except NotLocalError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure of the analysis means: no locality
        raise NotLocalError(f"dependency analysis failed ({type(err).__name__}: {err})") from err

    pieces = [p for t in terms for p in linear_pieces(t, an)]
    local, glob = [], []
    for p in pieces:
        d = an.deps.get(p.graph)
        if d is None:
            continue  # free of the block
        if p.graph not in an.shape_static:
            raise NotLocalError(
                f"the shape of a term ({p.graph}) may depend on the block's values, so it "
                "cannot be evaluated at all neighbours at once"
            )
        if d.glob.any():
            glob.append(p)
        else:
            local.append((p, d))
    if not local:
        raise NotLocalError(
            "every term that depends on the block couples more than "
            f"{max_term_sites} sites (or could not be analysed)"
        )

    # elements, their sites, colouring; pieces whose elements couple so many sites that the
    # colouring gains nothing are evaluated at every neighbour instead (widest first)
    per_site = np.diff(np.append(layout.site_offset, layout.n_slots))
    limit = max(2.0, max_rows_fraction * layout.n_slots)
    while True:
        D = sp.vstack([d.rows for _, d in local], format="csr")
        colours = greedy_colouring(sp.csr_matrix(D.T @ D))
        n_colours = int(colours.max()) + 1 if n_sites else 0
        rows, row_of = _moved_rows(colours, per_site)
        if len(rows) <= limit:
            break
        widths = [int(np.diff(d.rows.indptr).max(initial=0)) for _, d in local]
        glob.append(local.pop(int(np.argmax(widths)))[0])
        if not local:
            raise NotLocalError(
                f"the terms couple the sites so densely that {n_colours} colours are needed "
                f"({len(rows)} moved states for {layout.n_slots} neighbours)"
            )
    M = D.shape[0]
    n_rows = len(rows)

    # (slot, row, element) pairs
    Dc = sp.csc_matrix(D)
    p_slot, p_row, p_elem = [], [], []
    for site in range(n_sites):
        es = Dc.indices[Dc.indptr[site] : Dc.indptr[site + 1]]
        for k in range(int(per_site[site])):
            slot = int(layout.site_offset[site]) + k
            p_slot.append(np.full(es.size, slot))
            p_row.append(np.full(es.size, row_of[(int(colours[site]), k)]))
            p_elem.append(es)
    p_slot = np.concatenate(p_slot).astype(np.int64)
    p_row = np.concatenate(p_row).astype(np.int64)
    p_elem = np.concatenate(p_elem).astype(np.int64)

    # graphs
    T = pt.concatenate([p.elements().ravel() for p, _ in local])
    new_value, valid = layout.candidates_graph(x, bounds)
    moved = []
    for c_k, r in sorted(row_of.items(), key=lambda kv: kv[1]):
        sites = rows[r]
        slots = layout.site_offset[sites] + c_k[1]
        keep = valid[slots]
        vals = pt.switch(keep, new_value[slots], x[sites])
        moved.append(pt.set_subtensor(x[sites], vals))
    # one clone of the elements per moved state (a vectorised graph is not faster here)
    # float64 whatever floatX is: differences of float32 terms are exact in float64
    TT = pt.cast(pt.concatenate([T, *[substitute(T, {x: xr}) for xr in moved]]), "float64")
    deltas = _segment_differences(TT, (n_rows + 1) * M, M, p_slot, p_row, p_elem, layout.n_slots)
    if glob and layout.n_slots * n_sites > max_global_batch:
        raise NotLocalError(
            f"{len(glob)} global term piece(s) on a block of {n_sites} sites: evaluating them at "
            f"all {layout.n_slots} neighbours at once exceeds max_global_batch={max_global_batch}"
        )
    if glob:
        G = pt.sum([pt.sum(p.elements()) for p in glob])
        sites_all = pt.as_tensor_variable(layout.slot_site)
        G_batch = one_site_rows(G, x, sites_all, pt.switch(valid, new_value, x[sites_all]))
        deltas = deltas + (pt.cast(G_batch, "float64") - pt.cast(G, "float64"))
    deltas = pt.switch(valid & ~pt.isnan(deltas), deltas, -np.inf)
    reason = (
        f"local exact differences: {len(local)} local and {len(glob)} global term piece(s), "
        f"{n_colours} colour(s), {n_rows} moved state(s) per call for {layout.n_slots} "
        "neighbours"
    )
    return LocalPlan(
        x,
        logp,
        deltas,
        n_colours,
        n_rows,
        len(local),
        len(glob),
        int(p_slot.size),
        colours,
        reason,
    )


def _segment_differences(TT, n_total, M, p_slot, p_row, p_elem, n_slots):
    """``delta[s] = sum over the pairs of slot s of TT[row + 1, e] - TT[0, e]`` (``TT`` the
    raveled ``(rows + 1, M)`` element values, ``n_total`` elements).

    When the pairs per slot are even enough, a padded (slots x width) gather and a row sum
    (no scatter); otherwise a scatter-add.
    """
    new_idx = (p_row + 1) * M + p_elem
    counts = np.bincount(p_slot, minlength=n_slots)
    width = int(counts.max(initial=0))
    if width == 0:
        return pt.zeros(n_slots, dtype="float64")
    if width * n_slots > 2 * p_slot.size + 64:
        return pt.inc_subtensor(
            pt.zeros(n_slots, dtype="float64")[p_slot], TT[new_idx] - TT[p_elem]
        )
    # pairs are grouped by slot; position of each pair within its slot's group
    order = np.argsort(p_slot, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    within = np.arange(p_slot.size) - starts[p_slot[order]]
    new_m = np.full((n_slots, width), n_total, dtype=np.int64)  # n_total: an appended zero
    old_m = np.full((n_slots, width), n_total, dtype=np.int64)
    new_m[p_slot[order], within] = new_idx[order]
    old_m[p_slot[order], within] = p_elem[order]
    TTz = pt.concatenate([TT, pt.zeros(1, dtype="float64")])
    # (width, slots): the row sum runs over contiguous rows
    return pt.sum(TTz[new_m.T.copy()] - TTz[old_m.T.copy()], axis=0)


def _moved_rows(colours, per_site):
    """Moved states: one per colour ``c`` and move ``k``, holding the sites of colour ``c`` that
    have a ``k``-th move; returns ``(rows, row_of)`` with ``row_of[(c, k)]`` the row index."""
    rows, row_of = [], {}
    for c in range(int(colours.max(initial=-1)) + 1):
        sites_c = np.flatnonzero(colours == c)
        for k in range(int(per_site[sites_c].max())):
            row_of[(c, k)] = len(rows)
            rows.append(sites_c[per_site[sites_c] > k])
    return rows, row_of


__all__ = ["LocalPlan", "build_local_plan"]
