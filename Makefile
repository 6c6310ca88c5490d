# Set-up and entry points. Each target creates the virtual environment it needs (.venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed

# pytensor links its C code against a BLAS; pip-installed pytensor cannot find one by itself.
# We install Debian's OpenBLAS (scripts/ensure_blas.sh) and point pytensor at it.
comma := ,
export PYTENSOR_FLAGS := blas__ldflags=-lopenblas$(if $(PYTENSOR_FLAGS),$(comma)$(PYTENSOR_FLAGS),)
# Our dot products are small matrix-vector products: OpenBLAS threads cost more than they gain
# (docs/blas.md), and pm.sample(cores=...) already runs chains in parallel.
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: demo test test-fast lint bench docs clean

$(STAMP): pyproject.toml
	bash scripts/ensure_blas.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,plots,jax,bench,dask]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/ising_segmentation.py

# --dist loadgroup with the groups tests/conftest.py gives: a file's tests share one worker, so its
# module fixtures (models, steps, compiled kernels) are built once, not once per worker (measured:
# 8m54s against 10m05s), and the NUMBA/JAX backend twins of every file share one, so the numba
# and JAX ops they have in common are compiled once (docs/test_suite.md)
test: $(STAMP)
	$(BIN)/ruff check pymc_lbp tests examples benchmarks scripts docs/conf.py docs/_inventories.py
	$(BIN)/ruff format --check pymc_lbp tests examples benchmarks scripts docs/conf.py docs/_inventories.py
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

# contributors' quick loop: everything but the tests marked slow (CI runs `make test`)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup -m "not slow"

# the documentation site into docs/_build/html (open docs/_build/html/index.html): the guide
# pages, the API reference, the command line and the gallery notebooks, executed (their outputs
# cached in docs/_build/.jupyter_cache: a rebuild runs only the notebooks that changed);
# warnings are errors
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html

lint: $(STAMP)
	$(BIN)/ruff check pymc_lbp tests examples benchmarks scripts docs/conf.py docs/_inventories.py
	$(BIN)/ruff format --check pymc_lbp tests examples benchmarks scripts docs/conf.py docs/_inventories.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks.ising_vs_gibbs

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info docs/_build docs/generated
