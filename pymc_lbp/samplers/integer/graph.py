"""The informed multiscale integer jump as a pytensor graph, all integer sites in one call.

The moves are those of :mod:`pymc_lbp.samplers.integer.reference` (see there for the proposal
and its exactness), given the same two uniforms per site (offset by inverse CDF, then the MH
coin): :func:`~pymc_lbp.samplers.integer.site_moves.integer_jump` and
:func:`~pymc_lbp.samplers.integer.site_moves.support_gibbs` for one site,
:mod:`pymc_lbp.samplers.integer.class_moves` for a colour class of sites at once.

Here ``J`` is one exponent for the whole block (the largest any integer site needs, up to
:data:`~pymc_lbp.samplers.integer.reference.LARGEST_SCALE_EXPONENT`; on unbounded supports the step
grows it while tuning and compiles the jumps again), not the site's own: an offset larger than
``2^J_site >= width`` always leaves the site's support, so its weight is 0 from every state and
the proposal is the reference's, offset for offset. The support comes from the model's bounds at
the current state (they may depend on other sites of the block, never on the site itself).

:class:`CompiledJumps` runs one jump per jumping site, in the block's order, then one full
conditional draw per support-Gibbs site, inside one compiled call (each group unrolled in the
graph for up to :data:`UNROLL_SITES` sites, a ``scan`` over sites beyond): two batched logp
evaluations of ``|D| + 1`` rows per jumping site, one of the support's size per support-Gibbs
site, and no Python between sites. Given colour classes of sites that share no term of the logp
(Poisson counts given their rate, the abundances of an N-mixture), each class moves at once:
given the rest the sites' moves are independent, so the decisions are those of the
site-after-site moves with the same uniforms, from one or two batched evaluations for the whole
class. It is compiled at the first draw that moves an integer site (and again when tuning grows
``J``); its numpy reference is :func:`pymc_lbp.samplers.integer.reference.block_jumps`, which the
tests compare it with move for move.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pymc_lbp.compiling import pm_compile
from pymc_lbp.samplers.graph_driver import scan_kernel
from pymc_lbp.samplers.integer.class_moves import integer_jumps_at_once, support_gibbs_at_once
from pymc_lbp.samplers.integer.reference import JumpsResult, offsets
from pymc_lbp.samplers.integer.site_moves import (
    BoundsGraph,
    ClassRowsGraph,
    SiteLogpGraph,
    integer_jump,
    support_gibbs,
)
from pymc_lbp.samplers.single_site.graph import GraphBalancing
from pymc_lbp.samplers.traces import clear_traces

UNROLL_SITES = 4
"""Blocks with at most this many integer sites get their jumps unrolled in the graph (no
``scan``, whose per-iteration overhead dominates a single cheap jump); more are a ``scan``."""


MAX_CLASSES = 8
"""Colour classes beyond this many are not worth unrolling: the sites then move one by one."""


def _classes(classes: list[np.ndarray] | None, n: int) -> list[np.ndarray]:
    """The classes as arrays of positions, singletons when None or too many."""
    if classes is None or len(classes) > MAX_CLASSES:
        return [np.array([i], dtype=np.int64) for i in range(n)]
    out = [np.asarray(c, dtype=np.int64) for c in classes if len(c)]
    if np.sort(np.concatenate(out) if out else np.zeros(0, np.int64)).tolist() != list(range(n)):
        raise ValueError("colour classes must partition the sites")
    return out


def move_order(
    sites: np.ndarray,
    gibbs_sites: np.ndarray,
    jump_classes: list[np.ndarray] | None = None,
    gibbs_classes: list[np.ndarray] | None = None,
) -> np.ndarray:
    """Every moved site in the order of the rows of a call's uniforms: the jumping sites, then
    the support-Gibbs sites, each group class by class (one by one without classes)."""
    sites = np.asarray(sites, dtype=np.int64)
    gibbs_sites = np.asarray(gibbs_sites, dtype=np.int64)
    return np.concatenate(
        [sites[c] for c in _classes(jump_classes, sites.size)]
        + [gibbs_sites[c] for c in _classes(gibbs_classes, gibbs_sites.size)]
        + [np.zeros(0, np.int64)]
    ).astype(np.int64)


class CompiledJumps:
    """One move per integer site of a block, compiled into one call: a jump for each jumping
    site, then a full conditional draw for each support-Gibbs site.

    Parameters
    ----------
    sites : array of int
        Positions of the jumping integer sites in the block vector, in the order they jump.
    exponent : int
        ``J`` of the offsets, at least the largest the jumping sites' supports need
        (:func:`pymc_lbp.samplers.integer.reference.scale_exponent`), at most
        :data:`~pymc_lbp.samplers.integer.reference.LARGEST_SCALE_EXPONENT`.
    site_logp : callable
        ``(x, sites, values) -> (logp(x), rows)`` graphs (the batched exact evaluation, e.g.
        :meth:`pymc_lbp.logp.differences.ExactDifferences.site_logp_graph`).
    bounds : callable or None
        ``x -> (lower, upper)`` graphs
        (:meth:`pymc_lbp.logp.differences.Differences.bounds_graph`).
    log_g : callable
        Balancing function in log space, as a graph builder.
    compile_kwargs : dict, optional
        Passed to :func:`pymc.pytensorf.compile`.
    gibbs_sites, gibbs_lower, gibbs_upper : arrays of int, optional
        Positions of the support-Gibbs sites (drawn after the jumps, in this order) and their
        fixed supports.
    jump_classes, gibbs_classes : list of arrays of int, optional
        Colour classes (positions into ``sites`` / ``gibbs_sites``, a partition): sites of a
        class share no term of the logp, so they move at once (:func:`integer_jumps_at_once`,
        :func:`support_gibbs_at_once`: one batched evaluation for the class instead of one per
        site), classes one after another. None (or more than :data:`MAX_CLASSES`): one site
        at a time.
    class_rows : callable, optional
        The logp changes of one-site changes of a class's sites from the logp's elements
        (:meth:`pymc_lbp.logp.site_pieces.SitePieces.class_rows`); default: the batched
        whole-model evaluation of every row.
    n_sites : int, optional
        Length of the block vector. Given, the inputs' shapes are fixed in the graph, which
        the JAX backend needs (it traces shapes as values).
    compile_now : bool
        False: only the graphs are built (:attr:`inputs`, :attr:`outputs`; the JAX program of
        :mod:`pymc_lbp.whole_model` compiles them itself); calling the object then fails.

    Attributes
    ----------
    order : array of int
        Every moved site, in the order of the rows of the uniforms a call takes (class by
        class when classes are given).
    logp_evals_per_call : int
        Model logp evaluations per call: two batches of ``|D| + 1`` rows per jumping site, one
        batch of the largest support's size per support-Gibbs site.
    inputs, outputs : list
        The call as graphs: ``[x, uniforms]`` to ``[x, logp, sum_accept, sum_distance,
        n_accepted]``.
    """

    def __init__(
        self,
        sites: np.ndarray,
        exponent: int,
        site_logp: SiteLogpGraph,
        bounds: BoundsGraph | None,
        log_g: GraphBalancing,
        compile_kwargs: dict | None = None,
        *,
        gibbs_sites: np.ndarray = (),
        gibbs_lower: np.ndarray = (),
        gibbs_upper: np.ndarray = (),
        jump_classes: list[np.ndarray] | None = None,
        gibbs_classes: list[np.ndarray] | None = None,
        class_rows: ClassRowsGraph | None = None,
        n_sites: int | None = None,
        compile_now: bool = True,
    ):
        self.sites = np.asarray(sites, dtype=np.int64)
        self.gibbs_sites = np.asarray(gibbs_sites, dtype=np.int64)
        self.jump_classes = _classes(jump_classes, self.sites.size)
        self.gibbs_classes = _classes(gibbs_classes, self.gibbs_sites.size)
        self.order = move_order(self.sites, self.gibbs_sites, jump_classes, gibbs_classes)
        lower = np.asarray(gibbs_lower, dtype=np.int64)
        upper = np.asarray(gibbs_upper, dtype=np.int64)
        self.n_values = int((upper - lower).max()) + 1 if self.gibbs_sites.size else 0
        self.d = offsets(int(exponent))
        self.logp_evals_per_call = int(
            self.sites.size * 2 * (self.d.size + 1) + self.gibbs_sites.size * self.n_values
        )
        x0 = pt.tensor("x", dtype="int64", shape=(n_sites,))
        n_rows = None if n_sites is None else self.order.size
        uniforms = pt.tensor("uniforms", dtype="float64", shape=(n_rows, 2))
        d = pt.constant(self.d, dtype="int64")
        logp0 = site_logp(x0, pt.zeros((0,), dtype="int64"), pt.zeros((0,), dtype="int64"))[0]

        def kernel(move):
            def step(u, state):
                site, lo, hi, u_site = u
                x, logp, info = move(u_site, *state, site, lo, hi)
                return (x, logp), (info.accept, info.distance, pt.gt(info.distance, 0))

            return step

        def add(carry, state, info):
            return (*state, *(total + part for total, part in zip(carry[2:], info, strict=True)))

        def one_site(step, carry, columns, i, u):
            consts = tuple(pt.constant(v[i], dtype="int64") for v in columns)
            return add(carry, *step((*consts, u), carry[:2]))

        jump_kw = {"d": d, "site_logp": site_logp, "bounds": bounds, "log_g": log_g}
        gibbs_kw = {"n_values": self.n_values, "site_logp": site_logp}

        def jump_move(u, x, logp, site, lo, hi):
            return integer_jump(u, x, logp, site, **jump_kw)

        def gibbs_move(u, x, logp, site, lo, hi):
            return support_gibbs(u, x, logp, site, lo, hi, **gibbs_kw)

        carry = (
            x0,
            pt.cast(logp0, "float64"),
            pt.constant(0.0, dtype="float64"),
            pt.constant(0, dtype="int64"),
            pt.constant(0, dtype="int64"),
        )

        def jumps_at_once(u, x, logp, group, lo, hi):
            return integer_jumps_at_once(u, x, logp, group, **jump_kw, class_rows=class_rows)

        def gibbs_at_once(u, x, logp, group, lo, hi):
            return support_gibbs_at_once(
                u, x, logp, group, lo, hi, **gibbs_kw, class_rows=class_rows
            )

        none = np.zeros(self.sites.size, dtype=np.int64)  # jumps read their bounds from x
        groups = [
            (kernel(jump_move), jumps_at_once, self.sites, none, none, self.jump_classes),
            (kernel(gibbs_move), gibbs_at_once, self.gibbs_sites, lower, upper, self.gibbs_classes),
        ]
        row = 0
        for step, at_once, group, lo, hi, classes in groups:
            if group.size == 0:
                continue
            if len(classes) < group.size:  # colour classes: each moved at once, unrolled
                for cls in classes:
                    u_cls = uniforms[row : row + cls.size]
                    row += cls.size
                    if cls.size == 1:
                        carry = one_site(step, carry, (group, lo, hi), cls[0], u_cls[0])
                        continue
                    x, logp, info, moved = at_once(u_cls, *carry[:2], group[cls], lo[cls], hi[cls])
                    carry = add(carry, (x, logp), (info.accept, info.distance, moved))
                continue
            u_group = uniforms[row : row + group.size]
            row += group.size
            if group.size <= UNROLL_SITES:
                for i in range(group.size):
                    carry = one_site(step, carry, (group, lo, hi), i, u_group[i])
            else:
                seqs = [pt.constant(v, dtype="int64") for v in (group, lo, hi)] + [u_group]
                carry = add(carry, *scan_kernel(step, carry[:2], seqs))
        outs = list(carry)
        clear_traces(outs)
        self.inputs, self.outputs = [x0, uniforms], outs
        self._fn = None
        if compile_now:
            self._fn = pm_compile(
                self.inputs, outs, on_unused_input="ignore", **dict(compile_kwargs or {})
            )
            self._fn.trust_input = True

    def __call__(self, x: np.ndarray, uniforms: np.ndarray) -> JumpsResult:
        """Move every integer site once from ``x``; ``uniforms`` has shape ``(len(order), 2)``
        (rows in :attr:`order`)."""
        x_out, logp, acc, dist, n_acc = self._fn(
            np.ascontiguousarray(x, dtype=np.int64),
            np.ascontiguousarray(uniforms, dtype=np.float64),
        )
        return JumpsResult(np.array(x_out), float(logp), float(acc), int(dist), int(n_acc))


__all__ = ["CompiledJumps", "move_order"]
