"""Structural motifs: the blocks NeuralBlock proposes jointly, and how they are found.

Modules
-------
motif_api
    Motif specifications, blocks and block sets (``MotifSpec``, ``MotifBlock``, ``BlockSet``).
uai_blocks
    Block sets of UAI networks without a motif, for exact block Gibbs.
lattice_blocks
    ``k x k`` patches of Ising/Potts lattices.
grid_bn
    The grid-BN motif (Wang et al. 2018): its blocks on a network and its training samples.
training_samples
    Training samples of any motif from a model (prior samples, joint states).
chain
    Chain motifs (HMM states, chain CRFs).
flag_value
    A binary flag and the continuous value it switches on (NeuralMixedBlock's motif).
finding
    What ``NeuralBlock([z])`` finds by default.
"""
