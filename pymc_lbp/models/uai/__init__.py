"""UAI networks: reading and writing the file family, exact inference, PyMC models."""

from pymc_lbp.models.uai.errors import (
    ImpossibleEvidenceError,
    TreewidthTooLargeError,
    UAIFormatError,
)
from pymc_lbp.models.uai.exact import (
    EliminationPlan,
    ExactResult,
    elimination_plan,
    exact_inference,
    exact_marginals,
    log_partition,
    sample_exact,
)
from pymc_lbp.models.uai.io import (
    parse_network,
    read_evidence,
    read_map,
    read_mar,
    read_network,
    read_pr,
    write_evidence,
    write_map,
    write_mar,
    write_network,
    write_pr,
)
from pymc_lbp.models.uai.network import UAINetwork

__all__ = [
    "EliminationPlan",
    "ExactResult",
    "ImpossibleEvidenceError",
    "TreewidthTooLargeError",
    "UAIFormatError",
    "UAINetwork",
    "elimination_plan",
    "exact_inference",
    "exact_marginals",
    "log_partition",
    "parse_network",
    "read_evidence",
    "read_map",
    "read_mar",
    "read_network",
    "read_pr",
    "sample_exact",
    "write_evidence",
    "write_map",
    "write_mar",
    "write_network",
    "write_pr",
]
