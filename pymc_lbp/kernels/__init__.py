"""Compiled transition kernels: ``steps_per_draw`` MH transitions in one compiled call.

Each kernel is a pure graph builder in the style of BlackJAX, ``kernel(u, state) -> (state,
info)``: ``u`` holds the uniforms the transition consumes (drawn outside from the step's
``self.rng``, so seeding, ``set_rng`` and pickling are PyMC's), ``state`` the current block
vector, its logp and its neighbour differences. :func:`~pymc_lbp.kernels.loop.compile_steps`
runs a kernel ``n`` times inside one pytensor ``scan`` and compiles it with any pytensor backend
(C by default, ``compile_kwargs={"mode": "NUMBA"}``). See ``docs/compiled.md``.

Modules
-------
mh
    The one Metropolis-Hastings log-ratio and acceptance used by every kernel.
single_site
    The single-site locally balanced kernel (LocallyBalanced, GibbsWithGradients).
path
    The path auxiliary kernel (PathAuxiliaryLBP off pairwise blocks) and its loop, which also
    carries the path-length adaptation while tuning.
block
    NeuralBlock's sweep over colour classes of chain blocks, one graph per sweep.
random_scan
    NeuralBlock's random-scan steps (motif blocks, exact blocks, single sites), one ``scan``
    per draw.
integer_jump
    The informed multiscale jump of integer sites, every integer site of a block in one call.
loop
    ``scan`` over kernel steps and compilation; per-draw summaries.
traces
    Clears creation stack traces before compiling (they grow exponentially in rewriting).
"""

from pymc_lbp.kernels.integer_jump import CompiledJumps
from pymc_lbp.kernels.loop import CompiledSteps, compile_single_site_steps, compile_steps
from pymc_lbp.kernels.mh import mh_accept, mh_log_ratio
from pymc_lbp.kernels.single_site import SingleSiteMoves, balanced_weights, single_site_kernel

__all__ = [
    "CompiledJumps",
    "CompiledSteps",
    "SingleSiteMoves",
    "balanced_weights",
    "compile_single_site_steps",
    "compile_steps",
    "mh_accept",
    "mh_log_ratio",
    "single_site_kernel",
]
