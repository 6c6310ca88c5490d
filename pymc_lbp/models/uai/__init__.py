"""UAI networks: reading and writing the file family, exact inference, PyMC models.

The network itself (``UAINetwork``), its elimination plans, bucket trees and clusters, and
``UAIModelInfo`` live in :mod:`pymc_lbp.factor_graph`, which the samplers use too; they are
importable from here as well.

Files
-----
errors
    ``UAIFormatError``, ``ImpossibleEvidenceError``, ``TreewidthTooLargeError``,
    ``NetworkTooLargeError``.
io
    Reading and writing ``.uai`` networks; every reader and writer of the family is importable
    from it. On ``tokens`` (token streams with positioned errors), ``evidence_io`` (``.evid``
    evidence) and ``results_io`` (``.MAR``, ``.PR``, ``.MAP``).
exact
    Exact inference: ``exact_inference``, ``exact_marginals``, ``log_partition``,
    ``sample_exact``.
start
    Feasible starting states.
model
    ``read_uai``: PyMC models of UAI networks; ``uai_marginals`` / ``uai_marginal_mcse``.
rao_blackwell
    Rao-Blackwellised marginals (every draw's full conditionals) and their MCSE.
generate
    Synthetic networks (``grid_bn``).
"""

from pathlib import Path

from pymc_lbp.factor_graph.clusters import deterministic_scopes, uai_clusters
from pymc_lbp.factor_graph.network import UAINetwork
from pymc_lbp.models.uai.errors import (
    ImpossibleEvidenceError,
    NetworkTooLargeError,
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
from pymc_lbp.models.uai.generate import grid_bn
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
from pymc_lbp.models.uai.model import (
    UAIModelInfo,
    VariableLocation,
    read_uai,
    uai_marginal_mcse,
    uai_marginals,
    uai_point_from_state,
    uai_state_from_point,
    uai_variable_map,
)
from pymc_lbp.models.uai.rao_blackwell import (
    FullConditionals,
    count_marginals,
    marginal_mcse,
    rao_blackwell_marginals,
)
from pymc_lbp.models.uai.start import (
    check_evidence_locally,
    find_feasible_state,
    forward_sample,
    greedy_repair,
    random_feasible_states,
)

#: The networks shipped with the package (UAI 2006 Bayesian networks, UAI 2008 grid BNs, UAI
#: 2014 MAR tasks, with their evidence and exact marginals; ``networks/README.md`` says where
#: each comes from): ``read_uai(NETWORKS / "uai2006_bn" / "BN_0.uai")``.
NETWORKS = Path(__file__).resolve().parent / "networks"

__all__ = [
    "NETWORKS",
    "EliminationPlan",
    "ExactResult",
    "FullConditionals",
    "ImpossibleEvidenceError",
    "NetworkTooLargeError",
    "TreewidthTooLargeError",
    "UAIFormatError",
    "UAIModelInfo",
    "UAINetwork",
    "VariableLocation",
    "elimination_plan",
    "check_evidence_locally",
    "count_marginals",
    "deterministic_scopes",
    "exact_inference",
    "exact_marginals",
    "find_feasible_state",
    "forward_sample",
    "greedy_repair",
    "grid_bn",
    "log_partition",
    "marginal_mcse",
    "parse_network",
    "random_feasible_states",
    "rao_blackwell_marginals",
    "read_evidence",
    "read_map",
    "read_mar",
    "read_network",
    "read_pr",
    "read_uai",
    "sample_exact",
    "uai_clusters",
    "uai_marginal_mcse",
    "uai_marginals",
    "uai_point_from_state",
    "uai_state_from_point",
    "uai_variable_map",
    "write_evidence",
    "write_map",
    "write_mar",
    "write_network",
    "write_pr",
]
