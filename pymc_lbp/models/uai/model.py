"""PyMC models of UAI networks.

:func:`read_uai` turns a network (plus evidence) into a ``pm.Model`` with one discrete value per
network variable, grouped into a few vector variables so that models with hundreds of variables
stay small and compile fast.

MARKOV networks (``kind="MARKOV"``)
    * ``x_card{K}``: one vector per cardinality K over the free variables of that cardinality,
      in increasing network index; ``Bernoulli(0.5)`` for K = 2, uniform ``Categorical`` for
      K > 2. Dimension ``x_card{K}_var`` holds the network indices.
    * ``factors_{k1}x{k2}x..``: one ``pm.Potential`` per factor signature (the cardinalities of
      the free scope variables, in file order). The G factors of a signature are stacked into
      one constant log table ``T`` of shape (G, k1, k2, ..) and the potential is
      ``T[arange(G), x_card{k1}[idx1], x_card{k2}[idx2], ..].sum()``: advanced indexing of a
      constant table by integer gathers of the value vectors (zeros are ``-inf``).
    * Evidence variables (and variables of cardinality 1) are not model variables: the factor
      tables are sliced at their values before stacking, and factors left without a free
      variable become a constant that is not part of the model.
    * The model log density is ``sum_f log f(x) + logp_offset`` with
      ``logp_offset = -sum_free log K_i - sum_{fixed factors} log f`` (the uniform priors and the
      dropped constants); it is stored in :class:`UAIModelInfo`.

BAYES networks (``kind="BAYES"``; every factor is the CPT of its last scope variable)
    * Variables are grouped by topological layer L (roots 0, else 1 + the largest parent layer)
      and cardinality K: ``x_l{L}_card{K}`` holds the free variables of the group; evidence
      variables of the group form the observed variable ``x_l{L}_card{K}_obs``, so their CPT
      terms stay in the likelihood. Both have the dimension ``<name>_var`` of network indices.
    * The probabilities are gathers from constant stacked CPTs: for members whose (free)
      parents come from the same variables ``p = CPT[arange(G), x_a[idx_a], x_b[idx_b], ..]``
      (Bernoulli uses ``CPT[.., 1]``); members with different parent sources are separate
      stacks joined with ``pt.concatenate`` (members are ordered by stack, then by index).
      Evidence parents are substituted by slicing the CPT. ``pm.draw`` /
      ``pm.sample_prior_predictive`` therefore forward-sample the network.
    * CPT rows are checked to sum to 1 (within ``cpt_atol``) and rescaled exactly to 1, so the
      model log density is ``sum_f log f(x)`` up to that rescaling (``logp_offset = 0``).

Every model carries a :class:`UAIModelInfo` as ``model.uai_info`` (see :func:`uai_variable_map`)
and starts at a state with non-zero probability (the RVs' ``initval``).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_lbp.factor_graph.model_info import UAIModelInfo, VariableLocation, model_info
from pymc_lbp.factor_graph.network import UAINetwork, reduce_factors
from pymc_lbp.models.uai.errors import ImpossibleEvidenceError
from pymc_lbp.models.uai.io import read_evidence, read_map, read_network
from pymc_lbp.models.uai.rao_blackwell import (
    count_marginals,
    marginal_mcse,
    rao_blackwell_marginals,
)
from pymc_lbp.models.uai.start import find_feasible_state

__all__ = [
    "UAIModelInfo",
    "VariableLocation",
    "read_uai",
    "uai_marginal_mcse",
    "uai_marginals",
    "uai_point_from_state",
    "uai_state_from_point",
    "uai_variable_map",
]


# --------------------------------------------------------------------------- from model samples
def states_from_values(
    data: Mapping[str, Any], info: UAIModelInfo, empty_batch: tuple[int, ...] = ()
) -> np.ndarray:
    """Full network states ``(*batch, n)`` from the free model variables' values in ``data``
    (leading axes ``batch``; ``empty_batch`` when nothing is free), fixed variables at their
    values."""
    values = {name: np.asarray(data[name]) for name in info.free_names}
    batch = next(iter(values.values())).shape[:-1] if values else empty_batch
    state = np.broadcast_to(np.maximum(info.fixed_values, 0), (*batch, info.network.n_vars))
    state = state.copy()
    for name, vals in values.items():
        state[..., info.members[name]] = vals
    return state


def model_target(
    info: UAIModelInfo, samples: Any, group: str = "posterior"
) -> tuple[UAINetwork, dict[int, int], np.ndarray]:
    """:func:`target_network` and the samples (``InferenceData``'s ``group``, a dataset or a
    mapping) as network states ``(..., n)``: one state of the fixed values when nothing is free;
    a ``KeyError`` when a free model variable is missing."""
    data = getattr(samples, group) if hasattr(samples, group) else samples
    for name in info.free_names:
        if name not in data:
            raise KeyError(f"the samples have no variable {name!r}")
    return (*target_network(info), states_from_values(data, info, (1,)))


def target_network(info: UAIModelInfo) -> tuple[UAINetwork, dict[int, int]]:
    """The network a model samples (``info.network``, its CPT rows rescaled for a BAYES model
    as the model does) and every fixed variable (evidence, cardinality 1) with its value."""
    network = info.network.normalised_cpts() if info.kind == "BAYES" else info.network
    fixed = {int(v): int(info.fixed_values[v]) for v in np.flatnonzero(info.fixed_values >= 0)}
    return network, fixed


# --------------------------------------------------------------------------- helpers
def _const(array: np.ndarray) -> pt.TensorVariable:
    return pt.as_tensor_variable(np.ascontiguousarray(array))


def _gather(table: np.ndarray, columns: list[tuple[pt.TensorVariable, list[int]]]):
    """``table[g, x_1[i_1[g]], x_2[i_2[g]], ..]`` for every ``g`` of a constant stacked table's
    first axis, with ``columns`` the pairs (value vector ``x_j``, indices ``i_j``)."""
    gathers = [rv[np.array(idx, dtype=np.int64)] for rv, idx in columns]
    return _const(table)[(np.arange(table.shape[0]), *gathers)]


def _resolve_start(
    network: UAINetwork,
    evidence: dict[int, int],
    start: Any,
    seed: int | None,
) -> tuple[np.ndarray, str]:
    if start is None:
        return find_feasible_state(network, evidence, rng=seed)
    if isinstance(start, str | os.PathLike):
        state, source = read_map(start, network), f"map file {start}"
    else:
        state, source = np.asarray(start, dtype=np.int64).copy(), "user"
    network.check_states(state)
    for v, x in evidence.items():
        if state[v] != x:
            raise ValueError(
                f"{network.name}: the start state has x[{v}] = {state[v]}, but the evidence "
                f"says {x}"
            )
    if not np.isfinite(network.log_factor_product(state)):
        raise ValueError(f"{network.name}: the start state has probability zero")
    return state, source


def _check_cpts(network: UAINetwork, cpt_atol: float) -> list[np.ndarray]:
    """Normalised CPT per child; raise if a row does not sum to 1 within ``cpt_atol``."""
    normalised = network.normalised_cpts(cpt_atol)
    cpts: list[np.ndarray] = [np.empty(0)] * network.n_vars
    for scope, table in zip(normalised.scopes, normalised.tables, strict=True):
        cpts[scope[-1]] = table
    return cpts


def _rv(name: str, card: int, p: Any, dims: str, **kwargs: Any) -> pt.TensorVariable:
    if card == 2:
        return pm.Bernoulli(name, p=p, dims=dims, **kwargs)
    return pm.Categorical(name, p=p, dims=dims, **kwargs)


# --------------------------------------------------------------------------- MARKOV
def _build_markov(
    network: UAINetwork, fixed: dict[int, int], start: np.ndarray
) -> tuple[dict[str, np.ndarray], float]:
    """Add the MARKOV variables and potentials to the current model; returns members, offset."""
    cards = network.cards
    free = np.array([v for v in range(network.n_vars) if v not in fixed], dtype=np.int64)
    rvs: dict[int, pt.TensorVariable] = {}
    members: dict[str, np.ndarray] = {}
    position = np.full(network.n_vars, -1, dtype=np.int64)
    model = pm.modelcontext(None)
    for card in np.unique(cards[free]).tolist():
        group = free[cards[free] == card]
        name = f"x_card{card}"
        model.add_coord(f"{name}_var", group.tolist())
        p = np.float64(0.5) if card == 2 else np.full(card, 1.0 / card)
        rvs[card] = _rv(name, card, p, f"{name}_var", initval=start[group])
        members[name] = group
        position[group] = np.arange(group.size)
    factors, log_constant = reduce_factors(network, fixed)  # checked: no factor is all zero
    stacks: dict[tuple[int, ...], list[tuple[tuple[int, ...], np.ndarray]]] = defaultdict(list)
    for scope, table in factors:
        stacks[tuple(int(cards[v]) for v in scope)].append((scope, table))
    for sig, items in sorted(stacks.items()):
        columns = [(rvs[k], [position[s[j]] for s, _ in items]) for j, k in enumerate(sig)]
        table = _gather(np.stack([t for _, t in items]), columns)
        pm.Potential("factors_" + "x".join(map(str, sig)), table.sum())
    offset = -float(np.log(cards[free].astype(np.float64)).sum()) - log_constant
    return members, offset


# --------------------------------------------------------------------------- BAYES
def _build_bayes(
    network: UAINetwork,
    cpts: list[np.ndarray],
    evidence: dict[int, int],
    fixed: dict[int, int],
    start: np.ndarray,
) -> dict[str, np.ndarray]:
    """Add the BAYES variables (free and observed) to the current model; returns members."""
    parents = network.parents()
    layers = network.topological_layers()
    cards = network.cards
    model = pm.modelcontext(None)
    groups: dict[tuple[int, int, bool], list[int]] = defaultdict(list)
    for v in range(network.n_vars):
        if v not in fixed:
            groups[(int(layers[v]), int(cards[v]), v in evidence)].append(v)
    rv_of: dict[int, tuple[str, int]] = {}  # free variable -> (model variable, position)
    rvs: dict[str, pt.TensorVariable] = {}
    members: dict[str, np.ndarray] = {}
    for (layer, card, observed), group in sorted(groups.items()):
        name = f"x_l{layer}_card{card}" + ("_obs" if observed else "")
        stacks: dict[tuple[str, ...], list[tuple[int, np.ndarray, list[int]]]] = defaultdict(list)
        for v in group:
            index = tuple(fixed.get(u, evidence.get(u, slice(None))) for u in parents[v])
            table = cpts[v][index]
            free_parents = [u for u in parents[v] if u not in fixed and u not in evidence]
            perm = sorted(range(len(free_parents)), key=lambda i: rv_of[free_parents[i]])
            table = np.transpose(table, (*perm, len(free_parents)))
            ordered = [free_parents[i] for i in perm]
            stacks[tuple(rv_of[u][0] for u in ordered)].append((v, table, ordered))
        order: list[int] = []
        probs = []
        for sources, items in sorted(stacks.items()):
            table = np.stack([t for _, t, _ in items])
            if card == 2:
                table = table[..., 1]
            columns = [
                (rvs[src], [rv_of[ps[j]][1] for _, _, ps in items]) for j, src in enumerate(sources)
            ]
            probs.append(_gather(table, columns) if sources else _const(table))
            order += [v for v, _, _ in items]
        p = probs[0] if len(probs) == 1 else pt.concatenate(probs, axis=0)
        idx = np.array(order, dtype=np.int64)
        model.add_coord(f"{name}_var", idx.tolist())
        if observed:
            values = np.array([evidence[v] for v in order], dtype=np.int64)
            _rv(name, card, p, f"{name}_var", observed=values)
        else:
            rvs[name] = _rv(name, card, p, f"{name}_var", initval=start[idx])
            for i, v in enumerate(order):
                rv_of[v] = (name, i)
        members[name] = idx
    return members


# --------------------------------------------------------------------------- public API
def read_uai(
    source: str | os.PathLike | UAINetwork,
    evidence: str | os.PathLike | Mapping[int, int] | None = None,
    *,
    kind: str | None = None,
    start: Any = None,
    seed: int | None = 0,
    cpt_atol: float = 1e-4,
) -> pm.Model:
    """Build a PyMC model of a UAI network (see the module docstring for the layout).

    Parameters
    ----------
    source : path or UAINetwork
        A ``.uai`` file or a network already read.
    evidence : path, mapping or None
        An ``.evid`` file or ``{variable: value}``; evidence variables are fixed, not sampled.
    kind : {"MARKOV", "BAYES"}, optional
        How to build the model; default: as the file declares. ``"BAYES"`` also works for
        CPT-structured files labelled MARKOV (e.g. the UAI'06 BNs); ``"MARKOV"`` builds any
        network with potentials.
    start : array_like, path or None
        A feasible full state (or a ``.MAP`` file). Default: search one (the ``.uai.MAP`` next
        to the file, forward sampling, greedy repair, exact sampling; see
        :func:`~pymc_lbp.models.uai.start.find_feasible_state`).
    seed : int or None
        Seed of the start-state search.
    cpt_atol : float
        BAYES only: allowed deviation of a CPT row sum from 1.

    Returns
    -------
    pymc.Model
        With ``model.uai_info`` (a :class:`UAIModelInfo`) attached and the start state as the
        initial values.

    Raises
    ------
    UAIFormatError
        Malformed network or evidence file.
    ImpossibleEvidenceError
        The evidence has probability zero (or no feasible state could be found).
    ValueError
        ``kind="BAYES"`` for a network that is not CPT-structured, or an invalid ``start``.
    """
    network = source if isinstance(source, UAINetwork) else read_network(source)
    evidence_source, evidence = evidence, read_evidence(evidence, network)
    kind = (kind or network.kind).upper()
    if kind not in ("MARKOV", "BAYES"):
        raise ValueError(f"kind must be 'MARKOV' or 'BAYES', not {kind!r}")
    fixed = {v: 0 for v in range(network.n_vars) if network.cards[v] == 1}
    cpts = _check_cpts(network, cpt_atol) if kind == "BAYES" else None
    try:
        state, start_source = _resolve_start(network, evidence, start, seed)
    except ImpossibleEvidenceError as exc:
        if isinstance(evidence_source, str | os.PathLike):  # name the evidence file too
            raise ImpossibleEvidenceError(
                f"{os.fspath(evidence_source)}: {exc}", definitive=exc.definitive
            ) from exc
        raise
    with pm.Model() as model:
        if kind == "MARKOV":
            members, offset = _build_markov(network, {**fixed, **evidence}, state)
        else:
            members = _build_bayes(network, cpts, evidence, fixed, state)
            offset = 0.0
    free_names = tuple(rv.name for rv in model.free_RVs)
    names = [""] * network.n_vars
    positions = np.full(network.n_vars, -1, dtype=np.int64)
    for name, idx in members.items():
        positions[idx] = np.arange(idx.size)
        for v in idx.tolist():
            names[v] = name
    fixed_values = np.full(network.n_vars, -1, dtype=np.int64)
    for v, x in {**fixed, **evidence}.items():
        fixed_values[v] = x
    model.uai_info = UAIModelInfo(
        network=network,
        evidence=evidence,
        kind=kind,
        names=tuple(names),
        positions=positions,
        fixed_values=fixed_values,
        members=members,
        free_names=free_names,
        logp_offset=offset,
        start=state,
        start_source=start_source,
    )
    return model


def uai_variable_map(model: pm.Model | None = None) -> UAIModelInfo:
    """The :class:`UAIModelInfo` of a model built by :func:`read_uai`.

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model on the context stack.
    """
    info = model_info(pm.modelcontext(model))
    if info is None:
        raise ValueError("this model was not built by read_uai (it has no uai_info)")
    return info


def uai_state_from_point(point: Mapping[str, Any], model: pm.Model | None = None) -> np.ndarray:
    """Full network assignment(s) from model values.

    Parameters
    ----------
    point : mapping of str to array_like
        Values of the free model variables (e.g. ``model.initial_point()`` or a draw); arrays
        may carry leading batch dimensions.
    model : pymc.Model, optional

    Returns
    -------
    numpy.ndarray of int, shape (..., n)
        Fixed variables at their values.
    """
    return states_from_values(point, uai_variable_map(model))


def uai_point_from_state(state: np.ndarray, model: pm.Model | None = None) -> dict[str, np.ndarray]:
    """Model values (free variables only) from full network assignment(s).

    Parameters
    ----------
    state : array_like of int, shape (..., n)
        Must agree with the evidence.
    model : pymc.Model, optional

    Returns
    -------
    dict of str to numpy.ndarray
    """
    info = uai_variable_map(model)
    state = np.asarray(state, dtype=np.int64)
    info.network.check_states(state)
    for v in np.flatnonzero(info.fixed_values >= 0).tolist():
        if np.any(state[..., v] != info.fixed_values[v]):
            raise ValueError(
                f"the state disagrees with the fixed value {info.fixed_values[v]} of variable {v}"
            )
    return {name: state[..., info.members[name]] for name in info.free_names}


def _estimator_inputs(
    idata: Any, model: pm.Model | None, group: str, rao_blackwellize: bool | None
) -> tuple[UAIModelInfo, bool, UAINetwork, dict[int, int], np.ndarray]:
    """The model's map, whether to Rao-Blackwellise (default: for the posterior group only),
    and :func:`model_target`."""
    info = uai_variable_map(model)
    rb = group == "posterior" if rao_blackwellize is None else bool(rao_blackwellize)
    return info, rb, *model_target(info, idata, group)


def uai_marginals(
    idata: Any,
    model: pm.Model | None = None,
    *,
    group: str = "posterior",
    rao_blackwellize: bool | None = None,
) -> list[np.ndarray]:
    """Per-variable marginals from samples: averaged full conditionals or frequencies.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.Dataset or mapping
        Samples; for ``InferenceData`` the ``group`` is used. All chains and draws are pooled.
    model : pymc.Model, optional
    group : str
        InferenceData group holding the free variables (``"posterior"`` or ``"prior"``).
    rao_blackwellize : bool or None
        True: every draw contributes each free variable's full conditional given the rest of
        the draw (its Markov blanket), the Rao-Blackwellised estimate
        (:func:`~pymc_lbp.models.uai.rao_blackwell.rao_blackwell_marginals`); False: the
        fraction of draws with ``x_i = k``. None (default): True for the ``"posterior"``
        group, whose draws target the network's posterior, False for any other group (prior
        draws do not, and their conditionals would estimate something else).

    Returns
    -------
    list of numpy.ndarray
        ``marginals[i][k]`` estimates ``P(x_i = k | evidence)``; fixed variables are deltas.
    """
    info, rb, network, fixed, states = _estimator_inputs(idata, model, group, rao_blackwellize)
    if rb and info.free_names:
        return rao_blackwell_marginals(network, fixed, states)
    return count_marginals(network, fixed, states)


def uai_marginal_mcse(
    idata: Any,
    model: pm.Model | None = None,
    *,
    group: str = "posterior",
    rao_blackwellize: bool | None = None,
) -> list[np.ndarray]:
    """Monte Carlo standard errors of :func:`uai_marginals`' estimates (ArviZ's ``az.mcse``).

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.Dataset or mapping
        Samples with the dimensions ``(chain, draw, members)`` per free variable.
    model : pymc.Model, optional
    group : str
    rao_blackwellize : bool or None
        The estimator, as in :func:`uai_marginals`.

    Returns
    -------
    list of numpy.ndarray
        In the marginals' layout (:func:`~pymc_lbp.models.uai.rao_blackwell.marginal_mcse`).
    """
    _, rb, network, fixed, states = _estimator_inputs(idata, model, group, rao_blackwellize)
    return marginal_mcse(network, fixed, states, rao_blackwellize=rb)
