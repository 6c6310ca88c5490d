"""The benchmarks of pymc_lbp: one script per comparison, and their shared library.

Each module is a script that runs samplers through ``pm.sample`` on the same models in one run
and measures them (ESS per second, per step or per logp evaluation, marginal errors against
exact answers, costs per MH step); docs/benchmarks.md and the pages it links say what each
measures and what it found. Run a benchmark as a module from the repository root (the folder
that holds ``pymc_lbp/``, ``benchmarks/`` and ``examples/``), with the same environment as the
tests::

    export PYTENSOR_FLAGS=blas__ldflags=-lopenblas OPENBLAS_NUM_THREADS=1
    python -m benchmarks.ising_vs_gibbs --quick     # a smoke run (most scripts have --quick)
    python -m benchmarks.ising_vs_gibbs --help      # every script's options

``make bench`` runs ``benchmarks.ising_vs_gibbs``. Results (JSON with every run, a markdown
table, usually a plot) go to ``docs/results/`` unless a script's ``--out`` names another
folder; most scripts name the files of a ``--quick`` run ``*_quick``. Shared code lives in two
modules, never copied into a script: :mod:`benchmarks.common` (paths, the argument parser,
timing, ESS, the markdown table and the JSON, markdown and plot writers) and
:mod:`benchmarks.pas_common` (the measurement harness of the path auxiliary benchmarks).
"""
