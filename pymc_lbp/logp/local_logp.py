"""Factor-local log-probability differences for models built by :func:`~pymc_lbp.models.read_uai`.

A block move changes only the factors whose scope meets the block, so its log-probability
difference is a sum over those factors. For a UAI model that is a handful of table look-ups, in
numpy, instead of one evaluation of the whole compiled model logp (whose gathers from stacked
tables run as Python ops in pytensor's C backend). The tables are exactly the model's: for
``BAYES`` networks the CPTs rescaled to rows summing to 1 (as :func:`read_uai` does), for
``MARKOV`` networks the factor tables, zeros as ``-inf``. :class:`~pymc_lbp.NeuralBlock` checks
at construction that these differences equal the compiled model's on random moves, and uses the
compiled model logp otherwise.

States are vectors ``z`` that hold a value for every network variable at a known position
(``positions[v]``): the step's own sites first, then other steps' variables and fixed values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FactorLogp", "FactorSubset"]


@dataclass(frozen=True)
class FactorSubset:
    """The factors whose scope meets a set of sites, ready for vectorised look-ups."""

    offsets: np.ndarray  # (F,) start of every factor's table in the flat table array
    positions: np.ndarray  # (F, R) position in z of every scope variable (padded with 0)
    strides: np.ndarray  # (F, R) C-order stride of every scope variable (0 for padding)


class FactorLogp:
    """Sums of log factor values over the factors of a UAI model that meet given sites.

    Parameters
    ----------
    network : UAINetwork
    kind : {"BAYES", "MARKOV"}
        How the model was built (``model.uai_info.kind``).
    positions : ndarray of int, shape (n_vars,)
        Position of every network variable in the state vectors ``z``.
    """

    def __init__(self, network, kind: str, positions: np.ndarray):
        self.positions = np.asarray(positions, dtype=np.int64)
        tables = []
        for table in network.tables:
            if kind == "BAYES" and table.ndim:
                sums = table.sum(axis=-1, keepdims=True)
                with np.errstate(invalid="ignore", divide="ignore"):
                    table = np.where(sums > 0, table / sums, 0.0)
            with np.errstate(divide="ignore"):
                tables.append(np.log(np.asarray(table, dtype=np.float64)))
        self.flat = np.concatenate([t.ravel() for t in tables]) if tables else np.zeros(0)
        sizes = np.array([t.size for t in tables], dtype=np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        width = max((len(s) for s in network.scopes), default=0)
        self.scope_pos = np.zeros((network.n_factors, max(width, 1)), dtype=np.int64)
        self.scope_stride = np.zeros_like(self.scope_pos)
        for f, (scope, table) in enumerate(zip(network.scopes, tables, strict=True)):
            if scope:
                strides = np.array(table.strides, dtype=np.int64) // table.itemsize
                self.scope_pos[f, : len(scope)] = self.positions[list(scope)]
                self.scope_stride[f, : len(scope)] = strides
        self.factors_of_variable = network.factors_of_variable

    def subset(self, variables) -> FactorSubset:
        """The factors that involve any of the network ``variables``."""
        fs = sorted({f for v in variables for f in self.factors_of_variable[int(v)]})
        fs = np.array(fs, dtype=np.int64)
        return FactorSubset(self.offsets[fs], self.scope_pos[fs], self.scope_stride[fs])

    def log_value(self, subset: FactorSubset, z: np.ndarray) -> np.ndarray:
        """``sum_f log f(z)`` over the subset's factors, for one state ``z`` (n_z,) or many
        (S, n_z); ``-inf`` where a factor is zero."""
        z = np.asarray(z, dtype=np.int64)
        idx = subset.offsets + (z[..., subset.positions] * subset.strides).sum(axis=-1)
        return self.flat[idx].sum(axis=-1)
