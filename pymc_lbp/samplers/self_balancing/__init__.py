"""Self-balancing (Sansone 2022, LSB/FLSB): the balancing function learned while tuning.

Versions
--------
parametrizations
    LSB1 (mixture of the four balancing functions) and LSB2 (balanced MLP), numpy and graph
    twins, and the mutual-information objective in numpy (the reference).
learning
    The objective and its Adam update compiled once; particles' moves in one batched call.
nets
    Small networks as pure functions of a flat parameter vector (numpy and pytensor twins).

Tests holding the twins together: ``tests/samplers/self_balancing/test_learned_balancing.py``,
``tests/samplers/self_balancing/test_self_balancing_batch.py`` (compiled learning == numpy
reference, move for move and parameter for parameter).
"""
