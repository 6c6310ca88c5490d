"""Whole-model compiled sampling: :func:`sample` (discrete steps and BlackJAX's NUTS in one JAX
program, chains vectorised). Needs the optional extra ``pymc_lbp[jax]``."""

from pymc_lbp.whole_model.discrete_blocks import NotInProgramError
from pymc_lbp.whole_model.sampling import assign_steps, sample

__all__ = ["NotInProgramError", "assign_steps", "sample"]
