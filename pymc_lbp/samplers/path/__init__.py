"""The path auxiliary proposal (Sun et al. 2022): ``R`` distinct sites per MH step.

Versions
--------
reference
    Site weights, ordered draws without replacement, path probabilities and lengths, and one
    transition from a row of noise (``path_step``, ``path_steps``) in plain numpy: the oracle of
    the compiled kernel.
graph
    The path kernel as one pytensor ``scan`` per draw, carrying the path-length adaptation
    while tuning.
ops
    The race and the path probabilities as two pytensor Ops (C, NUMBA and JAX implementations),
    the pieces of ``graph``'s step that touch every site.
adaptation
    Robbins-Monro targeting of acceptance 0.574 by the path length (tune, then freeze): the one
    path adaptation. Its update (``adapt_update``) is plain Python that the pairwise kernels'
    numba loop compiles too; its graph twin (``update_graph``, inside ``graph``'s scan) is the
    same arithmetic branch for branch.
numba kernel on pairwise blocks
    ``pymc_lbp.samplers.pairwise.kernel``.

Tests holding the twins together: ``tests/samplers/path/test_path_proposals.py`` (the
reference's pieces), ``tests/samplers/path/test_compiled_path_kernel.py`` (graph == numpy move
for move and update for update), ``tests/samplers/path/test_path_auxiliary_kernel.py`` (the
enumerated mixture kernel leaves ``pi`` invariant, the reference's rows follow it,
irreducibility), ``tests/samplers/pairwise/test_pairwise.py`` (the update compiled by numba ==
the update in Python).
"""
