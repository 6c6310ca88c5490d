"""The package installs clean: an editable install and a wheel build emit no build warnings,
and the installed wheel works outside the repository with its data files.

Each test installs the repository into a fresh virtual environment (``--no-deps``: the
dependencies are not what is checked) with pip's own isolated build environment, exactly as the
README's set-up command does, and fails on any warning the build backend raises.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import pymc_lbp

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
            "print((d / 'samplers' / 'block' / 'library' / 'grid-bn.npz').is_file())",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert check.stdout.strip() == "True", check.stdout + check.stderr
    if not editable:
        _use_the_installed_wheel(env_dir, tmp_path)


#: Run by the wheel's environment from outside the repository: the package it imports is the
#: installed wheel, whose version, shipped proposal and shipped UAI network are used, and a short
#: ``pymc_lbp.sample`` runs on the network's model.
USE_THE_WHEEL = """
import importlib.metadata, sys
import numpy as np
import pymc_lbp
from pymc_lbp import load_proposal
from pymc_lbp.models.uai import (
    NETWORKS, exact_marginals, read_network, read_uai, uai_marginal_mcse, uai_marginals
)

assert pymc_lbp.__file__.startswith(sys.prefix), pymc_lbp.__file__
assert importlib.metadata.version("pymc_lbp") == pymc_lbp.__version__
proposal = load_proposal("grid-bn")
network_file = NETWORKS / "uai2014_mar" / "DBN_11.small.uai"
model = read_uai(network_file)
idata = pymc_lbp.sample(300, tune=100, chains=1, model=model, random_seed=1, progressbar=False)
sampled, mcse = uai_marginals(idata, model), uai_marginal_mcse(idata, model)
exact = exact_marginals(read_network(network_file))
# the largest error in MCSE units (an MCSE floored at 1e-3: a marginal estimated exactly)
z = max(
    float(np.max(np.abs(s - e) / np.maximum(m, 1e-3)))
    for s, e, m in zip(sampled, exact, mcse, strict=True)
)
print(pymc_lbp.__version__, type(proposal).__name__, len(exact), round(z, 2))
"""


def _use_the_installed_wheel(env_dir: Path, tmp_path: Path) -> None:
    """Import the installed wheel from outside the repository and use its data files.

    The wheel's environment sees this environment's dependencies (PyMC, JAX, ...) through a
    ``.pth`` line, but not the repository: a path line's own ``.pth`` files (the editable
    install's) are not processed, and the run's folder is a temporary one.
    """
    dependencies = [p for p in sys.path if p.endswith("site-packages")]
    (site_packages,) = (env_dir / "lib").glob("python*/site-packages")
    (site_packages / "dependencies.pth").write_text("\n".join(dependencies) + "\n")
    script = tmp_path / "use_the_wheel.py"
    script.write_text(USE_THE_WHEEL)
    run = subprocess.run(
        [str(env_dir / "bin" / "python"), str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    version, proposal, n_vars, z = run.stdout.split()[-4:]
    assert version == pymc_lbp.__version__
    assert proposal == "NeuralProposal" and int(n_vars) == 4
    # the network's 4 marginals from 300 draws, each within 5 of its MCSE of the exact one
    assert float(z) < 5, run.stdout + run.stderr


def _folder(module: str) -> str | None:
    """The node of a ``pymc_lbp`` module in the import graph: for an algorithm's room
    ``samplers/<algorithm>/``, ``samplers.<algorithm>.step`` for its step classes (``step*.py``,
    the layer above the shell ``step_methods/``) and ``samplers.<algorithm>`` for the rest (its
    kernels, references and adaptation, below the shell); else the first package level (a
    top-level module such as ``pymc_lbp.compiling`` is its own node); ``None`` for the package
    itself."""
    parts = module.split(".")
    if parts[0] != "pymc_lbp" or len(parts) < 2:
        return None
    if (
        parts[1] == "samplers"
        and len(parts) > 2
        and (ROOT / "pymc_lbp" / "samplers" / parts[2]).is_dir()
    ):
        step_layer = len(parts) > 3 and parts[3].startswith("step")
        return f"samplers.{parts[2]}" + (".step" if step_layer else "")
    return parts[1]


def _is_module(module: str) -> bool:
    """Whether the dotted name ``module`` is a module or package of the source tree."""
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported_modules(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The ``pymc_lbp`` modules an import statement of ``module`` imports, in every form:
    ``import pymc_lbp.a.b``; ``from pymc_lbp.a import b`` (``pymc_lbp.a.b`` where ``b`` is a
    module, else ``pymc_lbp.a``); ``from pymc_lbp import compiling``; and relative imports
    (``from . import x``, ``from .x import y``). Other statements import none."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("pymc_lbp.")]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative to the module's package, one level up per further dot
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    if base != "pymc_lbp" and not base.startswith("pymc_lbp."):
        return []
    return [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]


def test_imported_modules_reads_every_import_form():
    cases = {
        "import pymc_lbp.logp.layout": ["pymc_lbp.logp.layout"],
        "from pymc_lbp.logp import layout, layout as other": ["pymc_lbp.logp.layout"] * 2,
        "from pymc_lbp.logp.layout import BlockLayout": ["pymc_lbp.logp.layout"],
        "from pymc_lbp import compiling": ["pymc_lbp.compiling"],
        "from pymc_lbp import LocallyBalanced": ["pymc_lbp"],
        "from . import local_plan": ["pymc_lbp.logp.local_plan"],
        "from .layout import BlockLayout": ["pymc_lbp.logp.layout"],
        "from .. import compiling": ["pymc_lbp.compiling"],
        "from ..samplers.block import jax_steps": ["pymc_lbp.samplers.block.jax_steps"],
        "import numpy, pymc_lbp": [],
        "from numpy import ndarray": [],
    }
    for source, expected in cases.items():
        (node,) = ast.parse(source).body
        assert _imported_modules("pymc_lbp.logp.differences", False, node) == expected, source
    (node,) = ast.parse("from . import differences").body
    assert _imported_modules("pymc_lbp.logp", True, node) == ["pymc_lbp.logp.differences"]


def _import_graph(node_of) -> dict[str, set[str]]:
    """Who imports whom among ``pymc_lbp``'s modules, each module mapped to its node by
    ``node_of`` (``None``: left out), counting imports inside functions too. The package's
    ``__init__.py`` and ``__main__.py`` (lazy-name loaders) are exempt as sources."""
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "pymc_lbp").rglob("*.py"):
        parts = path.relative_to(ROOT / "pymc_lbp").with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(("pymc_lbp", *(parts[:-1] if is_package else parts)))
        src = node_of(module)
        if src in (None, "__main__", "pymc_lbp.__main__"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            for target in _imported_modules(module, is_package, node):
                dst = node_of(target)
                if dst and dst != src:
                    graph.setdefault(src, set()).add(dst)
    return graph


def _in_cycles(graph: dict[str, set[str]]) -> list[str]:
    """The nodes of ``graph`` on a cycle of any length."""

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    return sorted(f for f in graph if reaches(f, f, {f}))


def test_no_import_cycles_between_folders():
    """docs/architecture.md: imports go one way between folders and top-level modules (each
    ``pymc_lbp/<module>.py`` its own node; no cycle of any length)."""
    graph = _import_graph(_folder)
    cycles = _in_cycles(graph)
    assert cycles == [], (
        f"folders or top-level modules in an import cycle: {cycles}; graph: {graph}"
    )


def test_the_samplers_import_no_file_reader_or_command_line():
    """Issue #56: the UAI files (``models``) and the command line (``cli``) are a layer above
    the samplers: nothing in ``samplers/``, ``step_methods/``, ``logp/`` or ``factor_graph/``
    (the factor graphs and their algorithms, which both use) imports them, in any import form."""
    graph = _import_graph(_folder)
    below = ("samplers", "step_methods", "logp", "factor_graph")
    reads = {
        src: sorted(dst for dst in dsts if dst in ("models", "cli"))
        for src, dsts in graph.items()
        if src.split(".")[0] in below
    }
    assert {src: dsts for src, dsts in reads.items() if dsts} == {}


def test_no_import_cycles_between_modules():
    """Nor between the modules of one folder (a package's ``__init__.py`` is the package's
    node: ``pymc_lbp.cli`` importing ``pymc_lbp.cli.batch``, which imports ``pymc_lbp.cli``,
    is a cycle)."""
    graph = _import_graph(lambda m: None if m == "pymc_lbp" else m)
    cycles = _in_cycles(graph)
    assert cycles == [], f"modules in an import cycle: {cycles}"


def test_the_api_reference_lists_every_public_name():
    """docs/api.md's autosummary lists hold every name the package and its models export."""
    import pymc_lbp
    import pymc_lbp.models
    import pymc_lbp.models.uai

    listed = {
        line.strip()
        for line in (ROOT / "docs" / "api.md").read_text().splitlines()
        if line.startswith("   ") and not line.strip().startswith(":")
    }
    public = {*pymc_lbp.__all__, *pymc_lbp.models.__all__, *pymc_lbp.models.uai.__all__}
    assert sorted(public - listed) == []
