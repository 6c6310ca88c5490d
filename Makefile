# Set-up and entry points. Each target creates the virtual environment it needs (.venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# pytensor links its C code against a BLAS; pip-installed pytensor cannot find one by itself.
# We install Debian's OpenBLAS (scripts/ensure_blas.sh) and point pytensor at it.
comma := ,
export PYTENSOR_FLAGS := blas__ldflags=-lopenblas$(if $(PYTENSOR_FLAGS),$(comma)$(PYTENSOR_FLAGS),)
# Our dot products are small matrix-vector products: OpenBLAS threads cost more than they gain
# (docs/blas.md), and pm.sample(cores=...) already runs chains in parallel.
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: demo test test-fast lint bench clean

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
	$(BIN)/ruff check pymc_lbp tests examples benchmarks scripts
	$(BIN)/ruff format --check pymc_lbp tests examples benchmarks scripts
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

# contributors' quick loop: everything but the tests marked slow (CI runs `make test`)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check pymc_lbp tests examples benchmarks scripts
	$(BIN)/ruff format --check pymc_lbp tests examples benchmarks scripts

bench: $(STAMP)
	$(BIN)/python -m benchmarks.ising_vs_gibbs

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
