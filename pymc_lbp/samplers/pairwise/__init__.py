"""Pairwise binary blocks: every logp term touches at most two binary sites of the block.

Versions
--------
couplings
    ``PairwiseDifferences``: the exact differences ``(1 - 2x)(b + W x)`` with couplings read off
    the model's own exact differences (proved pairwise by the dependency analysis).
kernel
    numba: every step of a draw in one call, single-site (LocallyBalanced, GibbsWithGradients,
    SelfBalancing with its learned ``g``) and path (PathAuxiliaryLBP, tuning included), with no
    model evaluation per step.

Tests holding the twins together: ``tests/samplers/pairwise/test_pairwise.py`` (couplings == fields
of an edge-list model; the kernel's rows against the enumerated single-site and path kernels).
"""
