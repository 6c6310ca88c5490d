"""Intersphinx targets, with an offline fallback for each.

Each project's inventory is read from its site first; where the site cannot be reached (a build
machine without internet) Sphinx reads the small inventory written here instead, which holds the
names our docstrings' types and pages use most, at their addresses on the same site. An offline
build then still links them, and no build fails for want of a network.
"""

from __future__ import annotations

import zlib
from pathlib import Path

#: project -> (its documentation's root, {name: (domain:role, page relative to the root)}); the
#: glossary terms and label are those numpydoc's type cross-references point to
TARGETS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "numpy": (
        "https://numpy.org/doc/stable/",
        {
            "numpy.ndarray": ("py:class", "reference/generated/numpy.ndarray.html"),
            "numpy.random.Generator": (
                "py:class",
                "reference/random/generator.html#numpy.random.Generator",
            ),
            "numpy.dtype": ("py:class", "reference/generated/numpy.dtype.html"),
            "array_like": ("std:term", "glossary.html#term-array_like"),
        },
    ),
    "pymc": (
        "https://www.pymc.io/projects/docs/en/stable/",
        {
            "pymc.Model": ("py:class", "api/generated/pymc.Model.html"),
            "pymc.sample": ("py:function", "api/generated/pymc.sample.html"),
        },
    ),
    "arviz": (
        "https://python.arviz.org/en/stable/",
        {
            "arviz.InferenceData": ("py:class", "api/generated/arviz.InferenceData.html"),
            "arviz.summary": ("py:function", "api/generated/arviz.summary.html"),
        },
    ),
    "pytensor": ("https://pytensor.readthedocs.io/en/latest/", {}),
    "python": (
        "https://docs.python.org/3/",
        {
            "sequence": ("std:term", "glossary.html#term-sequence"),
            "int": ("py:class", "library/functions.html#int"),
            "float": ("py:class", "library/functions.html#float"),
            "str": ("py:class", "library/stdtypes.html#str"),
            "list": ("py:class", "library/stdtypes.html#list"),
            "tuple": ("py:class", "library/stdtypes.html#tuple"),
            "dict": ("py:class", "library/stdtypes.html#dict"),
            "callable": ("py:function", "library/functions.html#callable"),
            "None": ("py:data", "library/constants.html#None"),
            "True": ("py:data", "library/constants.html#True"),
            "False": ("py:data", "library/constants.html#False"),
            "bltin-boolean-values": ("std:label", "library/stdtypes.html#bltin-boolean-values"),
        },
    ),
}


def _write_inventory(path: Path, project: str, entries: dict[str, tuple[str, str]]) -> None:
    """Write a version-2 Sphinx inventory (``objects.inv``) of ``entries``."""
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project}\n"
        "# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = "".join(f"{name} {role} 1 {uri} -\n" for name, (role, uri) in entries.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header.encode() + zlib.compress(body.encode()))


def _mapping() -> dict[str, tuple[str, tuple[str | None, str]]]:
    folder = Path(__file__).resolve().parent / "_build" / "inventories"
    mapping = {}
    for project, (root, entries) in TARGETS.items():
        local = folder / f"{project}.inv"
        _write_inventory(local, project, entries)
        mapping[project] = (root, (None, str(local)))
    return mapping


intersphinx_mapping = _mapping()
