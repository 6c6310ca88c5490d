"""NUTS on the model with the default step's discrete variables summed out, the sum by pymc-extras.

Where the discrete variables no step of the user's takes are conditionally independent sites
given the continuous ones (a mixture's assignments, a spike-and-slab prior's indicators),
:func:`pymc_lbp.sample` can run NUTS on the marginal posterior of the continuous variables,
``p(theta | y) = sum_z p(theta, z | y)``, whose geometry no longer changes with the discrete
state, and recover the discrete posterior exactly: after each NUTS transition to ``theta'`` the
default step draws every site from its full conditional ``p(z | theta')`` (its draw of
conditionally independent sites: one exact draw per site, independent of the old ``z``). If
``theta`` follows the marginal posterior, ``(theta', z')`` follows the joint one, so the chain's
draws are draws of the model's posterior (the order matters: ``z`` drawn before the NUTS
transition would be ``z | theta``, paired with ``theta'``).

The marginal logp is pymc-extras' (``pymc_extras.marginalize``), converted to JAX like the
model's own; its cost is the dependent terms once per state of a site, so sites of many states
are not summed (:data:`MAX_STATES`).
"""

from __future__ import annotations

import logging

import numpy as np
import pymc as pm
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import graph_inputs

from pymc_lbp.logp.layout import BINARY, CATEGORICAL

_log = logging.getLogger("pymc_lbp")

MAX_STATES = 16
"""The most states a summed site may have under ``marginalize="auto"``: the marginal logp and its
gradient evaluate the site's dependent terms once per state, so this bounds a gradient's cost
at 16 of the joint's. A bound, not a measured crossover: measured (docs/benchmarks.md,
"Mixed models against the alternatives") are three-state sites (mixtures: 2.2x the joint's
min ESS per second) and two-state ones (prior-form spike-and-slab: 0.9-1.6x)."""


def check_marginalize(marginalize) -> None:
    """A clear error for a ``marginalize`` that is not ``"auto"``, ``True`` or ``False``."""
    if not (marginalize is True or marginalize is False or marginalize == "auto"):
        raise ValueError(
            f"pymc_lbp.sample: marginalize must be 'auto', True or False, got {marginalize!r}"
        )


def marginal_choice(
    model, steps: list, n_user_steps: int, marginalize
) -> tuple[list[str], str, object]:
    """The discrete variables to sum out of NUTS's target, why (for the log), and the marginal
    logp (:func:`marginal_logp`; None where nothing is summed).

    ``marginalize="auto"`` sums the default step's variables (those no step of the user's
    takes) where the default step draws them as conditionally independent sites (an exact
    draw from their full conditional: the recovery), each of at most :data:`MAX_STATES`
    states, the model has continuous variables, and pymc-extras sums them; ``True`` requires
    it (an error says which condition fails); ``False`` never sums.

    Raises
    ------
    ValueError
        For ``marginalize`` not one of ``"auto"``, ``True``, ``False``; with ``True``, where
        the default step's variables cannot be summed out.
    """
    check_marginalize(marginalize)
    if marginalize is False:
        return [], "marginalize=False", None
    names, reason = _candidates(model, steps[n_user_steps:])
    logp = None
    if names:
        try:
            logp = marginal_logp(model, names)
        except ImportError:
            names, reason = [], "pymc-extras is not installed (pip install 'pymc_lbp[jax]')"
        except Exception as err:  # noqa: BLE001 - pymc-extras' refusal is the answer
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            names, reason = [], f"pymc-extras cannot sum them out: {first}"
    if marginalize is True and not names:
        raise ValueError(f"pymc_lbp.sample: marginalize=True, but {reason}.")
    return names, reason, logp


def _candidates(model, default_steps: list) -> tuple[list[str], str]:
    if not default_steps:
        return [], "no discrete variable is left to the default step"
    if not any(v.dtype not in pm.discrete_types for v in model.value_vars):
        return [], "the model has no continuous variables"
    (step,) = default_steps
    names = [v.name for v in step.vars]
    if not getattr(step, "independent_sites", False):
        return [], (
            f"the sites of {names} are not conditionally independent given the continuous "
            "variables (no exact draw recovers them)"
        )
    layout = step.layout
    states = np.select(
        [layout.site_kind == BINARY, layout.site_kind == CATEGORICAL],
        [2, layout.site_ncat],
        layout.upper - layout.lower + 1,
    )
    states = float(states.max())
    if states > MAX_STATES:
        return [], f"a site of {names} has {states:g} states (summing is for at most {MAX_STATES})"
    return names, "conditionally independent sites, summed out by pymc-extras"


def marginal_model(model, names: list[str]) -> pm.Model:
    """``pymc_extras.marginalize(model, names)``; the model's initial values, which
    pymc-extras refuses, are set aside while it builds the marginal model and restored."""
    import pymc_extras as pmx

    saved = dict(model.rvs_to_initial_values)
    try:
        for rv in saved:
            model.rvs_to_initial_values[rv] = None
        return pmx.marginalize(model, names)
    finally:
        model.rvs_to_initial_values.update(saved)


def marginal_logp(model, names: list[str]):
    """The marginal logp over ``names``, as a graph of ``model``'s own value variables and data
    (pymc-extras builds it on copies: the copies are replaced by name), for
    :func:`~pymc_lbp.whole_model.jaxify.jax_function`."""
    marginal = marginal_model(model, names)
    lp = marginal.logp()
    values = {v.name: v for v in model.value_vars}
    data = {v.name: v for v in model.data_vars}
    replace = {v: values[v.name] for v in marginal.value_vars}
    for v in graph_inputs([lp]):
        if isinstance(v, SharedVariable) and v.name in data and v is not data[v.name]:
            replace[v] = data[v.name]
    return graph_replace(lp, replace, strict=False)


def log_choice(names: list[str], reason: str) -> None:
    """Say which target NUTS runs on (INFO, the ``pymc_lbp`` logger)."""
    if names:
        _log.info(
            "pymc_lbp.sample: NUTS on the model with %s summed out (%s); each draw then "
            "draws %s from its full conditional given NUTS's new values",
            ", ".join(names),
            reason,
            ", ".join(names),
        )
    else:
        _log.info("pymc_lbp.sample: NUTS on the joint model (not summing out: %s)", reason)
