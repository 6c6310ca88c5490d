"""The pytensor backends other than C that every sampler is tested under.

Each test parametrized with :data:`OTHER_BACKENDS` builds the same step with the C backend and
with ``compile_kwargs={"mode": backend}`` and checks that both make the same moves from the same
seed. JAX is the optional extra ``jax`` (``make test`` installs it; a bare install skips these
tests and says which extra is missing); numba comes with pytensor.
"""

from __future__ import annotations

import pytest

#: The backends' mode names, as ``compile_kwargs={"mode": ...}`` takes them.
BACKEND_MODES = ("JAX", "NUMBA")
OTHER_BACKENDS = [pytest.param(mode, id=mode.lower()) for mode in BACKEND_MODES]


def require(backend: str) -> None:
    """Skip when the backend's package is absent (jax is the optional extra ``jax``)."""
    package = {"JAX": "jax", "NUMBA": "numba"}[backend]
    pytest.importorskip(package, reason=f"needs {package}: pip install -e '.[jax]'")


def modes(backend: str) -> tuple[None, str]:
    """The reference (C, the default) and the backend under test."""
    require(backend)
    return None, backend
