"""Opt-in registration of a pymc_lbp sampler as PyMC's automatic choice for discrete variables.

Importing :mod:`pymc_lbp` changes nothing in PyMC. :func:`register` puts one of our step classes
at the front of ``pymc.STEP_METHODS`` and makes its competence IDEAL for the discrete variables it
supports, so ``pm.sample()`` assigns it (PyMC takes the first method of highest competence).
:func:`unregister` undoes this.
"""

from __future__ import annotations

import pymc as pm

from pymc_lbp.step_methods.base import DiscreteStep


def register(step_class: type[DiscreteStep] | None = None) -> type[DiscreteStep]:
    """Make ``pm.sample()`` auto-assign ``step_class`` to supported discrete variables.

    Parameters
    ----------
    step_class : subclass of DiscreteStep, optional
        Defaults to :class:`pymc_lbp.LocallyBalanced`. Any previously registered class is
        unregistered first. :class:`pymc_lbp.NeuralBlock` and :class:`pymc_lbp.NeuralMixedBlock`
        are refused (``ValueError``): they work on the variables of one motif (or of flag-value
        pairs) you choose, which ``pm.sample()``'s variable-by-variable assignment cannot supply.

    Returns
    -------
    type
        The registered class.
    """
    if step_class is None:
        from pymc_lbp.samplers.single_site.step import LocallyBalanced

        step_class = LocallyBalanced
    if isinstance(step_class, type) and not getattr(step_class, "auto_assignable", True):
        raise ValueError(
            f"{step_class.__name__} cannot be registered: pm.sample() builds auto-assigned steps "
            f"from the variables alone, and {step_class.__name__} also needs "
            f"{step_class.auto_assign_needs}. Pass it explicitly: "
            f"pm.sample(step=[{step_class.__name__}(vars, ...)])."
        )
    if not _ours(step_class):
        raise TypeError(f"register() takes a pymc_lbp step class, got {step_class!r}")
    unregister()
    pm.STEP_METHODS.insert(0, step_class)
    step_class._registered = True
    return step_class


def unregister() -> None:
    """Undo :func:`register`: PyMC's own step assignment is restored."""
    for method in list(filter(_ours, pm.STEP_METHODS)):
        pm.STEP_METHODS.remove(method)
        if "_registered" in vars(method):
            del method._registered


def registered() -> type[DiscreteStep] | None:
    """The currently registered class, or ``None``."""
    return next(filter(_ours, pm.STEP_METHODS), None)


def _ours(method) -> bool:
    return isinstance(method, type) and issubclass(method, DiscreteStep)
