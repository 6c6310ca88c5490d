"""Locally balanced and informed samplers for discrete variables in PyMC.

Importing the package changes nothing in PyMC; use the step classes in
``pm.sample(step=[...])``, or call :func:`register` to make PyMC pick them automatically.

The public names are imported on first use (PEP 562 module ``__getattr__``), so that
``import pymc_lbp`` and ``python -m pymc_lbp ... --help`` do not pay for importing PyMC,
PyTensor and ArviZ; ``from pymc_lbp import LocallyBalanced`` works as usual.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import TYPE_CHECKING, Any

# our INFO lines (which sampler took which variables, and why) shown as PyMC shows its own:
# a handler of the package's logger where the application configured no logging
_log = logging.getLogger(__name__)
if not logging.root.handlers:
    _log.setLevel(logging.INFO)
    if not _log.handlers:
        _log.addHandler(logging.StreamHandler())

if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from pymc_lbp.logp.relaxed_values import NotRelaxableError
    from pymc_lbp.registry import register, registered, unregister
    from pymc_lbp.samplers.balancing import BALANCING_FUNCTIONS
    from pymc_lbp.samplers.block.motifs.grid_bn import uai_grid_blocks
    from pymc_lbp.samplers.block.neural_proposal import (
        NeuralProposal,
        ProposalFileError,
        load_proposal,
    )
    from pymc_lbp.samplers.block.step import NeuralBlock
    from pymc_lbp.samplers.block.step_block_gibbs import BlockGibbs
    from pymc_lbp.samplers.block.step_mixed import NeuralMixedBlock
    from pymc_lbp.samplers.path.step import PathAuxiliaryLBP
    from pymc_lbp.samplers.self_balancing.step import SelfBalancing
    from pymc_lbp.samplers.single_site.step import GibbsWithGradients, LocallyBalanced
    from pymc_lbp.step_methods import DiscreteStep
    from pymc_lbp.whole_model import NotInProgramError, sample

__version__ = "0.1.0"

#: Public name -> the module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "BALANCING_FUNCTIONS": "pymc_lbp.samplers.balancing",
    "BlockGibbs": "pymc_lbp.samplers.block.step_block_gibbs",
    "DiscreteStep": "pymc_lbp.step_methods",
    "GibbsWithGradients": "pymc_lbp.samplers.single_site.step",
    "LocallyBalanced": "pymc_lbp.samplers.single_site.step",
    "NeuralBlock": "pymc_lbp.samplers.block.step",
    "NeuralMixedBlock": "pymc_lbp.samplers.block.step_mixed",
    "NeuralProposal": "pymc_lbp.samplers.block.neural_proposal",
    "NotRelaxableError": "pymc_lbp.logp.relaxed_values",
    "PathAuxiliaryLBP": "pymc_lbp.samplers.path.step",
    "ProposalFileError": "pymc_lbp.samplers.block.neural_proposal",
    "SelfBalancing": "pymc_lbp.samplers.self_balancing.step",
    "load_proposal": "pymc_lbp.samplers.block.neural_proposal",
    "NotInProgramError": "pymc_lbp.whole_model",
    "register": "pymc_lbp.registry",
    "registered": "pymc_lbp.registry",
    "unregister": "pymc_lbp.registry",
    "sample": "pymc_lbp.whole_model",
    "uai_grid_blocks": "pymc_lbp.samplers.block.motifs.grid_bn",
}

__all__ = [
    "BALANCING_FUNCTIONS",
    "BlockGibbs",
    "DiscreteStep",
    "GibbsWithGradients",
    "LocallyBalanced",
    "NeuralBlock",
    "NeuralMixedBlock",
    "NeuralProposal",
    "NotInProgramError",
    "NotRelaxableError",
    "PathAuxiliaryLBP",
    "ProposalFileError",
    "SelfBalancing",
    "load_proposal",
    "register",
    "registered",
    "sample",
    "uai_grid_blocks",
    "unregister",
]


def __getattr__(name: str) -> Any:
    """Import a public name (or a submodule such as ``pymc_lbp.models``) on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
