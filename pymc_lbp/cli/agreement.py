"""Do the chains agree? :func:`chain_disagreement` and the warning line of ``mar``.

The chains of ``mar`` start in distinct random feasible states; where the states fall into
regions a sampler does not leave, chains that started in different regions disagree, and
``mar`` says so (``--strict``: exit code 7). Chains that all started in one region cannot show
it: walls of zero factors are therefore checked before any work
(:func:`pymc_lbp.cli.samplers.split_regions`), and this comparison is left with walls of tiny
but non-zero factors and slow mixing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DISAGREEMENT_RHAT", "DISAGREEMENT_SHARE", "chain_disagreement", "disagreement_warning"]

#: :func:`chain_disagreement`: R-hat of a value's indicator above which the chains disagree.
DISAGREEMENT_RHAT = 1.05
#: :func:`chain_disagreement`: a chain never visits a value another chain spends this share in.
DISAGREEMENT_SHARE = 0.5
#: :func:`chain_disagreement`: the most indicator entries (chains x draws x values x members)
#: compared at once.
_ENTRIES = 1 << 22


def chain_disagreement(
    idata: Any,
    model: Any = None,
    *,
    rhat_threshold: float = DISAGREEMENT_RHAT,
    share: float = DISAGREEMENT_SHARE,
) -> dict[int, str]:
    """The network variables on which the chains disagree beyond sampling noise.

    For every free variable and value that a draw takes, the indicator series ``x_i == k`` of
    every chain is compared: the chains disagree on the variable when, for some value, ArviZ's
    R-hat of the indicator (``method="identity"``: the classic Gelman-Rubin statistic of whole
    chains, which compares the chains' frequencies with the noise within them; the split and
    rank-normalised variants also react to trends within a chain) exceeds ``rhat_threshold`` or
    is undefined while the value is visited (chains that each stay at one value, different
    ones), or when one chain never visits a value that another chain spends at least ``share``
    of its draws in. Chains that started in different regions of a network split by zero
    factors, under a sampler that never leaves its region, disagree in this way. The values no
    draw takes are not compared (nothing varies), and the others are compared together, so a
    variable of many states costs what its draws do.

    Parameters
    ----------
    idata : arviz.InferenceData
        With a posterior group of two or more chains (one chain: nothing to compare, ``{}``).
    model : pymc.Model, optional
        A model built by :func:`~pymc_lbp.models.uai.read_uai` (default: the one on the context
        stack).
    rhat_threshold : float
    share : float

    Returns
    -------
    dict of int to str
        Network variable index -> what shows the disagreement (the worst value's R-hat and the
        range of its per-chain frequencies), in increasing variable order.
    """
    import warnings

    import arviz as az
    import numpy as np
    import xarray as xr

    from pymc_lbp.models.uai import uai_variable_map

    info = uai_variable_map(model)
    found: dict[int, tuple[float, str]] = {}
    for name in info.free_names:
        values = np.asarray(idata.posterior[name])  # (chain, draw, members)
        if values.shape[0] < 2:
            return {}
        members = info.members[name]
        card = int(info.network.cards[members[0]])
        observed = np.unique(values)  # a value no draw takes is not compared (nothing varies)
        observed = observed[observed >= (1 if card == 2 else 0)]  # binary: its value 1 suffices
        # the values in groups whose indicators (chain x draw x value x member) fit _ENTRIES
        group = max(1, _ENTRIES // max(1, values.size))
        for lo in range(0, observed.size, group):
            ks = observed[lo : lo + group]
            ind = (values[:, :, None, :] == ks[:, None]).astype(np.float64)
            ind = ind.reshape(*values.shape[:2], -1)  # value-major: (k0, m0), (k0, m1), ..
            freq = ind.mean(axis=1)  # (chain, value x member)
            varies = ind.min(axis=(0, 1)) < ind.max(axis=(0, 1))
            with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                data = xr.Dataset({"ind": (("chain", "draw", "entry"), ind)})
                rhat = np.asarray(az.rhat(data, method="identity")["ind"], dtype=np.float64)
            never = (freq.min(axis=0) == 0) & (freq.max(axis=0) >= share)
            bad = varies & (~np.isfinite(rhat) | (rhat > rhat_threshold) | never)
            for j in np.flatnonzero(bad).tolist():  # by value, then member, as before
                k, v = int(ks[j // members.size]), int(members[j % members.size])
                r = float(rhat[j])
                how = f"R-hat {r:.2f}" if np.isfinite(r) else "every chain stays at one value"
                lo_f, hi_f = freq[:, j].min(), freq[:, j].max()
                text = f"x{v}={k}: {how}, chain frequencies {lo_f:.2f}-{hi_f:.2f}"
                score = r if np.isfinite(r) else np.inf
                if v not in found or score > found[v][0]:
                    found[v] = (score, text)
    return {v: found[v][1] for v in sorted(found)}


def disagreement_warning(disagree: dict[int, str], n_chains: int, n_free: int, sampler: str) -> str:
    """The one ``warning: ...`` line: the variables (the first five), what to try."""
    shown = "; ".join(list(disagree.values())[:5])
    more = f"; and {len(disagree) - 5} more" if len(disagree) > 5 else ""
    advice = "more draws" if sampler == "block_gibbs" else "--sampler block_gibbs or more draws"
    return (
        f"warning: the {n_chains} chains disagree on {len(disagree)} of {n_free} free "
        f"variables ({shown}{more}): started in distinct random feasible states, they either "
        "did not mix between the regions they started in or have not converged yet, so the MAR "
        f"file may be wrong; try {advice}"
    )
