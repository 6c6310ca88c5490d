"""The package installs clean: an editable install and a wheel build emit no build warnings.

Each test installs the repository into a fresh virtual environment (``--no-deps``: the
dependencies are not what is checked) with pip's own isolated build environment, exactly as the
README's set-up command does, and fails on any warning the build backend raises.
"""

from __future__ import annotations

import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A warning category raised by setuptools or pip while building the package. Index-location
# messages of the machine's pip configuration ("Location ... is ignored") are not build warnings.
BUILD_WARNINGS = ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "SetuptoolsWarning")


def _pip(env_dir: Path, *args: str) -> subprocess.CompletedProcess:
    python = env_dir / "bin" / "python"
    return subprocess.run(
        [str(python), "-m", "pip", *args],
        capture_output=True,
        text=True,
        cwd=env_dir,
        timeout=600,
        check=False,
    )


def _build_warnings(result: subprocess.CompletedProcess) -> list[str]:
    text = result.stdout + result.stderr
    return [line for line in text.splitlines() if any(w in line for w in BUILD_WARNINGS)]


@pytest.mark.slow
@pytest.mark.parametrize("editable", [True, False], ids=["editable", "wheel"])
def test_install_has_no_build_warnings(tmp_path: Path, editable: bool) -> None:
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    # as the Makefile does: a current pip is the one that shows the backend's warnings
    upgrade = _pip(env_dir, "install", "--quiet", "--upgrade", "pip")
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    # a copy of what the build reads, so that the build's own files (build/, *.egg-info) stay out
    # of the working tree
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "pymc_lbp", source / "pymc_lbp", ignore=shutil.ignore_patterns("__pycache__")
    )
    target = ["-e", str(source)] if editable else [str(source)]
    result = _pip(env_dir, "install", "--no-deps", *target)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _build_warnings(result) == [], result.stdout + result.stderr
    # the installed package is the built one, with its data files
    check = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-c",
            "import importlib.util, pathlib; s = importlib.util.find_spec('pymc_lbp'); "
            "d = pathlib.Path(s.origin).parent; "
            "print((d / 'proposals_library' / 'grid-bn.npz').is_file())",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert check.stdout.strip() == "True", check.stdout + check.stderr
