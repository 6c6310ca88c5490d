"""LocallyBalanced: single-site locally balanced proposals (Zanella 2020)."""

from __future__ import annotations

import numpy as np

from pymc_lbp.balancing import LogBalancing, resolve_balancing
from pymc_lbp.proposals import draw_categorical, log_normalize, mh_accept, mh_log_ratio
from pymc_lbp.step_methods.base import DiscreteStep, StepResult


def locally_balanced_log_q(deltas: np.ndarray, log_g: LogBalancing) -> np.ndarray:
    """Log proposal probabilities ``Q(s|x) = softmax_s(log g(e^{Delta_s}))`` over slots."""
    return log_normalize(log_g(deltas))


class LocallyBalanced(DiscreteStep):
    """Locally balanced single-site proposals with an MH correction (Zanella 2020).

    From state ``x`` a one-site move ``s`` (flip a binary site, move a categorical site to another
    category, step an integer site by +-1 within its support) is proposed with probability
    ``Q(s|x) ∝ g(pi(x^(s)) / pi(x))`` and accepted with
    ``min{1, pi(y) Q(s'|y) / (pi(x) Q(s|x))}``, ``s'`` the move back.

    Parameters
    ----------
    vars : list of variables, optional
        Discrete variables (Bernoulli, Categorical, supported integer-valued ones); one block.
    balancing : {"sqrt", "barker", "min", "max"} or callable, default "sqrt"
        The balancing function ``g`` (see :mod:`pymc_lbp.balancing`); a callable maps log-ratios
        ``d`` to ``log g(e^d)`` and must be balanced.
    differences : {"exact", "gradient", "auto"}, default "exact"
        Exact neighbour differences (one logp evaluation per neighbour, batched) or first-order
        ones from the relaxed logp (see :class:`GibbsWithGradients`).
    steps_per_draw : int, default 1
        MH steps per recorded draw.
    model, rng, initial_point, compile_kwargs, blocked
        As in PyMC's step methods.

    Notes
    -----
    Sampler statistics (one scalar per draw):

    ``accept`` (float)
        Mean MH acceptance probability over the draw's steps.
    ``accepted`` (bool)
        Whether any of the draw's steps was accepted.
    ``n_accepted`` (int)
        Number of accepted steps in the draw.
    ``jump_distance`` (int)
        Number of sites that differ between the previous and the new draw.
    ``logp_evals`` (int)
        Model logp evaluations made for the draw (exact differences: one per neighbour).
    ``grad_evals`` (int)
        Relaxed-logp gradient evaluations made for the draw.
    """

    name = "locally_balanced"

    def __init__(
        self,
        vars=None,
        *,
        balancing: str | LogBalancing = "sqrt",
        differences: str = "exact",
        steps_per_draw: int = 1,
        model=None,
        rng=None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
    ):
        self.balancing, self.log_g = resolve_balancing(balancing)
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

    def mh_step(self, x: np.ndarray, logp: float, deltas: np.ndarray) -> StepResult:
        log_q_x = locally_balanced_log_q(deltas, self.log_g)
        if not np.isfinite(log_q_x).any():
            return StepResult(x, logp, deltas, 0.0, False, evaluated=False)
        slot = draw_categorical(log_q_x, self.rng)
        site = self.layout.slot_site[slot]
        old = int(x[site])
        y = x.copy()
        y[site] = self.layout.new_value(x, slot)
        logp_y, deltas_y = self.differences(y)
        reverse = self.layout.reverse_slot(slot, old)
        log_q_y = locally_balanced_log_q(deltas_y, self.log_g)
        log_ratio = mh_log_ratio(logp, logp_y, log_q_x[slot], log_q_y[reverse])
        prob, accepted = mh_accept(log_ratio, self.rng)
        if accepted:
            return StepResult(y, logp_y, deltas_y, prob, True)
        return StepResult(x, logp, deltas, prob, False)
