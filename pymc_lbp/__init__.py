"""Locally balanced and informed samplers for discrete variables in PyMC.

Importing the package changes nothing in PyMC; use the step classes in
``pm.sample(step=[...])``, or call :func:`register` to make PyMC pick them automatically.
"""

from pymc_lbp.balancing import BALANCING_FUNCTIONS
from pymc_lbp.neural_proposal import NeuralProposal, ProposalFileError, load_proposal
from pymc_lbp.registry import register, registered, unregister
from pymc_lbp.relax import NotRelaxableError
from pymc_lbp.step_methods import (
    DiscreteStep,
    GibbsWithGradients,
    LocallyBalanced,
    PathAuxiliaryLBP,
    SelfBalancing,
)
from pymc_lbp.step_methods.neural_block import NeuralBlock

__version__ = "0.1.0"

__all__ = [
    "BALANCING_FUNCTIONS",
    "DiscreteStep",
    "GibbsWithGradients",
    "LocallyBalanced",
    "NeuralBlock",
    "NeuralProposal",
    "NotRelaxableError",
    "PathAuxiliaryLBP",
    "ProposalFileError",
    "SelfBalancing",
    "load_proposal",
    "register",
    "registered",
    "unregister",
]
