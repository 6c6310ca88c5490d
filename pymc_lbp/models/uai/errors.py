"""Exceptions raised by the UAI subpackage."""

from __future__ import annotations

from pymc_lbp.factor_graph.elimination import TreewidthTooLargeError

__all__ = [
    "ImpossibleEvidenceError",
    "NetworkTooLargeError",
    "TreewidthTooLargeError",
    "UAIFormatError",
]


class UAIFormatError(ValueError):
    """A UAI-family file (network, evidence, MAR, PR, MAP) is malformed.

    The message names the file and the position (line and 1-based token number) of the offending
    field.
    """


class ImpossibleEvidenceError(ValueError):
    """The evidence (or the network itself) has probability zero, or appears to.

    Attributes
    ----------
    definitive : bool
        True when P(evidence) = 0 was established exactly (a factor fully fixed by the evidence
        is zero, or exact elimination gave Z = 0); False when only the search for a state with
        non-zero probability failed.
    """

    def __init__(self, message: str, *, definitive: bool = True) -> None:
        super().__init__(message)
        self.definitive = definitive


class NetworkTooLargeError(MemoryError):
    """A network declares more states (the sum of its variables' cardinalities) than allowed.

    Raised by :func:`~pymc_lbp.models.uai.read_network` with ``max_states`` from the header
    alone, before the factor tables are read.

    Attributes
    ----------
    variable : int
        The variable with the most states.
    cardinality : int
        Its number of states.
    states : int
        The network's states: the sum of the cardinalities.
    """

    def __init__(self, message: str, *, variable: int, cardinality: int, states: int) -> None:
        super().__init__(message)
        self.variable = variable
        self.cardinality = cardinality
        self.states = states
