"""The block and its log-probability: what moves, and how much the logp changes.

Every sampler reads the model through this folder; nothing here draws a random number.

Modules
-------
model_logp
    ``model_logp``: the model's logp graph (``model.logp``), built once per model state.
layout
    The block: ``VariableSpec``, ``describe_block``, ``BlockLayout`` (sites, slots, one-site
    moves), ``integer_support``.
differences
    The differences ``Delta_s(x)``: ``Differences``, ``ExactDifferences`` (local or batched) and
    ``GradientDifferences`` (first-order).
vectorising
    Rewrites before vectorising a logp over states: per-row checks, plain batched gathers.
local_differences
    Exact differences whose cost grows with the interactions: ``LocalDifferences``, the compiled
    and self-checked callable of a ``LocalPlan``.
local_plan
    ``build_local_plan``: moved states per colour, the segment sum, global pieces.
site_pieces
    The model's terms as sums of elements (``linear_pieces``, per-element checks) and the sites
    each element touches (``SitePieces``, ``site_adjacency``).
dependency_analysis
    Which sites every element of every term depends on (``analyse_dependencies``).
site_colouring
    ``greedy_colouring`` of the site graph.
relax
    The differentiable (multilinear) extension of a PyMC logp, for first-order differences.
relaxer
    The relaxation's rules, node by node (``_Relaxer``).
relaxed_values
    ``LOG_FLOOR``, ``NotRelaxableError`` and the relaxed representation of a graph variable.
local_logp
    Factor-local log-probability differences of UAI models (block moves of NeuralBlock).
graphs
    Graph helpers: substitution without copying, row copies, per-row gathers.
batched_rows
    A block's logp and differences at many states in one compiled call (SelfBalancing's
    particles).
"""
