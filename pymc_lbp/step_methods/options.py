"""Options shared by the step methods under one name."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_compiled(value: Any) -> bool | str:
    """The ``compiled`` option, checked: ``"auto"``, True or False (numpy bools accepted)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, str) and value == "auto":
        return "auto"
    raise ValueError(f"compiled must be 'auto', True or False, got {value!r}")
