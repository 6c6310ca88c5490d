"""Options shared by the step methods under one name, and the former names that still work.

Issue #26.4, "one vocabulary": the same idea has the same option name in every sampler. A former
name keeps working for one release with a ``FutureWarning`` that names the new one
(:func:`renamed_option`); passing both is a ``ValueError``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


class Default(str):
    """An option's default value, told apart (by identity) from the same value passed by the
    caller, so that an option given under both its names is refused even when the new name
    holds the default's value. Behaves as the plain string everywhere else."""

    __slots__ = ()


AUTO = Default("auto")
"""The default of ``compiled``."""


def renamed_option(owner: str, new: str, value: Any, old: str, old_value: Any) -> Any:
    """The value of option ``new``, given as ``value`` or under its former name ``old`` (then
    ``old_value`` is not None: a ``FutureWarning`` naming ``new``).

    ``value`` must be a :class:`Default` where the option was not passed; passing both names is
    a ``ValueError``.
    """
    if old_value is None:
        return str(value) if isinstance(value, Default) else value
    if not isinstance(value, Default):
        raise ValueError(
            f"{owner}: {old}= is the former name of {new}=; pass {new}= only, not both"
        )
    warnings.warn(
        f"{owner}({old}=...) is deprecated and will be removed in the next release; use {new}=...",
        FutureWarning,
        stacklevel=3,
    )
    return old_value


def check_compiled(value: Any) -> bool | str:
    """The ``compiled`` option, checked: ``"auto"``, True or False (numpy bools accepted)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, str) and value == "auto":
        return "auto"
    raise ValueError(f"compiled must be 'auto', True or False, got {value!r}")
