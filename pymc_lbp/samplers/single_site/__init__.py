"""Single-site locally balanced transitions (Zanella 2020; Grathwohl et al. 2021).

Versions
--------
reference
    ``single_site_step`` (``reference.py``): one transition in numpy from two uniforms, the only
    copy (``SelfBalancing.mh_step`` and the ``differences="auto"`` probe run it);
    ``single_site_steps``, a run of them from a call's uniforms, is the test oracle of the
    loop's kernel, which the steps run from their first draw.
graph
    ``single_site_kernel``: the same transition as a pure graph builder
    ``kernel(u, state) -> (state, info)``.
loop
    ``CompiledSteps``: a draw's steps in one pytensor ``scan``, compiled with the step's
    backend.
numba
    ``pymc_lbp.samplers.pairwise.kernel`` on pairwise binary blocks.
jax
    ``single_site_steps_jax`` (``jax_steps.py``): one step's graph (``CompiledSteps.step_graph``,
    the loop's body) converted to JAX and looped by ``jax.lax.scan``, for the compiled
    whole-model program (``pymc_lbp.whole_model``).

Tests holding the twins together: ``tests/samplers/single_site/test_compiled_kernel.py`` (graph ==
numpy move for move, every backend), ``tests/samplers/single_site/test_kernels.py`` (the enumerated
kernel leaves ``pi`` invariant), ``tests/whole_model/test_block_twins.py`` (the JAX loop == numpy
move for move).
"""
