"""SelfBalancing: locally balanced proposals whose balancing function is learned during tuning.

Sansone, "LSB: Local Self-Balancing MCMC in Discrete Spaces" (ICML 2022). The math lives in
:mod:`pymc_lbp.samplers.self_balancing.parametrizations` (parametrizations, objective) and
:mod:`pymc_lbp.samplers.self_balancing.learning` (compiled objective + Adam); this module is the
stateful shell, with the learned function's parameters, optimiser state, particles and learning
steps in the mixin :class:`pymc_lbp.samplers.self_balancing.step_learned.SelfBalancingLearned`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

import numpy as np
import pytensor
from pymc.step_methods.state import dataclass_state

from pymc_lbp.logp.batched_rows import BatchedRows
from pymc_lbp.samplers.common import (
    log_normalize,
    mh_accept_probs,
    mh_log_ratio,
    prepare_weights,
)
from pymc_lbp.samplers.pairwise import kernel as pairwise_kernel
from pymc_lbp.samplers.self_balancing.learning import (
    AdamState,
    BalancingLearner,
    check_learning_size,
)
from pymc_lbp.samplers.self_balancing.parametrizations import PARAMETRIZATIONS, make_parametrization
from pymc_lbp.samplers.self_balancing.step_learned import SelfBalancingLearned
from pymc_lbp.samplers.single_site.loop import CompiledSteps
from pymc_lbp.samplers.single_site.reference import single_site_step
from pymc_lbp.step_methods.base import DiscreteStepState, DrawResult, StepResult
from pymc_lbp.step_methods.neighbour_step import NeighbourStep
from pymc_lbp.step_methods.stats import document_stats, dtypes_shapes

PARTICLE_WEIGHTS = ("uniform", "target")
INIT_SEED = 20220717
"""Seed of the (deterministic) initial hidden layer of the LSB2 network."""


@dataclass_state
class SelfBalancingState(DiscreteStepState):
    lsb_params: np.ndarray
    lsb_adam_m: np.ndarray
    lsb_adam_v: np.ndarray
    lsb_adam_t: float
    lsb_particles: np.ndarray | None = field(default=None)


def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _check_positive_float(name: str, value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if isinstance(value, bool) or not np.isfinite(out) or out <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return out


@document_stats
class SelfBalancing(SelfBalancingLearned, NeighbourStep):
    """Locally balanced proposals with a balancing function learned during tuning (LSB / FLSB).

    From state ``x`` a one-site move ``s`` is proposed with probability
    ``Q(s|x) ∝ g(pi(x^(s)) / pi(x))`` and accepted with the MH probability, exactly as in
    :class:`LocallyBalanced`, but ``g`` comes from a parametrized family of balancing functions
    whose parameters are learned while ``tune`` is on, by minimising Sansone's (2022) estimate of
    the mutual information between consecutive states with Adam. When tuning stops the
    parameters freeze and the chain is an ordinary locally balanced chain with the learned ``g``
    (every ``g`` of the families is balanced for any parameters, so the chain is exact for any
    learned value).

    During tuning, each draw runs the chain's steps with the current ``g`` and then makes
    ``learning_steps`` Adam updates. Each update moves ``n_particles`` auxiliary particles (states
    of the block, started at the chain's state) by one step with the current proposal
    (:func:`pymc_lbp.samplers.self_balancing.learning.batch_moves`), their proposals evaluated in
    one compiled call (:class:`pymc_lbp.logp.batched_rows.BatchedRows`, the differences' graph
    vectorised over the particles), and takes one Adam step on the objective estimated from those
    transitions (the objective and the update are one compiled function,
    :class:`pymc_lbp.samplers.self_balancing.learning.BalancingLearner`). The particles are
    evaluated afresh at the start of each tuning draw (the other variables may have moved); their
    evaluations count in ``logp_evals``/``grad_evals``. The chain's steps, tuning or not, run in one
    call of the compiled single-site kernel
    (:func:`pymc_lbp.samplers.single_site.graph.single_site_kernel`) with the current ``g``
    (:attr:`kernel`; on pairwise binary blocks the numba kernel, see below). After tuning the
    particles are not touched again.

    An update scores the proposal distributions of every particle at its state and at its
    proposal and differentiates them: it costs tens of chain steps. The default number of updates
    per draw gives learning about the model evaluations the chain's steps make, so a tuning draw
    costs a few sampling draws (``benchmarks/self_balancing_cost.py`` measures both). On a
    pairwise binary block (Ising-like lattices, :mod:`pymc_lbp.samplers.pairwise.couplings`) the
    chain's steps run in :mod:`pymc_lbp.samplers.pairwise.kernel` with the learned ``g`` (no model
    evaluation per step, docs/self_balancing.md) and a tuning draw makes one update, which then
    dominates its cost.

    Parameters
    ----------
    vars : list of variables, optional
        Discrete variables (Bernoulli, Categorical, supported integer-valued ones); one block.
    family : {"lsb1", "lsb2", "lsb2_min"}, default "lsb1"
        The family of the learned balancing function ``g`` (where :class:`LocallyBalanced` and
        :class:`PathAuxiliaryLBP` take a fixed ``g`` as ``balancing``). ``"lsb1"``: softmax
        mixture of the sqrt, Barker, min and max functions (starts with equal weights).
        ``"lsb2"``: ``g(t) = (h(t) + t h(1/t)) / 2`` with ``h`` a positive MLP of one hidden
        layer (starts at ``g = sqrt``). ``"lsb2_min"``: ``g = min{h(t), t h(1/t)}`` (the
        paper's first version; reaches light tails at near-impossible neighbours more easily). See
        :mod:`pymc_lbp.samplers.self_balancing.parametrizations`.
    differences : {"auto", "exact", "gradient"}, default "auto"
        Exact neighbour differences (LSB), first-order ones from the relaxed logp (FLSB), or
        "auto": first-order where they are measured to track the exact ones, exact otherwise
        (:mod:`.differences_choice`; the choice is in :attr:`differences_choice`).
    n_particles : int, default 30
        Auxiliary particles advanced during tuning (the paper uses 30 on the Ising model).
        Sizes whose learning is clearly out of range are refused: more than
        ``learning.lsb.MAX_PARTICLES`` (10^5), or an estimated learning-step memory (particles x
        slots, sites and hidden units,
        :func:`pymc_lbp.samplers.self_balancing.learning.learning_memory_bytes`) above 2 GiB.
    learning_rate : float, default 1e-2
        Adam's step size.
    hidden : int, default 10
        Hidden units of the LSB2 network (ignored by ``"lsb1"``); the name
        :class:`~pymc_lbp.NeuralProposal` uses.
    particle_weights : {"uniform", "target"}, default "uniform"
        Weights of the batch's transitions in the objective: equal, or proportional to the
        target density of their starting states (self-normalised over the batch, as in the
        paper's code; focuses learning on the best particle during burn-in).
    max_grad_norm : float, default 10
        The gradient is rescaled to at most this norm before each Adam step.
    steps_per_draw : int, optional
        MH steps of the chain per recorded draw. ``None`` (default): one per site of the block
        (one sweep; the ``mh_steps`` stat), none on a block of integer sites only (its draws are
        one informed jump per site, nothing is learned; give a number to learn there too).
    learning_steps : int, optional
        Adam updates per tuning draw (each moves every particle one step). ``None`` (default):
        ``ceil(steps_per_draw / n_particles)``, so that learning evaluates the model about as
        often as the chain's steps do; one on a pairwise binary block (where the chain's steps
        run the numba kernel and evaluate nothing); none where the draw has no steps.
    {pymc_arguments}

    Notes
    -----
    Sampler statistics (one scalar per draw):

    {stats_table}

    The learned parameters are ``step.lsb_params`` (``step.balancing_function(d)`` evaluates the
    learned ``log g(e^d)``); ``reset_tuning()`` restores the initial ones.
    """

    # learning a balancing function needs single-site steps, even where the sites share no term
    independent_sites_at_once = False
    # on pairwise binary blocks the chain's steps run the numba kernel with the learned g
    pairwise_kernel = True
    learned_balancing = True
    jax_kind = "self_balancing"
    name = "self_balancing"
    _state_class = SelfBalancingState
    stats_dtypes_shapes: ClassVar[dict] = dtypes_shapes(
        *NeighbourStep.stats_dtypes_shapes, "lsb_loss", "learning_steps"
    )
    conditional_stats: ClassVar[tuple[str, ...]] = (
        *NeighbourStep.conditional_stats,
        *(f"lsb_weight_{k}" for k in ("sqrt", "barker", "min", "max")),
    )

    def __init__(
        self,
        vars=None,
        *,
        family: str = "lsb1",
        differences: str = "auto",
        n_particles: int = 30,
        learning_rate: float = 1e-2,
        hidden: int = 10,
        particle_weights: str = "uniform",
        max_grad_norm: float = 10.0,
        steps_per_draw: int | None = None,
        learning_steps: int | None = None,
        **kwargs,
    ):
        if family not in PARAMETRIZATIONS:
            make_parametrization(family)  # raises the explanatory ValueError
        self.n_particles = _check_positive_int("n_particles", n_particles)
        if learning_steps is not None:
            learning_steps = _check_positive_int("learning_steps", learning_steps)
        self._learning_steps = learning_steps
        hidden = _check_positive_int("hidden", hidden)
        learned_hidden = hidden if family != "lsb1" else 0
        # the particle count and the network's size need no model: refuse before compiling
        check_learning_size(self.n_particles, 0, 0, learned_hidden)
        self.learning_rate = _check_positive_float("learning_rate", learning_rate)
        max_grad_norm = _check_positive_float("max_grad_norm", max_grad_norm)
        if particle_weights not in PARTICLE_WEIGHTS:
            raise ValueError(
                f"particle_weights must be one of {PARTICLE_WEIGHTS}, got {particle_weights!r}"
            )
        self.particle_weights = particle_weights
        self.parametrization = make_parametrization(family, hidden)
        self._described: tuple[bytes, dict] = (b"", {})  # (parameters, their stats), see below
        self.stats_dtypes_shapes = dtypes_shapes(
            *type(self).stats_dtypes_shapes, *self.parametrization.describe(np.zeros(4))
        )
        self.stats_dtypes = [{k: v[0] for k, v in self.stats_dtypes_shapes.items()}]
        super().__init__(vars, steps_per_draw=steps_per_draw, differences=differences, **kwargs)
        # memory of the learning step (particles x slots, network on its grid): refuse now
        check_learning_size(
            self.n_particles, self.layout.n_sites, self.layout.n_slots, learned_hidden
        )
        # deterministic initialisation (not a draw from self.rng), so that results are
        # reproducible from pm.sample's random_seed whatever rng the step was built with
        self._initial_params = self.parametrization.initial_params(np.random.default_rng(INIT_SEED))
        mode = (self._compile_kwargs or {}).get("mode")
        self.learner = BalancingLearner(
            self.parametrization, self.learning_rate, max_grad_norm=max_grad_norm, mode=mode
        )
        self.learner.compile()  # now (cached per process), not inside the first tuning step
        self._adam = AdamState.fresh(self._initial_params)
        self._version = 0
        self._lq_cache: list = []
        self._reset_particles()
        self._kernel = None
        self._g_params = None
        self._batched_rows = None
        if self.pairwise_ready():
            pairwise_kernel.warm_up()  # numba's compile (or cache load) now, not mid-draw

    # -- the chain ------------------------------------------------------------------------------
    @property
    def kernel(self):
        """The chain's compiled transition:
        :func:`pymc_lbp.samplers.single_site.graph.single_site_kernel` with the current ``g`` (its
        parameters a shared input set before each call), compiled on first use."""
        if self._kernel is None:
            self._g_params = pytensor.shared(self._adam.params.copy(), name="lsb_params")
            param = self.parametrization

            def log_g(d):
                return param.log_g_pt(d, self._g_params)

            self._kernel = CompiledSteps(self.differences, self.layout, log_g, self._compile_kwargs)
        self._g_params.set_value(self._adam.params)
        return self._kernel

    def program_steps(self, model, to_jax):
        """This step's steps of a draw in :func:`pymc_lbp.sample`'s compiled program
        (:func:`pymc_lbp.samplers.self_balancing.jax_steps.program_steps`)."""
        from pymc_lbp.samplers.self_balancing.jax_steps import program_steps

        return program_steps(self, model, to_jax)

    def _differences_changed(self) -> None:
        self._kernel = self._g_params = self._batched_rows = None

    @property
    def batched_rows(self) -> BatchedRows:
        """The particles evaluated in one compiled call
        (:class:`pymc_lbp.logp.batched_rows.BatchedRows`, compiled on first use)."""
        if self._batched_rows is None:
            self._batched_rows = BatchedRows(
                self.differences, self.n_particles, self._compile_kwargs
            )
        return self._batched_rows

    @property
    def learning_steps(self) -> int:
        """Adam updates per tuning draw (see the ``learning_steps`` parameter)."""
        n = self.steps_per_draw
        if not n:
            return 0
        if self._learning_steps is not None:
            return self._learning_steps
        if self.pairwise_ready():  # the chain's steps evaluate nothing: one update a draw
            return 1
        return -(-n // self.n_particles)

    def pairwise_balancing(self) -> tuple[str, np.ndarray]:
        """The current ``g`` for :mod:`pymc_lbp.samplers.pairwise.kernel`: LSB1's mixture weights,
        or the even part of an LSB2 function on its grid."""
        params = self._adam.params
        if self.parametrization.name == "lsb1":
            return "lsb1", self.parametrization.weights(params)
        return "table", self.parametrization.even_part(params)

    def run_steps(self, x: np.ndarray, logp: float, deltas: np.ndarray, n_steps: int) -> DrawResult:
        """The chain's steps with the current ``g`` in one call of the compiled :attr:`kernel`
        (on a pairwise binary block, of :mod:`pymc_lbp.samplers.pairwise.kernel`: no model
        evaluation per step); while tuning, then :attr:`learning_steps` updates (:meth:`learn`)."""
        if self.pairwise_ready():
            draw = self.run_pairwise(x, logp, n_steps, share=1.0)[0]
        else:
            uniforms = self.rng.random((n_steps, 2))
            draw = self.draw_from_kernel(self.kernel(x, logp, deltas, uniforms))
        if self.tune:
            losses, evaluations = self.learn(draw.x, self.learning_steps)
            draw.logp_evals += evaluations * self.differences.logp_evals_per_call
            draw.grad_evals += evaluations * self.differences.grad_evals_per_call
            draw.extras = {"lsb_loss": losses, "learning_steps": [len(losses)]}
        return draw

    def _prepared(self, deltas: np.ndarray):
        """``(log_w, cdf, log_z)`` of the proposal at a state (None if nothing can be proposed).

        Cached for the chain's last two states while the parameters are frozen.
        """
        for entry in self._lq_cache:
            if entry[0] is deltas and entry[1] == self._version:
                return entry[2]
        return prepare_weights(self.parametrization.log_g(deltas, self._adam.params))

    def mh_step(self, x: np.ndarray, logp: float, deltas: np.ndarray) -> StepResult:
        """One locally balanced transition of the chain with the current ``g``, in numpy: the
        tested reference of the compiled :attr:`kernel` (the learning is :meth:`learn`)."""
        prep = self._prepared(deltas)
        if prep is None:  # no neighbour has positive probability
            return StepResult(x, logp, deltas, 0.0, False, evaluated=False)
        u_slot, u_accept = self.rng.random(), self.rng.random()
        move = single_site_step(x, logp, prep, self.layout, self._evaluate, u_slot, u_accept)
        self._lq_cache = [
            (deltas, self._version, prep),
            (move.deltas, self._version, move.prepared),
        ]
        if move.accepted:
            return StepResult(move.x, move.logp, move.deltas, move.accept_prob, True)
        return StepResult(x, logp, deltas, move.accept_prob, False)

    def _evaluate(self, y: np.ndarray):
        """``(logp_y, deltas_y, prepared_y)`` with the current balancing function."""
        logp_y, deltas_y = self.differences(y)
        return logp_y, deltas_y, self._prepared(deltas_y)

    # -- stats ----------------------------------------------------------------------------------
    def sweep_steps(self) -> int:
        """Steps per draw of ``steps_per_draw=None``: one per site of the block, integer sites
        included (the balancing function is learned from the steps, so integer sites are swept
        next to their jumps); none for a block of integer sites only, whose draws are their
        jumps as for the other samplers (a +-1 step has nothing to add to a jump over +-1 ..
        +-2^J; its learning cost 20 times the jumps' time on a one-site population size).
        Give ``steps_per_draw`` to learn on such a block all the same."""
        moves = self.integer_moves
        if moves is not None and moves.n_sites == self.layout.n_sites:
            return 0
        return self.layout.n_sites

    def summarize_extras(self, extras: dict[str, list]) -> dict[str, Any]:
        losses = [v for v in extras.get("lsb_loss", []) if np.isfinite(v)]
        out: dict[str, Any] = {
            "lsb_loss": float(np.mean(losses)) if losses else float("nan"),
            "learning_steps": int(sum(extras.get("learning_steps", []))),
        }
        key = self.lsb_params.tobytes()  # frozen after tuning: described once
        if self._described[0] != key:
            self._described = (key, self.parametrization.describe(self.lsb_params))
        out.update(self._described[1])
        return out

    # -- the kernel, for tests and diagnostics ---------------------------------------------------
    def move_probabilities(self, x: np.ndarray) -> np.ndarray:
        """``P(x -> x^(s)) = Q(s|x) alpha(x, x^(s))`` for every slot, with the current parameters.

        Costs one differences evaluation per slot; meant for tests on small blocks.
        """
        x = np.asarray(x, dtype=np.int64)
        logp, deltas = self.differences(x)
        log_q = log_normalize(self.parametrization.log_g(deltas, self.lsb_params))
        out = np.zeros(self.layout.n_slots)
        for slot in np.flatnonzero(np.isfinite(log_q)):
            site = self.layout.slot_site[slot]
            old = int(x[site])
            y = x.copy()
            y[site] = self.layout.new_value(x, slot)
            logp_y, deltas_y = self.differences(y)
            log_q_y = log_normalize(self.parametrization.log_g(deltas_y, self.lsb_params))
            reverse = self.layout.reverse_slot(slot, old)
            ratio = mh_log_ratio(logp, logp_y, log_q[slot], log_q_y[reverse])
            out[slot] = np.exp(log_q[slot]) * mh_accept_probs(ratio)
        return out
