"""Helpers of the tests (not tests themselves): written independently of the package.

kernels
    Exact single-site transition kernels enumerated in numpy, chi-square and stationarity checks.
block_kernels
    NeuralBlock's block kernels enumerated in numpy.
ess
    The ESS floor (``MIN_ESS``) every standard error estimated from the draws is asserted to have.
frequencies
    z-scores of visit frequencies against exact answers, with ArviZ's ESS.
backends
    The pytensor backends (JAX, NUMBA) the twin tests run under, and their skips.
compile_cache
    The suite's compile directory shared by xdist's workers, its modules compiled outside the lock.
numba_settings
    Numba's optimisation level in the test processes, and numba caches of the suite's own.
"""
