"""SelfBalancing: locally balanced proposals whose balancing function is learned during tuning.

Sansone, "LSB: Local Self-Balancing MCMC in Discrete Spaces" (ICML 2022). The math lives in
:mod:`pymc_lbp.learning.learned_balancing` (parametrizations, objective) and
:mod:`pymc_lbp.learning.lsb` (compiled objective + Adam); this module is the stateful shell.
"""

from __future__ import annotations

import warnings
from dataclasses import field
from typing import Any

import numpy as np
from pymc.step_methods.state import dataclass_state

from pymc_lbp.learning.learned_balancing import PARAMETRIZATIONS, make_parametrization
from pymc_lbp.learning.lsb import (
    AdamState,
    BalancingLearner,
    TransitionBatch,
    check_learning_size,
)
from pymc_lbp.proposals.common import (
    draw_from_cdf,
    log_normalize,
    mh_accept,
    mh_log_ratio,
    prepare_weights,
)
from pymc_lbp.step_methods.base import DiscreteStep, DiscreteStepState, StepResult

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


class _Transition:
    """What one proposal from a particle contributes to the learning batch."""

    __slots__ = ("deltas_x", "deltas_y", "slot", "reverse", "dlogp", "feasible", "logp_x")

    def __init__(self, deltas_x, deltas_y, slot, reverse, dlogp, feasible, logp_x):
        self.deltas_x = deltas_x
        self.deltas_y = deltas_y
        self.slot = slot
        self.reverse = reverse
        self.dlogp = dlogp
        self.feasible = feasible
        self.logp_x = logp_x


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


class SelfBalancing(DiscreteStep):
    """Locally balanced proposals with a balancing function learned during tuning (LSB / FLSB).

    From state ``x`` a one-site move ``s`` is proposed with probability
    ``Q(s|x) ∝ g(pi(x^(s)) / pi(x))`` and accepted with the MH probability, exactly as in
    :class:`LocallyBalanced`, but ``g`` comes from a parametrized family of balancing functions
    whose parameters are learned while ``tune`` is on, by minimising Sansone's (2022) estimate of
    the mutual information between consecutive states with Adam. When tuning stops the
    parameters freeze and the chain is an ordinary locally balanced chain with the learned ``g``
    (every ``g`` of the families is balanced for any parameters, so the chain is exact for any
    learned value).

    During tuning each MH step also advances ``n_particles`` auxiliary particles (states of the
    block, started at the chain's state) with the current proposal; the chain's own transition
    and the particles' transitions form the batch of one Adam update. Each particle transition
    costs one evaluation of the neighbour differences, which ``logp_evals``/``grad_evals``
    include. After tuning the particles are not touched again.

    Parameters
    ----------
    vars : list of variables, optional
        Discrete variables (Bernoulli, Categorical, supported integer-valued ones); one block.
    parametrization : {"lsb1", "lsb2", "lsb2_min"}, default "lsb1"
        ``"lsb1"``: softmax mixture of the sqrt, Barker, min and max functions (starts with equal
        weights). ``"lsb2"``: ``g(t) = (h(t) + t h(1/t)) / 2`` with ``h`` a positive MLP of one
        hidden layer (starts at ``g = sqrt``). ``"lsb2_min"``: ``g = min{h(t), t h(1/t)}`` (the
        paper's first version; reaches light tails at near-impossible neighbours more easily). See
        :mod:`pymc_lbp.learning.learned_balancing`.
    differences : {"auto", "exact", "gradient"}, default "auto"
        Exact neighbour differences (LSB), first-order ones from the relaxed logp (FLSB), or
        "auto": first-order where they are measured to track the exact ones, exact otherwise
        (:mod:`pymc_lbp.target.differences_choice`; the choice is in :attr:`differences_choice`).
    n_particles : int, default 30
        Auxiliary particles advanced during tuning (the paper uses 30 on the Ising model).
        Sizes whose learning is clearly out of range are refused: more than
        ``learning.lsb.MAX_PARTICLES`` (10^5), or an estimated learning-step memory (particles x
        slots, sites and hidden units, :func:`pymc_lbp.learning.lsb.learning_memory_bytes`)
        above 2 GiB.
    learning_rate : float, default 1e-2
        Adam's step size.
    hidden : int, default 10
        Hidden units of the LSB2 network (ignored by ``"lsb1"``); the name
        :class:`~pymc_lbp.NeuralProposal` uses. ``hidden_units=`` is a deprecated alias.
    particle_weights : {"uniform", "target"}, default "uniform"
        Weights of the batch's transitions in the objective: equal, or proportional to the
        target density of their starting states (self-normalised over the batch, as in the
        paper's code; focuses learning on the best particle during burn-in).
    max_grad_norm : float, default 10
        The gradient is rescaled to at most this norm before each Adam step.
    steps_per_draw : int, optional
        MH steps per recorded draw (each one a learning update while tuning). ``None``
        (default): one per site of the block (one sweep; the ``mh_steps`` stat), none on a
        block of integer sites only (its draws are one informed jump per site, nothing is
        learned; give a number to learn there too).
    model, rng, initial_point, compile_kwargs, blocked
        As in PyMC's step methods.

    Notes
    -----
    Sampler statistics (one scalar per draw):

    ``tune`` (bool)
        Whether the draw was made while tuning (learning).
    ``accept`` (float)
        Mean MH acceptance probability of the chain's steps in the draw.
    ``n_accepted`` (int)
        Number of accepted steps in the draw.
    ``mh_steps`` (int)
        MH steps of the chain made for the draw.
    ``model_logp`` (float)
        Model logp at the new draw, as the step evaluated it (ArviZ: ``lp``); only when the
        step samples every free variable of the model.
    ``jump_distance`` (int)
        Number of sites that differ between the previous and the new draw.
    ``logp_evals`` (int)
        Model logp evaluations for the draw, the particles' included.
    ``grad_evals`` (int)
        Relaxed-logp gradient evaluations for the draw, the particles' included.
    ``exact_differences`` (bool)
        True when exact neighbour differences are used, False for first-order ones (why:
        ``step.differences_choice``).
    ``integer_accept``, ``integer_jump`` (float)
        Blocks with integer sites only: mean acceptance and mean absolute accepted jump of the
        draw's informed jumps, one per integer site (:mod:`pymc_lbp.proposals.integer_jumps`).
    ``lsb_loss`` (float)
        Mean batch estimate of the LSB objective over the draw's learning updates (the mutual
        information between consecutive states up to a parameter-free term); NaN after tuning.
    ``lsb_weight_sqrt``, ``lsb_weight_barker``, ``lsb_weight_min``, ``lsb_weight_max`` (float)
        LSB1 only: the current mixture weights.

    The learned parameters are ``step.lsb_params`` (``step.balancing_function(d)`` evaluates the
    learned ``log g(e^d)``); ``reset_tuning()`` restores the initial ones.
    """

    # learning a balancing function needs single-site steps, even where the sites share no term
    independent_sites_at_once = False
    name = "self_balancing"
    _state_class = SelfBalancingState

    def __init__(
        self,
        vars=None,
        *,
        parametrization: str = "lsb1",
        differences: str = "auto",
        n_particles: int = 30,
        learning_rate: float = 1e-2,
        hidden: int = 10,
        particle_weights: str = "uniform",
        max_grad_norm: float = 10.0,
        steps_per_draw: int | None = None,
        model=None,
        rng=None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
        hidden_units: int | None = None,
    ):
        if hidden_units is not None:
            warnings.warn(
                "SelfBalancing(hidden_units=...) is deprecated; use hidden=...",
                FutureWarning,
                stacklevel=2,
            )
            hidden = hidden_units
        if parametrization not in PARAMETRIZATIONS:
            make_parametrization(parametrization)  # raises the explanatory ValueError
        self.n_particles = _check_positive_int("n_particles", n_particles)
        hidden = _check_positive_int("hidden", hidden)
        learned_hidden = hidden if parametrization != "lsb1" else 0
        # the particle count and the network's size need no model: refuse before compiling
        check_learning_size(self.n_particles, 0, 0, learned_hidden)
        self.learning_rate = _check_positive_float("learning_rate", learning_rate)
        max_grad_norm = _check_positive_float("max_grad_norm", max_grad_norm)
        if particle_weights not in PARTICLE_WEIGHTS:
            raise ValueError(
                f"particle_weights must be one of {PARTICLE_WEIGHTS}, got {particle_weights!r}"
            )
        self.particle_weights = particle_weights
        self.parametrization = make_parametrization(parametrization, hidden)
        self._described: tuple[bytes, dict] = (b"", {})  # (parameters, their stats), see below
        self.stats_dtypes_shapes = {
            **DiscreteStep.stats_dtypes_shapes,
            "lsb_loss": (np.float64, []),
            **{k: (np.float64, []) for k in self.parametrization.describe(np.zeros(4))},
        }
        self.stats_dtypes = [{k: v[0] for k, v in self.stats_dtypes_shapes.items()}]
        super().__init__(
            vars,
            steps_per_draw=steps_per_draw,
            differences=differences,
            model=model,
            rng=rng,
            initial_point=initial_point,
            compile_kwargs=compile_kwargs,
            blocked=blocked,
        )
        # memory of the learning step (particles x slots, network on its grid): refuse now
        check_learning_size(
            self.n_particles, self.layout.n_sites, self.layout.n_slots, learned_hidden
        )
        # deterministic initialisation (not a draw from self.rng), so that results are
        # reproducible from pm.sample's random_seed whatever rng the step was built with
        self._initial_params = self.parametrization.initial_params(np.random.default_rng(INIT_SEED))
        mode = (compile_kwargs or {}).get("mode")
        self.learner = BalancingLearner(
            self.parametrization, self.learning_rate, max_grad_norm=max_grad_norm, mode=mode
        )
        self.learner.compile()  # now (cached per process), not inside the first tuning step
        self._adam = AdamState.fresh(self._initial_params)
        self._version = 0
        self._lq_cache: list = []
        self._reset_particles()
        self._extra_logp_evals = 0
        self._extra_grad_evals = 0

    # -- learned parameters and their state ------------------------------------------------------
    @property
    def lsb_params(self) -> np.ndarray:
        """The current parameter vector of the balancing function."""
        return self._adam.params

    @lsb_params.setter
    def lsb_params(self, value) -> None:
        value = np.array(value, dtype=float)
        if value.shape != (self.parametrization.n_params,):
            raise ValueError(
                f"lsb_params must have shape ({self.parametrization.n_params},), got {value.shape}"
            )
        self._adam.params = value
        self._version += 1

    @property
    def lsb_adam_m(self) -> np.ndarray:
        return self._adam.m

    @lsb_adam_m.setter
    def lsb_adam_m(self, value) -> None:
        self._adam.m = np.array(value, dtype=float)

    @property
    def lsb_adam_v(self) -> np.ndarray:
        return self._adam.v

    @lsb_adam_v.setter
    def lsb_adam_v(self, value) -> None:
        self._adam.v = np.array(value, dtype=float)

    @property
    def lsb_adam_t(self) -> float:
        return float(self._adam.t)

    @lsb_adam_t.setter
    def lsb_adam_t(self, value) -> None:
        self._adam.t = float(value)

    @property
    def lsb_particles(self) -> np.ndarray | None:
        """The auxiliary particles' states (``None`` before the first tuning step)."""
        return self._p_x

    @lsb_particles.setter
    def lsb_particles(self, value) -> None:
        self._reset_particles()
        if value is not None:
            value = np.array(value, dtype=np.int64)
            self._p_x = value
            evals = [self.differences(p) for p in value]
            self._p_logp = np.array([e[0] for e in evals])
            self._p_deltas = np.stack([e[1] for e in evals])

    def _reset_particles(self) -> None:
        self._p_x = None
        self._p_logp = None
        self._p_deltas = None

    def balancing_function(self, d: np.ndarray) -> np.ndarray:
        """The current (learned) balancing function in log space, ``d -> log g(e^d)``."""
        return self.parametrization.log_g(d, self.lsb_params)

    def reset_tuning(self) -> None:
        """Restore the untuned parameters, a fresh optimiser and no particles; tune again."""
        super().reset_tuning()
        self._adam = AdamState.fresh(self._initial_params)
        self._version += 1
        self._reset_particles()

    # -- the chain --------------------------------------------------------------------------------
    def _prepared(self, deltas: np.ndarray):
        """``(log_w, cdf, log_z)`` of the proposal at a state (None if nothing can be proposed).

        Cached for the chain's last two states while the parameters are frozen.
        """
        for entry in self._lq_cache:
            if entry[0] is deltas and entry[1] == self._version:
                return entry[2]
        return prepare_weights(self.parametrization.log_g(deltas, self._adam.params))

    def _transition(
        self, x: np.ndarray, logp: float, deltas: np.ndarray, cache: bool = False
    ) -> tuple[StepResult, _Transition | None]:
        prep = self._prepared(deltas)
        if prep is None:  # no neighbour has positive probability
            return StepResult(x, logp, deltas, 0.0, False, evaluated=False), None
        log_w, cdf, log_z = prep
        layout = self.layout
        slot = draw_from_cdf(cdf, self.rng)
        site = layout.slot_site[slot]
        old = int(x[site])
        y = x.copy()
        y[site] = layout.new_value(x, slot)
        logp_y, deltas_y = self.differences(y)
        reverse = layout.reverse_slot(slot, old)
        prep_y = self._prepared(deltas_y)
        log_q_rev = -np.inf if prep_y is None else prep_y[0][reverse] - prep_y[2]
        if cache:
            self._lq_cache = [(deltas, self._version, prep), (deltas_y, self._version, prep_y)]
        log_ratio = mh_log_ratio(logp, logp_y, log_w[slot] - log_z, log_q_rev)
        prob, accepted = mh_accept(log_ratio, self.rng)
        if not self.tune:  # frozen: nothing to learn from this transition
            if accepted:
                return StepResult(y, logp_y, deltas_y, prob, True), None
            return StepResult(x, logp, deltas, prob, False), None
        feasible = bool(np.isfinite(logp_y) and np.isfinite(log_q_rev))
        record = _Transition(
            deltas,
            deltas_y if feasible else deltas,
            slot,
            reverse if feasible else slot,
            float(logp_y - logp) if feasible else 0.0,
            feasible,
            logp,
        )
        if accepted:
            return StepResult(y, logp_y, deltas_y, prob, True), record
        return StepResult(x, logp, deltas, prob, False), record

    def mh_step(self, x: np.ndarray, logp: float, deltas: np.ndarray) -> StepResult:
        result, record = self._transition(x, logp, deltas, cache=not self.tune)
        if self.tune:
            loss = self._learn(x, logp, deltas, record)
            result.extra = {"lsb_loss": loss}
        return result

    # -- learning --------------------------------------------------------------------------------
    def _learn(self, x, logp, deltas, chain_record: _Transition | None) -> float:
        if self._p_x is None:
            n = self.n_particles
            self._p_x = np.tile(x, (n, 1))
            self._p_logp = np.full(n, logp)
            self._p_deltas = np.tile(deltas, (n, 1))
        records = [] if chain_record is None else [chain_record]
        records += self._advance_particles()
        if not records:
            return float("nan")
        if self.particle_weights == "target":
            lp = np.array([r.logp_x for r in records])
            weights = np.exp(lp - lp.max())
        else:
            weights = np.ones(len(records))
        weights = weights / weights.sum()
        batch = TransitionBatch(
            deltas_x=np.stack([r.deltas_x for r in records]),
            deltas_y=np.stack([r.deltas_y for r in records]),
            slot=np.array([r.slot for r in records], dtype=np.int64),
            reverse=np.array([r.reverse for r in records], dtype=np.int64),
            dlogp=np.array([r.dlogp for r in records], dtype=float),
            feasible=np.array([r.feasible for r in records], dtype=float),
            weights=weights,
        )
        self._adam, loss, _ = self.learner.update(self._adam, batch)
        self._version += 1
        return loss

    def _advance_particles(self) -> list[_Transition]:
        """One MH step of every particle (the proposal math vectorised over particles)."""
        layout = self.layout
        px, plogp, pdeltas = self._p_x, self._p_logp, self._p_deltas
        n = px.shape[0]
        params = self._adam.params
        log_w = self.parametrization.log_g(pdeltas, params)
        top = np.max(log_w, axis=1)
        movable = np.isfinite(top)
        top = np.where(movable, top, 0.0)
        cdf = np.cumsum(np.exp(log_w - top[:, None]), axis=1)
        u = self.rng.random(n) * cdf[:, -1]
        slot = np.minimum(np.sum(cdf <= u[:, None], axis=1), layout.n_slots - 1)
        with np.errstate(divide="ignore"):
            log_q_fwd = log_w[np.arange(n), slot] - (top + np.log(cdf[:, -1]))
        ys = px.copy()
        sites = layout.slot_site[slot]
        reverse = np.empty(n, dtype=np.int64)
        logp_y = np.full(n, -np.inf)
        deltas_y = pdeltas.copy()
        per_logp = self.differences.logp_evals_per_call
        per_grad = self.differences.grad_evals_per_call
        for i in np.flatnonzero(movable):
            old = int(px[i, sites[i]])
            ys[i, sites[i]] = layout.new_value(px[i], slot[i])
            reverse[i] = layout.reverse_slot(slot[i], old)
            logp_y[i], deltas_y[i] = self.differences(ys[i])
            self._extra_logp_evals += per_logp
            self._extra_grad_evals += per_grad
        log_w_y = self.parametrization.log_g(deltas_y, params)
        top_y = np.max(log_w_y, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_z_y = top_y + np.log(np.sum(np.exp(log_w_y - top_y[:, None]), axis=1))
            log_q_rev = log_w_y[np.arange(n), np.where(movable, reverse, 0)] - log_z_y
            log_ratio = logp_y - plogp + log_q_rev - log_q_fwd
        feasible = movable & np.isfinite(logp_y) & np.isfinite(log_q_rev)
        log_ratio = np.where(feasible & np.isfinite(log_ratio), log_ratio, -np.inf)
        accepted = self.rng.random(n) < np.exp(np.minimum(log_ratio, 0.0))
        records = []
        for i in np.flatnonzero(movable):
            ok = bool(feasible[i])
            records.append(
                _Transition(
                    pdeltas[i].copy(),
                    deltas_y[i] if ok else pdeltas[i].copy(),
                    int(slot[i]),
                    int(reverse[i]) if ok else int(slot[i]),
                    float(logp_y[i] - plogp[i]) if ok else 0.0,
                    ok,
                    float(plogp[i]),
                )
            )
        px[accepted] = ys[accepted]
        plogp[accepted] = logp_y[accepted]
        pdeltas[accepted] = deltas_y[accepted]
        return records

    # -- stats ----------------------------------------------------------------------------------
    def sweep_steps(self) -> int:
        """Steps per draw of ``steps_per_draw=None``: one per site of the block, integer sites
        included (the balancing function is learned from the steps, so integer sites are swept
        next to their jumps); none for a block of integer sites only, whose draws are their
        jumps as for the other samplers (a +-1 step has nothing to add to a jump over +-1 ..
        +-2^J; its learning cost 20 times the jumps' time on a one-site population size).
        Give ``steps_per_draw`` to learn on such a block all the same."""
        if self._integer_sites.size == self.layout.n_sites:
            return 0
        return self.layout.n_sites

    def astep(self, q0):
        self._extra_logp_evals = 0
        self._extra_grad_evals = 0
        q, stats = super().astep(q0)
        stats[0]["logp_evals"] += int(self._extra_logp_evals)
        stats[0]["grad_evals"] += int(self._extra_grad_evals)
        return q, stats

    def summarize_extras(self, extras: dict[str, list]) -> dict[str, Any]:
        losses = [v for v in extras.get("lsb_loss", []) if np.isfinite(v)]
        out: dict[str, Any] = {"lsb_loss": float(np.mean(losses)) if losses else float("nan")}
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
            out[slot] = np.exp(log_q[slot]) * (1.0 if ratio >= 0 else np.exp(ratio))
        return out
