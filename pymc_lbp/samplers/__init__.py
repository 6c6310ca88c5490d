"""The samplers' transitions, one folder per algorithm, each holding all its versions.

In every folder ``reference.py`` is the numpy reference: pure functions of arrays and pre-drawn
uniforms, the code the others are tested against. ``graph.py`` builds the same transition as a
pytensor graph (compiled with any backend: C by default, NUMBA, JAX); ``pairwise/kernel.py`` is
the one numba kernel.
The tests named in each folder's docstring hold the twins together (same uniforms, same moves)
and compare them with kernels enumerated by independent code (``tests/helpers/kernels.py``).

Folders
-------
single_site
    The single-site locally balanced kernel (LocallyBalanced, GibbsWithGradients,
    SelfBalancing's chain) and the ``scan`` that runs a draw's steps.
path
    The path auxiliary proposal (PathAuxiliaryLBP) and its path-length adaptation.
pairwise
    Pairwise binary blocks: couplings read off the model, and the numba kernels on them.
integer
    Informed multiscale jumps of integer sites and full-conditional draws over small supports.
self_balancing
    Learned balancing functions (LSB1, LSB2) and their learning (SelfBalancing).
block
    Block proposals (NeuralBlock, NeuralMixedBlock): motifs, networks, exact block Gibbs.

Shared modules
--------------
common
    Categorical and ordered draws, the numpy Metropolis-Hastings rule.
mh_graph
    The same Metropolis-Hastings rule as pytensor graphs.
balancing
    The balancing functions ``g`` (sqrt, Barker, min, max) in log space.
traces
    Clears creation stack traces before compiling (they grow exponentially in rewriting).
"""
