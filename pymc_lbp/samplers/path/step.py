"""PathAuxiliaryLBP: locally balanced path proposals that change many sites per step."""

from __future__ import annotations

import logging
import math
from typing import Any, ClassVar

import numpy as np
from pymc.step_methods.state import dataclass_state

from pymc_lbp.samplers.balancing import LogBalancing, resolve_balancing
from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel
from pymc_lbp.samplers.path.adaptation import (
    AdaptState,
    PathLengthAdaptation,
    check_target_accept,
    is_number,
)
from pymc_lbp.samplers.path.graph import CompiledPathSteps
from pymc_lbp.samplers.path.reference import check_single_site_share
from pymc_lbp.samplers.single_site.graph import graph_balancing
from pymc_lbp.step_methods.base import DiscreteStepState, DrawResult, steps_for_a_sweep
from pymc_lbp.step_methods.neighbour_step import NeighbourStep
from pymc_lbp.step_methods.stats import document_stats, dtypes_shapes

_log = logging.getLogger("pymc_lbp")


@dataclass_state
class PathAuxiliaryState(DiscreteStepState):
    path_log_u: float
    path_log_u_bar: float
    path_adapt_count: int
    path_doubling: bool


@document_stats
class PathAuxiliaryLBP(NeighbourStep):
    """Path auxiliary locally balanced proposals: ``R`` distinct sites change per MH step.

    From state ``x`` an ordered sequence of ``R`` distinct sites is drawn without replacement
    from the locally balanced distribution at ``x`` (site weights
    ``sum_{moves s of site i} g(pi(x^(s)) / pi(x))``), each picked site gets a new value from
    its within-site distribution (categorical: the other categories; integer: +-1 within the
    support), all ``R`` changes are applied at once and the result ``y`` is accepted with
    ``min{1, pi(y) q(reversed path | y) / (pi(x) q(path | x))}`` (Sun et al. 2021). The proposal
    probabilities are those of the ordered path, exactly, on both sides (see
    :mod:`pymc_lbp.samplers.path.reference`). ``R = 1`` is the single-site :class:`LocallyBalanced`.
    Each step costs one differences evaluation at the proposal, whatever ``R`` is. A draw's
    steps, tuning included, run in one call of the compiled path kernel
    (:mod:`pymc_lbp.samplers.path.graph`, a pytensor ``scan`` that carries the scale's adaptation
    while tuning; the backend from ``compile_kwargs``), compiled at the first draw; on a pairwise
    binary block in one call of the numba kernel :mod:`pymc_lbp.samplers.pairwise.kernel`.

    Path length: each step is, with the fixed probability ``single_site_share``, a single-site
    step (``R = 1``), and otherwise a *path step* whose ``R`` is ``ceil(U)`` with probability
    ``frac(U)`` and ``floor(U)`` otherwise (unbiased stochastic rounding of the scale ``U``:
    ``E[R | path step] = U``). With ``path_scale=None`` the scale is tuned during ``tune`` so
    that the mean acceptance probability of the path steps approaches ``target_accept`` (0.574,
    the asymptotically optimal rate for locally balanced proposals; Sun, Dai, Schuurmans 2022): a
    doubling phase (``U = 1, 2, 4, ...`` while steps accept at least the target), then
    Robbins-Monro on ``log U``; at the end of tuning ``U`` is frozen (see
    :mod:`pymc_lbp.samplers.path.adaptation`). The kernel is then a fixed mixture of pi-invariant
    kernels whose single-site component keeps the chain irreducible (a path-only chain with a fixed
    even ``R`` is parity-reducible on binary blocks, and one with ``R`` in ``{2, 3}`` was seen
    trapped one site away from the mode of a near-deterministic posterior). The single-site
    steps cost at most a share ``single_site_share`` of the expected jump distance.

    Parameters
    ----------
    vars : list of variables, optional
        Discrete variables (Bernoulli, Categorical, supported integer-valued ones); one block.
    path_scale : float, optional
        ``None`` (default): tuned. A number fixes the scale ``U``, the mean ``R`` of the path
        steps; ints and floats mean the same (``3`` and ``3.0``: every path step has ``R = 3``;
        ``2.5``: ``R`` is 2 or 3 with probability 1/2 each). Within ``[1, number of sites]``.
        The single-site steps are mixed in whatever the value, so no setting is reducible.
    single_site_share : float, default 0.1
        Probability, fixed and state-independent, that a step is a single-site step
        (``R = 1``), in (0, 1). A chain stuck where only a one-site change leads on escapes
        after ``1 / single_site_share`` steps on average; the price is at most that share of
        the jump distance per step.
    target_accept : float, default 0.574
        Target mean acceptance probability of the tuning, in (0, 1). For comparison, 0.234 is
        the optimal rate of random-walk Metropolis.
    balancing : {"sqrt", "barker", "min", "max"} or callable, default "sqrt"
        The balancing function ``g`` (see :mod:`pymc_lbp.samplers.balancing`); a callable maps
        log-ratios ``d`` to ``log g(e^d)``, must be balanced, and must also work on pytensor
        tensors (the compiled kernel applies it).
    differences : {"auto", "gradient", "exact"}, default "auto"
        Neighbour differences: first-order from the relaxed logp's gradient (one evaluation per
        step; exact on logps multilinear in the block), exact (one logp evaluation per
        neighbour, batched, or local terms), or "auto": first-order where they are measured to
        track the exact ones, exact otherwise (:mod:`.differences_choice`). On a
        pairwise binary block (every logp term touches at most two of its sites: Ising lattices
        however written) "auto" and "exact" take the exact differences from its couplings, and
        every step of a draw, tuning included, runs in one numba call without model evaluations
        (:mod:`pymc_lbp.samplers.pairwise.couplings`, :mod:`pymc_lbp.samplers.pairwise.kernel`). The
        choice and its reason are in :attr:`differences_choice`, logged, and in the stat
        ``exact_differences``.
    initial_path_scale : float, default 1.0
        Starting value of the tuned scale ``U`` (only with ``path_scale=None``).
    steps_per_draw : int, optional
        MH steps per recorded draw. ``None`` (default): enough steps that a draw proposes about
        one change per site, ``ceil(number of sites / E[R])`` with ``E[R]`` the current scale
        (fixed after tuning; the ``mh_steps`` stat), ``E[R] = s + (1 - s) U`` with ``s`` the
        single-site share and ``U`` the scale; integer sites are not counted (each gets its own
        informed jump per draw, so a block of integer sites only makes no path steps; a block of
        conditionally independent sites makes none either: each draw gives every site a draw
        from its full conditional, all at once, ``step.independent_sites``). Every
        step leaves the target invariant, so the number of steps may change between tuning
        draws. At most 1,000,000.
    {pymc_arguments}

    Raises
    ------
    ValueError
        For ``target_accept`` outside (0, 1), a ``path_scale`` that is not a number in
        ``[1, number of sites]``, an ``initial_path_scale`` outside ``[1, number of sites]``, or
        a ``single_site_share`` outside (0, 1).

    Notes
    -----
    Sampler statistics (one scalar per draw; per-step values are averaged over the draw):

    {stats_table}
    """

    jax_kind = "path"
    name = "path_auxiliary_lbp"
    pairwise_kernel = True
    stats_dtypes_shapes: ClassVar[dict] = dtypes_shapes(
        *NeighbourStep.stats_dtypes_shapes, "mean_path_length", "path_scale", "sites_moved_per_step"
    )
    _state_class = PathAuxiliaryState

    def __init__(
        self,
        vars=None,
        *,
        path_scale: float | None = None,
        single_site_share: float = 0.1,
        target_accept: float = 0.574,
        balancing: str | LogBalancing = "sqrt",
        differences: str = "auto",
        initial_path_scale: float = 1.0,
        steps_per_draw: int | None = None,
        **kwargs,
    ):
        self.target_accept = check_target_accept(target_accept)
        self.single_site_share = check_single_site_share(single_site_share)
        self.fixed_path_scale: float | None = None
        if path_scale is not None:
            if not is_number(path_scale):
                raise ValueError(f"path_scale must be None or a number >= 1, got {path_scale!r}")
            if not path_scale >= 1 or not math.isfinite(path_scale):
                raise ValueError(f"path_scale must be a finite number >= 1, got {path_scale}")
            # one meaning whatever the type: the scale U (3 and 3.0 are the same setting)
            self.fixed_path_scale = float(path_scale)
        if not is_number(initial_path_scale):
            raise ValueError(
                f"initial_path_scale must be a number >= 1, got {initial_path_scale!r}"
            )
        if not initial_path_scale >= 1:
            raise ValueError(f"initial_path_scale must be >= 1, got {initial_path_scale}")
        self.initial_path_scale = float(initial_path_scale)
        self.adaptive = path_scale is None
        self.balancing, self.log_g = resolve_balancing(balancing)
        graph_balancing(self.balancing, self.log_g)  # a custom callable is checked now
        super().__init__(vars, steps_per_draw=steps_per_draw, differences=differences, **kwargs)
        self.adaptation = PathLengthAdaptation(self.target_accept, self.layout.n_sites)
        self._path_kernel: CompiledPathSteps | None = None
        if self.pairwise_ready():
            pairwise_kernel.warm_up()  # compile (or load the cached) numba kernel now, not mid-draw
        self.reset_tuning()
        _log.info(
            "%s on %s: %s neighbour differences, %s",
            type(self).__name__,
            [s.name for s in self.specs],
            "first-order (gradient)" if self.differences_kind == "gradient" else "exact",
            (
                f"path scale tuned toward acceptance {self.target_accept}"
                if self.adaptive
                else f"path scale {self.fixed_path_scale:g}"
            )
            + f", single-site share {self.single_site_share:g}",
        )

    def _check_block_options(self, layout, specs) -> None:
        """Path scales against the block size (before any compilation)."""
        n_sites = layout.n_sites
        given = self.fixed_path_scale
        if given is not None and given > n_sites:
            raise ValueError(
                f"path_scale={given:g} is larger than the block: it has {n_sites} site(s) "
                f"({[s.name for s in specs]}); a path changes distinct sites."
            )
        if self.adaptive and self.initial_path_scale > n_sites:
            raise ValueError(
                f"initial_path_scale={self.initial_path_scale} is larger than the block "
                f"({n_sites} site(s))."
            )

    # -- tuning ---------------------------------------------------------------------------------
    def sweep_steps(self, scale=None, xp=np):
        """Steps per draw of ``steps_per_draw=None``: ``ceil(n_sites / E[R])``
        (:meth:`expected_sites` at the scale ``U``, default the current one; ``xp`` as there)."""
        scale = self.path_scale if scale is None else scale
        return steps_for_a_sweep(self.swept_sites(), self.expected_sites(scale, xp), xp)

    def expected_sites(self, scale, xp=np):
        """``E[R] = s + (1 - s) min(U, n)``, the sites a step proposes to change on average at
        the scale ``U`` (``s`` the single-site share; ``xp`` the array module, ``jax.numpy``
        in the whole-model program, where ``U`` is traced)."""
        share = self.single_site_share
        return share + (1.0 - share) * xp.minimum(scale, float(self.layout.n_sites))

    def _tuned_target(self) -> float | None:
        return self.target_accept if self.adaptive else None

    def _tuning_at_bound(self, too_high: bool) -> bool:
        # acceptance above target with paths as long as the block: nothing left to tune
        return too_high and self.path_scale >= self.layout.n_sites - 0.5

    def _tuning_advice(self, too_high: bool) -> str:
        if not too_high and self.path_scale < 1.5:
            return (
                "Even paths of about one site are accepted this rarely: the posterior may be "
                "concentrated on a few states (then this is expected), the first-order "
                "differences may be poor here (try differences='exact'), or the target is hard "
                "for local moves."
            )
        return "Tune longer (pm.sample(tune=...)) or fix path_scale."

    @property
    def path_scale(self) -> float:
        """The current scale ``U``: the mean path length ``R`` of the path steps."""
        if self.fixed_path_scale is not None:
            return self.fixed_path_scale  # exactly as given (no log/exp round trip)
        return float(np.exp(self.path_log_u))

    def program_steps(self, model, to_jax):
        """This step's steps of a draw in :func:`pymc_lbp.sample`'s compiled program
        (:func:`pymc_lbp.samplers.path.jax_steps.program_steps`)."""
        from pymc_lbp.samplers.path.jax_steps import program_steps

        return program_steps(self, model, to_jax)

    def reset_tuning(self) -> None:
        """Restore the untuned path scale (a step reused for a new chain starts fresh)."""
        super().reset_tuning()
        start = self.fixed_path_scale or self.initial_path_scale
        self.path_log_u = float(np.log(start))
        self.path_log_u_bar = self.path_log_u
        self.path_adapt_count = 0
        self.path_doubling = self.adaptive

    def stop_tuning(self) -> None:
        """End tuning: freeze the scale at the averaged tuned value (see the class docs)."""
        if self.adaptive and self.tune:
            self.path_log_u = float(np.log(self.adaptation.frozen_scale(self.path_log_u_bar)))
        super().stop_tuning()

    # -- the compiled transition ------------------------------------------------------------------
    @property
    def path_kernel(self) -> CompiledPathSteps:
        """The compiled path transition (:class:`pymc_lbp.samplers.path.graph.CompiledPathSteps`),
        compiled on first use."""
        if self._path_kernel is None:
            self._path_kernel = CompiledPathSteps(
                self.differences.graph,
                graph_balancing(self.balancing, self.log_g),
                self.layout,
                self.single_site_share,
                self._compile_kwargs,
                self.adaptation,
            )
        return self._path_kernel

    def _differences_changed(self) -> None:
        self._path_kernel = None

    def run_steps(self, x: np.ndarray, logp: float, deltas: np.ndarray, n_steps: int) -> DrawResult:
        """The draw's transitions in one call of the compiled path kernel (which, while tuning,
        updates ``U`` after every path step), the moves and updates of the numpy reference
        :func:`pymc_lbp.samplers.path.reference.path_steps` given the same noise
        (``tests/samplers/path/test_compiled_path_kernel.py``). On a pairwise binary block every
        draw, tuning included, runs :mod:`pymc_lbp.samplers.pairwise.kernel` (no model evaluation
        per step)."""
        tuning = self.adaptive and self.tune
        if self.pairwise_ready():
            draw, res = self.run_pairwise(
                x,
                logp,
                n_steps,
                share=self.single_site_share,
                scale=self.path_scale,
                adaptation=self.adaptation if tuning else None,
                adapt_state=self.adapt_state(),
            )
            if tuning:
                self.set_adapt_state((res.log_u, res.log_u_bar, res.adapt_count, res.doubling))
            draw.extras.update(_path_extras(res, n_steps))
            return draw
        kernel = self.path_kernel
        adapt = AdaptState(*self.adapt_state()) if tuning else None
        noise = kernel.draw_noise(self.rng, n_steps)
        res = kernel(x, logp, deltas, noise, self.path_scale, adapt)
        if tuning:
            self.set_adapt_state(res.adapt_state)
        return self.draw_from_kernel(res, _path_extras(res, n_steps))

    # -- the adaptation's state ----------------------------------------------------------------
    def adapt_state(self) -> tuple[float, float, int, bool]:
        """The adaptation's state: ``(log U, log Ubar, update count, doubling)``."""
        return self.path_log_u, self.path_log_u_bar, self.path_adapt_count, self.path_doubling

    def set_adapt_state(self, state: tuple[float, float, int, bool]) -> None:
        log_u, log_u_bar, count, doubling = state
        self.path_log_u, self.path_log_u_bar = float(log_u), float(log_u_bar)
        self.path_adapt_count, self.path_doubling = int(count), bool(doubling)

    def summarize_extras(self, extras: dict[str, list]) -> dict[str, Any]:
        # no extras: a draw without path steps (integer sites only: their jumps)
        means = {k: float(np.mean(extras[k])) if extras else 0.0 for k in _PATH_EXTRAS}
        return {**means, "path_scale": self.path_scale}


_PATH_EXTRAS = ("mean_path_length", "sites_moved_per_step")


def _path_extras(res, n_steps: int) -> dict[str, list]:
    """A draw's path statistics from a run's sums (compiled or pairwise kernel)."""
    sums = (res.sum_length, res.sum_moved)
    return {k: [v / n_steps] for k, v in zip(_PATH_EXTRAS, sums, strict=True)}
