"""Integer sites that travel: informed multiscale jumps and full-conditional draws.

Versions
--------
reference
    ``jump`` and ``support_gibbs`` in numpy, the scale ``J`` (``scale_exponent``,
    ``start_exponent``, ``grown_exponent``), offsets without int64 overflow; ``block_jumps``: a
    block's moves from a call's uniforms, site after site, as ``CompiledJumps`` makes them.
graph
    ``CompiledJumps``: one move per integer site of a block in one compiled call (colour
    classes at once), from the graph builders of ``site_moves`` (one site's jump or
    full-conditional draw) and ``class_moves`` (a colour class of sites at once). What the
    steps run, compiled at the first draw that moves an integer site.
moves
    ``IntegerMoves``: the component a step holds (``step.integer_moves``): its moving sites
    (support Gibbs or jumps), the exponent ``J`` and its growth while tuning, its
    ``CompiledJumps`` and a draw's moves.
jax_steps
    ``CompiledJumps``' graphs in JAX, for :mod:`pymc_lbp.whole_model`.

Tests holding the twins together: ``tests/samplers/integer/test_integer_jumps.py`` (enumerated
kernel; the graph takes the reference's decisions one by one and class by class, and makes
``block_jumps``' moves on a step's own block), ``tests/samplers/integer/test_integer_jump_span.py``,
``tests/whole_model/test_block_twins.py`` (the JAX version).
"""
