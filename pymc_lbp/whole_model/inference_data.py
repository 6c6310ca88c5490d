"""The program's draws as the ``arviz.InferenceData`` ``pm.sample`` would give.

Values come back in ``model.value_vars`` order (transformed); the posterior's variables are
PyMC's (:func:`pymc.util.get_default_varnames` of the unobserved value variables: free
variables untransformed, deterministics), computed by PyMC's JAX conversion vectorised over
chains and draws; coords, dims, observed and constant data are read from the model as
``pm.sample`` reads them. ``idata_kwargs`` are ``pm.sample``'s (:func:`check_idata_kwargs`): the
pointwise log likelihood and log prior computed by PyMC after the draws, as ``pm.sample``
computes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import arviz as az
import numpy as np

from pymc_lbp.whole_model.program import NUTS_STAT_DTYPES, STAT_DTYPES

PYMC_IDATA_KWARGS = ("log_likelihood", "log_prior", "include_transformed", "sample_dims", "model")
"""The keys of ``idata_kwargs`` :func:`pymc.to_inference_data` reads itself (``pm.sample``'s)."""

FROM_DICT_IDATA_KWARGS = (
    "coords",
    "dims",
    "save_warmup",
    "prior",
    "posterior_predictive",
    "predictions",
    "prior_predictive",
    "sample_stats_prior",
    "predictions_constant_data",
    "pred_dims",
    "pred_coords",
    "index_origin",
)
"""The keys passed on to :func:`arviz.from_dict` (``coords`` and ``dims`` update the model's)."""


def check_idata_kwargs(model, idata_kwargs: dict | None) -> dict:
    """``idata_kwargs`` checked before anything is sampled (a copy): the keys ``pm.sample``
    takes (:data:`PYMC_IDATA_KWARGS`, :data:`FROM_DICT_IDATA_KWARGS`), ``log_likelihood`` a bool
    or names of observed variables (or :func:`arviz.from_dict`'s dict of arrays),
    ``log_prior`` a bool or names of free variables, ``model`` the model sampled.

    Raises
    ------
    TypeError
        For a key neither takes.
    ValueError
        For names that are not the model's observed (free) variables, another model.
    """
    kwargs = dict(idata_kwargs or {})
    unknown = sorted(set(kwargs) - set(PYMC_IDATA_KWARGS) - set(FROM_DICT_IDATA_KWARGS))
    if unknown:
        raise TypeError(
            f"pymc_lbp.sample: idata_kwargs {unknown} are not taken; pm.sample's are "
            f"{sorted(PYMC_IDATA_KWARGS + FROM_DICT_IDATA_KWARGS)}."
        )
    if kwargs.get("model", model) is not model:
        raise ValueError("pymc_lbp.sample: idata_kwargs['model'] is not the model sampled.")
    for key, kind, rvs in (
        ("log_likelihood", "observed", model.observed_RVs),
        ("log_prior", "free", model.free_RVs),
    ):
        value = kwargs.get(key, False)
        if isinstance(value, bool | np.bool_) or (
            key == "log_likelihood" and isinstance(value, Mapping)
        ):
            continue
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, Iterable):
            raise ValueError(
                f"pymc_lbp.sample: idata_kwargs[{key!r}] must be a bool or names of {kind} "
                f"variables, got {value!r}"
            )
        names = list(names)
        wrong = [n for n in names if n not in {rv.name for rv in rvs}]
        if wrong:
            raise ValueError(
                f"pymc_lbp.sample: idata_kwargs[{key!r}] names {wrong}, which are not {kind} "
                f"variables of the model ({[rv.name for rv in rvs]})."
            )
        kwargs[key] = names
    return kwargs


def _posterior(model, values, include_transformed: bool = False) -> dict:
    import jax
    from pymc.sampling.jax import get_jaxified_graph
    from pymc.util import get_default_varnames

    outputs = list(
        get_default_varnames(model.unobserved_value_vars, include_transformed=include_transformed)
    )
    fn = get_jaxified_graph(inputs=model.value_vars, outputs=outputs)
    result = jax.jit(jax.vmap(jax.vmap(fn)))(*values)
    return {v.name: np.asarray(r) for v, r in zip(outputs, result, strict=True)}


def _stats(stats: dict, tune: bool, blocks) -> dict:
    dtypes = {**STAT_DTYPES, **NUTS_STAT_DTYPES, "lp": np.float64}
    stats = {k: np.asarray(v) for k, v in stats.items()}
    for block in blocks:
        stats = block.finish(stats)
    out = {k: v.astype(dtypes.get(k, v.dtype)) for k, v in stats.items()}
    shape = next(iter(out.values())).shape[:2]
    out["tune"] = np.full(shape, tune)
    return out


def to_inference_data(
    model,
    result,
    blocks,
    *,
    tune: int,
    discard_tuned_samples: bool,
    times: dict,
    idata_kwargs: dict | None,
):
    """``arviz.InferenceData`` from a :class:`~pymc_lbp.whole_model.program.ChainResult` whose
    arrays have the chains first; ``times`` (``build_time``: steps built, program compiled;
    ``sampling_time``: warmup and draws) go into the attributes; ``idata_kwargs`` as
    ``pm.sample`` (:func:`pymc.to_inference_data`) takes them, checked by
    :func:`check_idata_kwargs`: ``log_likelihood`` and ``log_prior`` add the groups
    :func:`pymc.compute_log_likelihood` and :func:`pymc.compute_log_prior` compute from the
    posterior, ``include_transformed`` keeps the transformed values in it."""
    import pymc
    from arviz.data.base import make_attrs
    from pymc.backends.arviz import (
        coords_and_dims_for_inferencedata,
        find_constants,
        find_observations,
    )

    kwargs = check_idata_kwargs(model, idata_kwargs)
    log_likelihood = kwargs.pop("log_likelihood", False)
    if isinstance(log_likelihood, Mapping):  # arviz.from_dict's group of arrays
        kwargs["log_likelihood"], log_likelihood = log_likelihood, False
    log_prior = kwargs.pop("log_prior", False)
    include_transformed = bool(kwargs.pop("include_transformed", False))
    sample_dims = kwargs.pop("sample_dims", None) or ["chain", "draw"]
    kwargs.pop("model", None)
    coords, dims = coords_and_dims_for_inferencedata(model)
    coords.update(kwargs.pop("coords", {}))
    dims.update(kwargs.pop("dims", {}))
    attrs = make_attrs(
        {
            **times,
            "tuning_steps": tune,
            "sampler": "pymc_lbp.sample",
            "discrete_steps": [type(b.step).__name__ for b in blocks],
        },
        library=pymc,
    )
    groups = {
        "posterior": _posterior(model, result.values, include_transformed),
        "sample_stats": _stats(result.stats, False, blocks),
    }
    if tune and not discard_tuned_samples:
        groups["warmup_posterior"] = _posterior(model, result.warmup_values, include_transformed)
        groups["warmup_sample_stats"] = _stats(result.warmup_stats, True, blocks)
        kwargs.setdefault("save_warmup", True)
    idata = az.from_dict(
        **groups,
        observed_data=find_observations(model),
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
        attrs=attrs,
        posterior_attrs=attrs,
        **kwargs,
    )
    # as pm.to_inference_data computes them (pm.sample's idata_kwargs)
    for wanted, compute in (
        (log_likelihood, pymc.compute_log_likelihood),
        (log_prior, pymc.compute_log_prior),
    ):
        if wanted:
            idata = compute(
                idata,
                var_names=None if wanted is True else wanted,
                extend_inferencedata=True,
                model=model,
                sample_dims=sample_dims,
                progressbar=False,
            )
    return idata
