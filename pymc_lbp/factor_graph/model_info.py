"""How a PyMC model built from a factor graph maps to it: :class:`UAIModelInfo`, which
:func:`pymc_lbp.models.uai.read_uai` attaches to the model it builds (``model.uai_info``), and
:func:`model_info`, which the samplers read it with (they never import the UAI reader).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pymc_lbp.factor_graph.network import UAINetwork


class VariableLocation(NamedTuple):
    """Where a network variable lives in the model.

    ``name`` is the model variable holding it (``""`` when it is fixed and not in the model),
    ``position`` its index in that vector (-1 if none), ``fixed_value`` its evidence value (or 0
    for a cardinality-1 variable; -1 when free), ``observed`` whether ``name`` is an observed
    variable.
    """

    name: str
    position: int
    fixed_value: int
    observed: bool


@dataclass(frozen=True, eq=False)
class UAIModelInfo:
    """How a PyMC model built by :func:`read_uai` maps to its network.

    Attributes
    ----------
    network : UAINetwork
    evidence : dict of int to int
        The evidence the model was built with.
    kind : {"MARKOV", "BAYES"}
        How the model was built.
    names : tuple of str
        Per network variable, the model variable holding it (``""`` if not in the model).
    positions : numpy.ndarray of int
        Per network variable, its index in that model variable (-1 if none).
    fixed_values : numpy.ndarray of int
        Per network variable, its fixed value (evidence, or 0 for cardinality 1); -1 if free.
    members : dict of str to numpy.ndarray
        Per model variable (free and observed), the network indices of its entries.
    free_names : tuple of str
        The free (sampled) model variables.
    logp_offset : float
        ``model logp(x) = network.log_factor_product(x) + logp_offset`` (BAYES: up to the CPT
        row rescaling).
    start : numpy.ndarray of int
        The full state used as the initial values.
    start_source : str
        How the start state was found.
    """

    network: UAINetwork
    evidence: dict[int, int]
    kind: str
    names: tuple[str, ...]
    positions: np.ndarray
    fixed_values: np.ndarray
    members: dict[str, np.ndarray]
    free_names: tuple[str, ...]
    logp_offset: float
    start: np.ndarray
    start_source: str

    def locate(self, variable: int) -> VariableLocation:
        """Where network variable ``variable`` lives in the model."""
        name = self.names[variable]
        return VariableLocation(
            name,
            int(self.positions[variable]),
            int(self.fixed_values[variable]),
            bool(name) and name not in self.free_names,
        )


def model_info(model) -> UAIModelInfo | None:
    """The :class:`UAIModelInfo` of a model built by :func:`~pymc_lbp.models.uai.read_uai`, or
    None for any other model."""
    info = getattr(model, "uai_info", None)
    return info if isinstance(info, UAIModelInfo) else None


__all__ = ["UAIModelInfo", "VariableLocation", "model_info"]
