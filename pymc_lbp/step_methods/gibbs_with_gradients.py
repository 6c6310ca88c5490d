"""GibbsWithGradients: locally balanced proposals from gradients (Grathwohl et al. 2021)."""

from __future__ import annotations

from pymc_lbp.step_methods.locally_balanced import LocallyBalanced
from pymc_lbp.step_methods.stats import document_stats


@document_stats
class GibbsWithGradients(LocallyBalanced):
    """Gibbs-with-Gradients (Grathwohl et al. 2021): locally balanced proposals from gradients.

    The same single-site locally balanced proposal as :class:`LocallyBalanced` with the sqrt
    balancing function (the paper's temperature 2), but the neighbour differences are the
    first-order estimates from the gradient of a differentiable extension of the logp
    (:mod:`pymc_lbp.logp.relax`): binary ``(1 - 2 x_i) df~/dx_i``, categorical
    ``df~/dx_{i,c} - df~/dx_{i,x_i}``. Each step costs one logp and one gradient evaluation at
    the proposed state instead of one logp evaluation per neighbour. The MH correction uses the
    exact logp, so the chain targets the model exactly; on logps that are multilinear in the block
    (Ising, Potts, factor tables, mixtures) the estimates are exact.

    Parameters
    ----------
    vars : list of variables, optional
        Discrete variables; one block.
    differences : {"auto", "gradient", "exact"}, default "auto"
        "auto": on a pairwise binary block (every logp term touches at most two of its sites:
        Ising lattices however written) the exact differences from its couplings, cheaper than
        first-order ones and run by the numba kernel with no model evaluation per step
        (:mod:`pymc_lbp.samplers.pairwise.couplings`; the step is then :class:`LocallyBalanced` with
        ``g = sqrt``); elsewhere first-order differences where they are measured to track the
        exact ones from the start point and again during tuning where the chain is (a step
        whose first-order proposals stop tracking them switches for good), exact ones
        otherwise (see :mod:`pymc_lbp.step_methods.differences_choice` for the rule); "gradient":
        first-order or a ``NotRelaxableError``; "exact": exact ones (the couplings where they
        apply).
        The choice and its reason are in :attr:`differences_choice` and the stat
        ``exact_differences``.
    steps_per_draw : int, optional
        MH steps per recorded draw. ``None`` (default): one per site of the block (one sweep),
        integer sites excepted: they move by their own jump each draw, so a block of integer
        sites only makes no single-site steps by default; nor does a block of conditionally
        independent sites (each draw gives every site a draw from its full conditional, all at
        once: ``step.independent_sites``; giving ``steps_per_draw`` keeps single-site steps).
    {pymc_arguments}

    Raises
    ------
    pymc_lbp.logp.relax.NotRelaxableError
        With ``differences="gradient"``, when the model's logp has no differentiable extension.

    Notes
    -----
    Sampler statistics are those of :class:`LocallyBalanced`:

    {stats_table}
    """

    name = "gibbs_with_gradients"

    def __init__(
        self, vars=None, *, differences: str = "auto", steps_per_draw: int | None = None, **kwargs
    ):
        super().__init__(
            vars, balancing="sqrt", differences=differences, steps_per_draw=steps_per_draw, **kwargs
        )
