"""Models: Ising/Potts lattices, the LSB segmentation posterior, and the papers' targets."""

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

__all__ = [
    "LSB_CASES",
    "ising_log_density",
    "ising_model",
    "lattice_edges",
    "magnetisation",
    "potts_model",
    "segmentation_field",
    "segmentation_model",
]
