"""Block proposals (Wang et al. 2018): NeuralBlock and NeuralMixedBlock, exact block Gibbs.

Versions
--------
reference
    Block proposals in numpy: mixtures of products of categoricals, clamping, exact block
    updates; ``colour_update``, the compiled sweep's numpy reference (a test oracle).
sweep_graph
    NeuralBlock's sweep over colour classes of chain blocks as one compiled graph.
random_scan_graph
    NeuralBlock's random scan (motif blocks, exact blocks, single sites) as one ``scan``, and
    its body, one step's graph (``random_scan_step_graph``), which the JAX version loops.
flag_value_graph
    NeuralMixedBlock's pair update as a graph (its numpy reference: ``pair_update``).
jax_steps, jax_flag_value
    The random scan, the chain sweep and the pair updates in JAX, for ``pymc_lbp.sample``.
mdn, neural_proposal
    The mixture density network (numpy forward pass, pytensor graph, training) and the
    proposal files (``library/`` holds the shipped ones).
motifs
    The blocks proposed jointly and how they are found.

Tests holding the twins together: ``tests/samplers/block/test_neural_block.py``,
``tests/samplers/block/test_neural_block_scan.py`` (compiled random scan == numpy ``scan_step``),
``tests/samplers/block/test_chain_motifs.py`` (compiled sweep == numpy colour updates; enumerated
chain-block kernel), ``tests/samplers/block/test_neural_mixed_block.py``; the JAX versions against
the numpy references: ``tests/whole_model/test_block_twins.py``.
"""
