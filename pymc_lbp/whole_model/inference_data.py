"""The program's draws as the ``arviz.InferenceData`` ``pm.sample`` would give.

Values come back in ``model.value_vars`` order (transformed); the posterior's variables are
PyMC's (:func:`pymc.util.get_default_varnames` of the unobserved value variables: free
variables untransformed, deterministics), computed by PyMC's JAX conversion vectorised over
chains and draws; coords, dims, observed and constant data are read from the model as
``pm.sample`` reads them.
"""

from __future__ import annotations

import arviz as az
import numpy as np

from pymc_lbp.whole_model.discrete_blocks import STAT_DTYPES
from pymc_lbp.whole_model.program import NUTS_STAT_DTYPES


def _posterior(model, values) -> dict:
    import jax
    from pymc.sampling.jax import get_jaxified_graph
    from pymc.util import get_default_varnames

    outputs = list(get_default_varnames(model.unobserved_value_vars, include_transformed=False))
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
    ``sampling_time``: warmup and draws) go into the attributes."""
    import pymc
    from arviz.data.base import make_attrs
    from pymc.backends.arviz import (
        coords_and_dims_for_inferencedata,
        find_constants,
        find_observations,
    )

    kwargs = dict(idata_kwargs or {})
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
        "posterior": _posterior(model, result.values),
        "sample_stats": _stats(result.stats, False, blocks),
    }
    if tune and not discard_tuned_samples:
        groups["warmup_posterior"] = _posterior(model, result.warmup_values)
        groups["warmup_sample_stats"] = _stats(result.warmup_stats, True, blocks)
        kwargs.setdefault("save_warmup", True)
    return az.from_dict(
        **groups,
        observed_data=find_observations(model),
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
        attrs=attrs,
        posterior_attrs=attrs,
        **kwargs,
    )
