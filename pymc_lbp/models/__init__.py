"""Models: Ising/Potts lattices, the LSB segmentation posterior, UAI networks."""

from pymc_lbp.models.lattice import (
    LSB_CASES,
    ising_log_density,
    ising_model,
    lattice_edges,
    magnetisation,
    potts_model,
    segmentation_field,
    segmentation_model,
)
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
    uai_marginal_mcse,
    uai_marginals,
    uai_state_from_point,
    uai_variable_map,
    write_mar,
)

__all__ = [
    "LSB_CASES",
    "ImpossibleEvidenceError",
    "TreewidthTooLargeError",
    "UAIFormatError",
    "UAINetwork",
    "exact_marginals",
    "ising_log_density",
    "ising_model",
    "lattice_edges",
    "log_partition",
    "magnetisation",
    "potts_model",
    "read_evidence",
    "read_mar",
    "read_network",
    "read_pr",
    "read_uai",
    "segmentation_field",
    "segmentation_model",
    "uai_marginal_mcse",
    "uai_marginals",
    "uai_state_from_point",
    "uai_variable_map",
    "write_mar",
]


def __getattr__(name: str):
    """Old home of ``uai_grid_blocks`` (until 2026-11-26): it builds NeuralBlock's blocks, so it
    lives with them now (``pymc_lbp.uai_grid_blocks``); kept here one release with a warning."""
    if name == "uai_grid_blocks":
        import warnings

        from pymc_lbp.samplers.block.motifs.grid_bn import uai_grid_blocks

        warnings.warn(
            "pymc_lbp.models.uai_grid_blocks moved: import it as pymc_lbp.uai_grid_blocks",
            FutureWarning,
            stacklevel=2,
        )
        return uai_grid_blocks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
