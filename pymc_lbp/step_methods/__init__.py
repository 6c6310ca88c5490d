"""The pymc_lbp step methods."""

from pymc_lbp.step_methods.base import DiscreteStep
from pymc_lbp.step_methods.gibbs_with_gradients import GibbsWithGradients
from pymc_lbp.step_methods.locally_balanced import LocallyBalanced
from pymc_lbp.step_methods.path_auxiliary import PathAuxiliaryLBP
from pymc_lbp.step_methods.self_balancing import SelfBalancing

__all__ = [
    "DiscreteStep",
    "GibbsWithGradients",
    "LocallyBalanced",
    "PathAuxiliaryLBP",
    "SelfBalancing",
]
