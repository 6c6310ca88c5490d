"""What is learned or tuned: the path length, the LSB balancing functions, NeuralBlock's networks.

Modules
-------
adaptation
    Robbins-Monro targeting of the path length's acceptance rate (tune, then freeze).
learned_balancing
    Learned balancing functions (LSB1, LSB2) and their mutual-information objective.
lsb
    The LSB objective and its Adam update, compiled once.
nets
    Small networks as pure functions of a flat parameter vector (numpy and pytensor twins).
mdn
    The mixture density network of NeuralBlock's proposals.
neural_proposal
    NeuralBlock proposal files: format, loading, the shipped library.
"""
