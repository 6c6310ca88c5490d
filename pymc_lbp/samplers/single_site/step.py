"""The single-site samplers' step classes: LocallyBalanced (Zanella 2020), locally balanced
proposals from exact or first-order differences, and GibbsWithGradients (Grathwohl et al. 2021),
the same proposal from gradients."""

from __future__ import annotations

import numpy as np

from pymc_lbp.samplers.balancing import LogBalancing, balanced_log_weights, resolve_balancing
from pymc_lbp.samplers.common import prepare_weights
from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel
from pymc_lbp.samplers.single_site.graph import graph_balancing
from pymc_lbp.samplers.single_site.loop import CompiledSteps
from pymc_lbp.samplers.single_site.reference import Prepared
from pymc_lbp.step_methods.base import DrawResult
from pymc_lbp.step_methods.neighbour_step import NeighbourStep
from pymc_lbp.step_methods.stats import document_stats


@document_stats
class LocallyBalanced(NeighbourStep):
    """Locally balanced single-site proposals with an MH correction (Zanella 2020).

    From state ``x`` a one-site move ``s`` (flip a binary site, move a categorical site to another
    category, step an integer site by +-1 within its support) is proposed with probability
    ``Q(s|x) ∝ g(pi(x^(s)) / pi(x))`` and accepted with
    ``min{1, pi(y) Q(s'|y) / (pi(x) Q(s|x))}``, ``s'`` the move back.

    The ``steps_per_draw`` transitions of a draw run inside one compiled call
    (:func:`pymc_lbp.samplers.single_site.graph.single_site_kernel` in a pytensor ``scan``, compiled
    with the backend of ``compile_kwargs``: C by default, ``{"mode": "NUMBA"}``), compiled at the
    first draw; each step consumes two uniforms from ``self.rng``. The numpy reference of a
    transition is :func:`pymc_lbp.samplers.single_site.reference.single_site_step` (its input:
    :meth:`proposal_weights`).

    Parameters
    ----------
    vars : list of variables, optional
        Discrete variables (Bernoulli, Categorical, supported integer-valued ones); one block.
    balancing : {"sqrt", "barker", "min", "max"} or callable, default "sqrt"
        The balancing function ``g`` (see :mod:`pymc_lbp.samplers.balancing`); a callable maps
        log-ratios ``d`` to ``log g(e^d)`` and must be balanced; it must also work on pytensor
        tensors (arithmetic and ``pytensor.tensor`` functions), as the compiled kernel applies it.
    differences : {"auto", "exact", "gradient"}, default "auto"
        Exact neighbour differences (one logp evaluation per neighbour, batched, or local
        terms), first-order ones from the relaxed logp (one logp and one gradient evaluation per
        step; see :class:`GibbsWithGradients`), or "auto": first-order where they are measured to
        track the exact ones from the start point and again during tuning where the chain is
        (switching for good to exact ones where they stop), exact otherwise
        (:mod:`.differences_choice`). On a pairwise binary block (every logp term
        touches at most two of its sites) "auto" and "exact" take the exact differences from its
        couplings, and a draw's steps run in one numba call without model evaluations
        (:mod:`pymc_lbp.samplers.pairwise.couplings`, :mod:`pymc_lbp.samplers.pairwise.kernel`).
        The choice and its reason are in :attr:`differences_choice`, logged, and in the stat
        ``exact_differences``.
    steps_per_draw : int, optional
        MH steps per recorded draw. ``None`` (default): one per site of the block, so that a
        draw is one sweep's worth of single-site moves (the ``mh_steps`` stat); integer sites
        excepted, which move by their own informed jump each draw (a block of integer sites
        only makes no single-site steps by default: its draw is one jump per site). A block of
        conditionally independent sites (no term of the logp touches two of them, e.g.
        spike-and-slab indicators) makes none either: each draw gives every site a draw from its
        full conditional, all at once (``step.independent_sites``; giving ``steps_per_draw``
        keeps single-site steps). At most
        1,000,000 (see :data:`pymc_lbp.step_methods.step_results.MAX_STEPS_PER_DRAW`).
    {pymc_arguments}

    Notes
    -----
    Sampler statistics (one scalar per draw):

    {stats_table}
    """

    jax_kind = "single_site"
    name = "locally_balanced"
    pairwise_kernel = True

    def __init__(
        self,
        vars=None,
        *,
        balancing: str | LogBalancing = "sqrt",
        differences: str = "auto",
        steps_per_draw: int | None = None,
        **kwargs,
    ):
        self.balancing, self.log_g = resolve_balancing(balancing)
        graph_balancing(self.balancing, self.log_g)  # a custom callable is checked now
        super().__init__(vars, steps_per_draw=steps_per_draw, differences=differences, **kwargs)
        self._kernel = None
        if self.pairwise_ready():
            pairwise_kernel.warm_up()  # numba's compile (or cache load) now, not mid-draw

    def program_steps(self, model, to_jax):
        """This step's steps of a draw in :func:`pymc_lbp.sample`'s compiled program
        (:func:`pymc_lbp.samplers.single_site.jax_steps.program_steps`)."""
        from pymc_lbp.samplers.single_site.jax_steps import program_steps

        return program_steps(self, model, to_jax)

    @property
    def kernel(self):
        """The compiled transition (:class:`pymc_lbp.samplers.single_site.loop.CompiledSteps`),
        compiled on first use: a step built and never sampled (checked, inspected, replaced) costs
        no kernel compilation, and ``pm.sample(cores>1)`` ships the step without it."""
        if self._kernel is None:
            self._kernel = CompiledSteps(
                self.differences,
                self.layout,
                graph_balancing(self.balancing, self.log_g),
                self._compile_kwargs,
            )
        return self._kernel

    def _differences_changed(self) -> None:
        self._kernel = None

    def run_steps(self, x: np.ndarray, logp: float, deltas: np.ndarray, n_steps: int) -> DrawResult:
        """All ``n_steps`` transitions in one call of the compiled :attr:`kernel`
        (:func:`pymc_lbp.samplers.single_site.graph.single_site_kernel`), two uniforms per step
        from ``self.rng``. On a pairwise binary block, :mod:`pymc_lbp.samplers.pairwise.kernel`
        (no model evaluation per step)."""
        if self.pairwise_ready():
            return self.run_pairwise(x, logp, n_steps, share=1.0)[0]
        uniforms = self.rng.random((n_steps, 2))
        return self.draw_from_kernel(self.kernel(x, logp, deltas, uniforms))

    def proposal_weights(self, deltas: np.ndarray) -> Prepared | None:
        """``(log_w, cdf, log_z)`` of the proposal at a state with these neighbour differences
        (None when no neighbour has positive probability): the input of the numpy reference
        :func:`~pymc_lbp.samplers.single_site.reference.single_site_steps`, which makes the
        compiled kernel's moves from the same uniforms."""
        return prepare_weights(balanced_log_weights(deltas, self.log_g))


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

    jax_kind = "single_site"
    name = "gibbs_with_gradients"

    def __init__(
        self, vars=None, *, differences: str = "auto", steps_per_draw: int | None = None, **kwargs
    ):
        super().__init__(
            vars, balancing="sqrt", differences=differences, steps_per_draw=steps_per_draw, **kwargs
        )
