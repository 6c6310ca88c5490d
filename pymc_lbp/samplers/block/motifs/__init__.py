"""Structural motifs: the blocks NeuralBlock proposes jointly, and how they are found.

Modules
-------
blocks
    Motif specifications, blocks and block sets (grid BNs, UAI networks, lattices; block sets
    without a motif for exact block Gibbs), Markov blankets, training samples of a motif.
chain
    Chain motifs (HMM states, chain CRFs).
flag_value
    A binary flag and the continuous value it switches on (NeuralMixedBlock's motif).
finding
    What ``NeuralBlock([z])`` finds by default.
"""
