"""Models: lattices, UAI networks and the benchmark targets of the papers."""

from pymc_lbp.models.uai import (
    ImpossibleEvidenceError,
    TreewidthTooLargeError,
    UAIFormatError,
    UAINetwork,
    exact_marginals,
    log_partition,
    read_evidence,
    read_mar,
    read_network,
    read_pr,
    read_uai,
    uai_marginals,
    uai_state_from_point,
    uai_variable_map,
    write_mar,
)

__all__ = [
    "ImpossibleEvidenceError",
    "TreewidthTooLargeError",
    "UAIFormatError",
    "UAINetwork",
    "exact_marginals",
    "log_partition",
    "read_evidence",
    "read_mar",
    "read_network",
    "read_pr",
    "read_uai",
    "uai_marginals",
    "uai_state_from_point",
    "uai_variable_map",
    "write_mar",
]
