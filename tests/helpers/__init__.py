"""Helpers of the tests (not tests themselves): written independently of the package.

kernels
    Exact single-site transition kernels enumerated in numpy, chi-square and stationarity checks.
block_kernels
    NeuralBlock's block kernels enumerated in numpy.
frequencies
    z-scores of visit frequencies against exact answers, with ArviZ's ESS.
backends
    The pytensor backends (JAX, NUMBA) the twin tests run under, and their skips.
"""
