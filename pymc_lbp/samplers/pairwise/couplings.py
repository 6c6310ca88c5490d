"""Pairwise binary blocks: exact differences from couplings, updated per flip.

A block of binary sites whose logp terms each touch at most two of its sites (Ising lattices
written any way, Boltzmann machines, pairwise MRFs and Bayesian networks with pairwise factors,
a Bernoulli image with a smoothness ``pm.Potential``) has, given everything else, the logp

    f(x) = c + sum_i b_i x_i + sum_{i<j} W_ij x_i x_j

exactly: any function of two binary values is multilinear of degree at most two, and so is their
sum. The exact one-site differences are ``Delta_i(x) = (1 - 2 x_i) h_i(x)`` with the field
``h = b + W x``; flipping site ``j`` changes the logp by ``Delta_j`` and the fields of ``j``'s
neighbours only, by ``W_ij (1 - 2 x_j)``. A path of ``R`` flips then costs ``O(R * degree)`` for
the new differences instead of an evaluation of the model
(:mod:`pymc_lbp.samplers.pairwise.kernel`).

How the couplings are found
---------------------------
1. **Structure** (:func:`pairwise_structure`): the dependency analysis of
   :mod:`pymc_lbp.logp.local_differences` names the block sites every element of every logp term
   depends on. It is conservative (an element may be reported to depend on more sites than it
   does, never on fewer), so "no element depends on more than two sites, none is global" proves
   the form above. The interaction graph ``A`` (sites sharing an element) is the pattern of
   ``W``.
2. **Values** (:meth:`PairwiseDifferences.extract`): from the model's own exact differences.
   ``h(x) = (1 - 2 x) Delta(x)``; with the sites coloured so that no site has two neighbours of
   one colour (a colouring of ``A^2``), flipping every site of colour ``c`` at once gives, for each
   site ``i``, ``h_i(x^c) - h_i(x) = W_ij (1 - 2 x_j)`` for its one neighbour ``j`` of that
   colour. ``1 + colours`` exact-difference calls give ``b`` and ``W``. Every element is then
   evaluated at all four values of its pair, so finite couplings mean a finite logp everywhere
   (an element that is ``-inf`` somewhere, a hard constraint, makes them non-finite, and the
   block takes the general path).
3. **Checks**: at construction the couplings must reproduce the exact differences at a second,
   random state (else the block takes the general path, and the log says why). ``W`` and ``b``
   depend on the other variables and on ``pm.Data``: their values are compared on every call and
   the couplings extracted again when they changed (next to NUTS, once per draw).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.traversal import graph_inputs

from pymc_lbp.logp.differences import Differences, ExactDifferences
from pymc_lbp.logp.site_colouring import greedy_colouring
from pymc_lbp.logp.site_pieces import site_pieces
from pymc_lbp.samplers.balancing import BALANCING_FUNCTIONS
from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel

CHECK_TOLERANCE = 1e-7
"""Relative tolerance of the construction check of the couplings against exact differences."""


def pairwise_structure(
    model, target: Differences, x0: np.ndarray
) -> tuple[sp.csr_matrix | None, str]:
    """The interaction graph of a pairwise binary block, or None and why not.

    Parameters
    ----------
    model : pymc.Model
    target : Differences
        The block's differences (their graph replacements name the block vector).
    x0 : ndarray
        A state of the block (shapes and constant indices are read from it).

    Returns
    -------
    adjacency : scipy.sparse.csr_matrix or None
        Symmetric (sites x sites) pattern, no diagonal: sites that share an element of a term.
    reason : str
    """
    layout = target.layout
    if not layout.all_binary:
        return None, "the block has non-binary sites"
    if layout.n_sites < 2:
        return None, "a block of one site"
    pieces = site_pieces(model, target._replace, target._x, layout.n_sites, x0)
    if pieces is None:
        return None, "some term couples sites the dependency analysis cannot name"
    incidence = sp.csr_matrix(pieces.element_sites)
    widest = int(np.diff(incidence.indptr).max(initial=0))
    if widest > 2:
        return None, f"a term element depends on {widest} sites of the block (pairwise: at most 2)"
    adjacency = sp.csr_matrix(incidence.T @ incidence)
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    adjacency.data[:] = 1
    return adjacency, f"every term element depends on at most 2 of the {layout.n_sites} sites"


def neighbour_colouring(adjacency: sp.csr_matrix) -> list[np.ndarray]:
    """Classes of sites such that no site has two neighbours in one class (a proper colouring
    of the sites-sharing-a-neighbour graph ``A^2``)."""
    two_step = sp.csr_matrix(adjacency @ adjacency)
    two_step.setdiag(0)
    two_step.eliminate_zeros()
    colours = greedy_colouring(two_step)
    return [np.flatnonzero(colours == c) for c in range(int(colours.max(initial=-1)) + 1)]


class PairwiseDifferences(Differences):
    """Exact differences of a pairwise binary block from its couplings (see the module docs).

    A call costs one model logp evaluation and a sparse product (plus ``1 + colours`` exact
    difference calls when the other variables changed since the last one). The sampling kernels
    of :mod:`pymc_lbp.samplers.pairwise.kernel` read :attr:`couplings` and :meth:`field` directly.
    Everything else (the graph for compiled pytensor kernels, the logp) is that of the exact
    differences it wraps.

    Attributes
    ----------
    exact : ExactDifferences
        The model's exact differences (local or batched).
    usable : bool
        Whether the current couplings are finite (else calls return the exact differences and
        the samplers take their general path).
    n_colours : int
    extractions : int
        Number of extractions so far.
    """

    kind = "exact"
    method = "pairwise"

    def __init__(self, exact: ExactDifferences, adjacency: sp.csr_matrix, reason: str):
        self.exact = exact
        self.layout = exact.layout
        self.specs = exact.specs
        self._compile_kwargs = exact._compile_kwargs
        self._x = exact._x
        self._replace = exact._replace
        self._bounds = None
        self._bounds_fn = None
        self.balancing_name, self.log_g = exact.balancing_name, exact.log_g
        self.grad_evals_per_call = 0
        self._last_evals = 1
        adjacency = sp.csr_matrix(adjacency, dtype=np.float64)
        adjacency.sort_indices()
        self._indptr = adjacency.indptr.astype(np.int64)
        self._indices = adjacency.indices.astype(np.int64)
        self._rows = np.repeat(np.arange(self.layout.n_sites), np.diff(self._indptr))
        self._classes = neighbour_colouring(adjacency)
        self.n_colours = len(self._classes)
        colour = np.empty(self.layout.n_sites, dtype=np.int64)
        for c, members in enumerate(self._classes):
            colour[members] = c
        self._entry_colour = colour[self._indices]  # W_ij is read from the flip of j's colour
        # entry (i, j) -> entry (j, i): the entries sorted by (column, row), the pattern symmetric
        self._transpose = np.lexsort((self._rows, self._indices))
        self._inputs = [
            v for v in graph_inputs([exact._logp_graph]) if isinstance(v, SharedVariable)
        ]
        self._snapshot: list[np.ndarray] | None = None
        self.b = np.zeros(self.layout.n_sites)
        self.data = np.zeros(self._indices.shape[0])
        self.usable = False
        self.extractions = 0
        self.method_reason = (
            f"pairwise binary block ({reason}): exact differences from the couplings, "
            f"{self.n_colours} colours to extract them"
        )

    # -- the couplings ------------------------------------------------------------------------
    @property
    def couplings(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``W`` as ``(indptr, indices, data)`` (symmetric CSR, no diagonal)."""
        return self._indptr, self._indices, self.data

    def _product(self, x: np.ndarray) -> np.ndarray:
        return np.bincount(
            self._rows, weights=self.data * x[self._indices], minlength=self.layout.n_sites
        )

    def field(self, x: np.ndarray) -> np.ndarray:
        """``h = b + W x`` at ``x``."""
        return self.b + self._product(x)

    def extract(self, x: np.ndarray) -> bool:
        """Extract ``b`` and ``W`` at the current values of the other variables, around ``x``
        (a state of finite logp); returns :attr:`usable`."""
        self._snapshot = [np.array(v.get_value(borrow=True), copy=True) for v in self._inputs]
        self.extractions += 1
        exact = self.exact
        self._last_evals = 1
        self.usable = False
        logp_x, deltas_x = exact(x)
        self._last_evals += exact.logp_evals_per_call
        if not (np.isfinite(logp_x) and np.all(np.isfinite(deltas_x))):
            return False
        sign = 1.0 - 2.0 * x
        h_x = sign * deltas_x
        moved = np.empty((self.n_colours, self.layout.n_sites))
        for c, members in enumerate(self._classes):
            y = x.copy()
            y[members] = 1 - y[members]
            self._last_evals += 1
            if not np.isfinite(exact.logp(y)):
                return False
            logp_y, deltas_y = exact(y)
            self._last_evals += exact.logp_evals_per_call
            if not np.all(np.isfinite(deltas_y)):
                return False
            moved[c] = (1.0 - 2.0 * y) * deltas_y - h_x
        data = moved[self._entry_colour, self._rows] * sign[self._indices]
        # W_ij and W_ji came from different flips: their mean, symmetric to the last bit
        self.data = 0.5 * (data + data[self._transpose])
        if not np.all(np.isfinite(self.data)):
            return False
        self.b = h_x - self._product(x)
        self.usable = bool(np.all(np.isfinite(self.b)))
        return self.usable

    def check(self, x: np.ndarray, rng: np.random.Generator) -> str | None:
        """Compare the couplings' differences with the exact ones at a random state near ``x``;
        None when they agree, else what differed."""
        z = x.copy()
        flip = rng.random(z.size) < 0.5
        z[flip] = 1 - z[flip]
        if not np.isfinite(self.exact.logp(z)):
            z = x
        _, exact = self.exact(z)
        ours = (1.0 - 2.0 * z) * self.field(z)
        err = np.abs(ours - exact)
        scale = np.abs(exact) + np.abs(self.b).max(initial=0.0) + 1.0
        if np.all(err <= CHECK_TOLERANCE * scale):
            return None
        return f"the couplings differ from the exact differences by up to {err.max():.3g} nats"

    # -- the Differences interface --------------------------------------------------------------
    @property
    def logp_evals_per_call(self) -> int:  # type: ignore[override]
        """Model evaluations the last call made (one, plus an extraction when it ran)."""
        return self._last_evals

    def refresh(self, x: np.ndarray) -> bool:
        """Extract the couplings again if the other variables or the data changed; returns
        :attr:`usable`."""
        self._last_evals = 1
        if self._snapshot is None or not all(
            np.array_equal(old, v.get_value(borrow=True))
            for old, v in zip(self._snapshot, self._inputs, strict=True)
        ):
            self.extract(x)
        return self.usable

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        if not self.refresh(x):
            logp, deltas = self.exact(x)
            self._last_evals += self.exact.logp_evals_per_call
            return logp, deltas
        logp = self.exact.logp(x)
        if not np.isfinite(logp):  # not reached with finite couplings; the exact answer anyway
            return self.exact(x)
        return logp, (1.0 - 2.0 * x) * self.field(x)

    def graph(self, x):
        """The exact differences' graphs (for compiled pytensor kernels)."""
        return self.exact.graph(x)

    def logp(self, x: np.ndarray) -> float:
        return self.exact.logp(x)

    def refresh_bounds(self, x: np.ndarray) -> None:
        """Binary sites have fixed supports."""


def pairwise_differences(
    model,
    specs,
    layout,
    shared,
    compile_kwargs,
    balancing,
    x0: np.ndarray,
    rng_seed: int = 0,
    learned: bool = False,
) -> tuple[PairwiseDifferences | None, str]:
    """:class:`PairwiseDifferences` for the block, or None and why not (the balancing function
    must be one the kernel implements, or ``learned`` (SelfBalancing's), the block pairwise
    binary, the couplings finite and checked at the start)."""
    if not pairwise_kernel.ENABLED:
        return None, "numba kernels are switched off (PYMC_LBP_NUMBA=0)"
    name, fn = balancing
    if not learned and (
        name not in pairwise_kernel.BALANCING_CODES or fn is not BALANCING_FUNCTIONS[name]
    ):
        return None, f"balancing {name!r} is not one the pairwise kernel implements"
    target = Differences(model, specs, layout, shared)  # graphs only, nothing compiled
    adjacency, reason = pairwise_structure(model, target, x0)
    if adjacency is None:
        return None, reason
    exact = ExactDifferences(model, specs, layout, shared, compile_kwargs, balancing)
    pw = PairwiseDifferences(exact, adjacency, reason)
    if not pw.extract(x0):
        return None, "the couplings at the start are not finite (a hard constraint)"
    problem = pw.check(x0, np.random.default_rng(rng_seed))
    if problem is not None:
        return None, problem
    return pw, pw.method_reason


__all__ = [
    "PairwiseDifferences",
    "neighbour_colouring",
    "pairwise_differences",
    "pairwise_structure",
]
