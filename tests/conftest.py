"""Shared test configuration."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")


@pytest.fixture(scope="session")
def uai_dir() -> Path:
    """The shared UAI networks (../shared/data/uai next to the repository)."""
    path = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "uai"
    if not path.is_dir():
        pytest.skip(f"shared UAI data not found at {path}")
    return path
