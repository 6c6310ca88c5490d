"""The path auxiliary proposal (Sun et al. 2022): ``R`` distinct sites per MH step.

Versions
--------
reference
    Site weights, ordered draws without replacement, path probabilities and lengths in numpy
    (``PathAuxiliaryLBP.mh_step`` runs them).
numba_pieces
    numba versions of the reference's per-step array work (weights, the exponential race,
    order probabilities), used by the Python loop, and of the adaptation's update
    (``adapt_update``), used by the pairwise kernels' loop.
graph
    The path kernel as one pytensor ``scan`` per draw, carrying the path-length adaptation
    while tuning.
adaptation
    Robbins-Monro targeting of acceptance 0.574 by the path length (tune, then freeze): the one
    path adaptation. Its update is also written as a graph (``update_graph``, inside ``graph``'s
    scan) and in numba (``numba_pieces.adapt_update``), the same arithmetic branch for branch.
numba kernel on pairwise blocks
    ``pymc_lbp.samplers.pairwise.kernel``.

Tests holding the twins together: ``tests/samplers/path/test_path_proposals.py`` (numba pieces ==
numpy), ``tests/samplers/path/test_compiled_path_kernel.py`` (graph == numpy move for move and
update for update), ``tests/samplers/path/test_path_auxiliary_kernel.py`` (the enumerated mixture
kernel leaves ``pi`` invariant, irreducibility), ``tests/samplers/pairwise/test_pairwise.py`` (the
numba update == the numpy update).
"""
