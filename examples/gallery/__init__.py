"""A gallery of discrete-variable models written as PyMC users write them.

Each module builds one model (``build_model``), names its continuous parameters and key scalar
quantities, chooses the ``pymc_lbp`` step for its discrete variables (``make_step``) and gives an
accuracy reference computed without MCMC on the discrete variables (``reference``). Running a
module as a script samples it with that step next to NUTS and with PyMC's default steps, prints
ArviZ summaries and writes a plot under ``output/``. ``benchmarks/user_models.py`` imports the same
functions.
"""

MODELS = (
    "coal_mining",
    "gaussian_mixture",
    "occupancy",
    "n_mixture",
    "spike_and_slab",
    "hidden_markov",
)
