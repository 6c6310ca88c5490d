"""The step classes' shared shell: :class:`~pymc_lbp.step_methods.base.DiscreteStep` (the PyMC
contract, the draw loop, stats, tune-then-freeze), the stats registry and the step results.
Each algorithm's step class lives in its room, ``pymc_lbp/samplers/<algorithm>/step.py``;
import the classes from :mod:`pymc_lbp`."""

from pymc_lbp.step_methods.base import DiscreteStep

__all__ = ["DiscreteStep"]
