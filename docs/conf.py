"""Sphinx configuration of the pymc_lbp documentation site (``make docs``)."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))
sys.path.insert(0, str(DOCS))

from _inventories import intersphinx_mapping  # noqa: E402,F401

import pymc_lbp  # noqa: E402

project = "pymc_lbp"
author = "the pymc_lbp developers"
copyright = "2026, the pymc_lbp developers"
release = pymc_lbp.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_copybutton",
    "sphinxarg.ext",
]

# the guide pages are MyST markdown; the gallery pages are MyST notebooks (executed at build time)
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 4
suppress_warnings = ["myst.header"]

# the executed gallery: every notebook run at build time, its outputs cached in
# docs/_build/.jupyter_cache so that a rebuild runs only the notebooks that changed; a failing
# cell fails the build
nb_execution_mode = "cache"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = int(os.environ.get("PYMC_LBP_DOCS_TIMEOUT", "900"))
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# autosummary pages of every public name (docs/api.md); a class page is its docstring: options,
# statistics table, examples (docs/_templates/autosummary/class.rst)
autosummary_generate = True
templates_path = ["_templates"]
autosummary_imported_members = True
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = True

html_theme = "pydata_sphinx_theme"
html_title = f"pymc_lbp {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []


def _title_results(app, docname: str, source: list[str]) -> None:
    """Give a benchmark's result table (``results/*.md``, written by ``benchmarks/``) a title."""
    if docname.startswith("results/") and not source[0].lstrip().startswith("#"):
        source[0] = f"# Results: {docname.removeprefix('results/')}\n\n" + source[0]


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    """A step class's signature is its ``__init__``'s (PyMC's ``BlockedStep.__new__`` hides it)."""
    if what != "class" or signature != "(*args, **kwargs)" or "__init__" not in vars(obj):
        return None
    parameters = list(inspect.signature(obj.__init__).parameters.values())[1:]
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]
    return str(inspect.Signature(plain)), None


def setup(app) -> None:
    app.connect("source-read", _title_results)
    app.connect("autodoc-process-signature", _init_signature)
