"""Discrete factor graphs and the algorithms on their structure, a layer below both the UAI
file family (:mod:`pymc_lbp.models.uai`, which reads and writes them) and the samplers
(:mod:`pymc_lbp.samplers.block`, whose exact block updates and clusters use them): nothing here
reads a file or imports either.

network
    ``UAINetwork``, the in-memory network (variables, cardinalities, factor tables), evidence
    checks and reductions.
elimination
    Elimination orders and bucket trees' plans (``EliminationPlan``, ``elimination_plan``).
bucket_tree
    The log-space tables and passes of an elimination.
clusters
    Blocks for exact block Gibbs that cross a network's determinism, on any interaction graph.
model_info
    How a PyMC model built from a network maps to it (``UAIModelInfo``).
"""
