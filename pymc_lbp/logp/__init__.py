"""The block and its log-probability: what moves, and how much the logp changes.

Every sampler reads the model through this folder; nothing here draws a random number.

Modules
-------
neighbours
    ``BlockLayout`` (sites, slots, one-site moves) and the differences ``Delta_s(x)``:
    ``ExactDifferences`` (local or batched) and ``GradientDifferences`` (first-order).
local_differences
    Exact differences whose cost grows with the interactions: the dependency analysis of the
    model's terms, site colouring, evaluation of the terms that change.
relax
    The differentiable (multilinear) extension of a PyMC logp, for first-order differences.
differences_choice
    ``differences="auto"``: measure whether first-order differences track the exact ones, at
    construction and again during tuning.
local_logp
    Factor-local log-probability differences of UAI models (block moves of NeuralBlock).
graphs
    Graph helpers: substitution without copying, row copies, per-row gathers.
batched_rows
    A block's logp and differences at many states in one compiled call (SelfBalancing's
    particles).
"""
