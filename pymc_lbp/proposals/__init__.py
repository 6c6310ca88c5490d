"""Proposal math in pure functions of arrays (the tested numpy references of every kernel).

Modules
-------
common
    Categorical and ordered draws, the Metropolis-Hastings log-ratio and accept.
balancing
    The balancing functions ``g`` (sqrt, Barker, min, max) in log space.
path
    The path auxiliary proposal: site weights, ordered draws without replacement, path
    probabilities, path lengths.
path_kernels
    numba-compiled pieces of the path proposal (weights, the exponential race, order
    probabilities).
block
    Block proposals (NeuralBlock): mixtures of products of categoricals, clamping, exact block
    updates.
integer_jumps
    Informed multiscale jumps of integer sites and full-conditional draws over small supports.
"""
