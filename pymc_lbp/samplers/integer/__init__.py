"""Integer sites that travel: informed multiscale jumps and full-conditional draws.

Versions
--------
reference
    ``jump`` and ``support_gibbs`` in numpy, the scale ``J`` (``scale_exponent``,
    ``start_exponent``, ``grown_exponent``), offsets without int64 overflow.
numpy_jumps
    ``NumpyJumps``: a block's moves from a call's uniforms, as ``CompiledJumps`` makes them,
    with the references; what a step runs until compiling its jumps pays (``compiling_pays``).
graph
    ``CompiledJumps``: one move per integer site of a block in one compiled call (colour
    classes at once), from the graph builders of ``site_moves`` (one site's jump or
    full-conditional draw) and ``class_moves`` (a colour class of sites at once).

Tests holding the twins together: ``tests/samplers/integer/test_integer_jumps.py`` (enumerated
kernel; the graph takes the reference's decisions one by one and class by class; NumpyJumps
makes the compiled call's moves and a step's switch between them changes no draw),
``tests/samplers/integer/test_integer_jump_span.py``.
"""
