"""NeuralMixedBlock: learned joint proposals for a binary flag and the continuous value it
switches on (Wang et al. 2018's mixed blocks, their open-universe Gaussian mixture)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.blocking import RaveledVars
from pymc.pytensorf import join_nonshared_inputs
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence
from pymc.util import get_value_vars_from_user_vars
from pytensor.graph.replace import vectorize_graph
from pytensor.tensor.random.basic import BernoulliRV

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.logp.vectorising import checks_per_row, unblock_gathers
from pymc_lbp.samplers.block.mdn import positive_int
from pymc_lbp.samplers.block.motifs.flag_value import (
    HALF_WIDTH,
    canonical_flag_value_params,
    draw_flag_value,
    flag_value_log_q,
    flag_value_log_ratio,
    flag_value_reference_values,
    grid_size,
)
from pymc_lbp.samplers.block.neural_proposal import NeuralProposal, load_proposal
from pymc_lbp.samplers.common import mh_accept
from pymc_lbp.step_methods.base import DiscreteStep, DiscreteStepState
from pymc_lbp.step_methods.stats import document_stats, dtypes_shapes

_log = logging.getLogger("pymc_lbp")

DEFAULT_PROPOSAL = "flag-value-g32"
"""The shipped proposal used by default (``scripts/train_flag_value_proposal.py``)."""

PRIOR_DRAWS = 2000
"""Prior draws of the values that place the default grids (their 0.5% and 99.5% quantiles)."""


@document_stats
class NeuralMixedBlock(ArrayStepShared):
    """Block MH on (flag, value) pairs with a learned mixed proposal (Wang et al. 2018).

    The block of this step is one binary variable ``b`` (``Bernoulli``) and one continuous
    variable ``v`` of the same size; entry ``k`` of each forms the pair ``(b_k, v_k)``: a
    mixture component's active flag and its mean, an inclusion indicator and its coefficient.
    Each MH step updates one pair jointly from the other variables' current values:

    1. the model logp at the pair's ``2 G`` reference states (flag 0 and 1 times a grid of
       ``G`` values ``loc_k + scale_k t_j``, ``t_j`` in ``[-3, 3]``), in one batched call, gives
       the motif's parameters (:mod:`pymc_lbp.samplers.block.motifs.flag_value`);
    2. the network maps them to a mixture whose components hold a flag table and a Gaussian in
       ``t``; ``(b', t')`` is drawn from it and ``v' = loc_k + scale_k t'``;
    3. accept with ``min{1, pi(y) q(x_k) / (pi(x) q(y_k))}``, ``pi`` the model's own logp.

    ``q`` depends on the other variables only, never on the pair's own values, so this is an
    independence proposal within the pair's full conditional and the chain is exact whatever
    the grid or the network; they decide only how often proposals are accepted. A draw sweeps
    the pairs in a random order. A component can thus be born where the data call for one
    (flag on and mean placed there in one step) or die, which single-site moves of the flag
    (with the mean moving under its prior while inactive) do only when the mean happens to
    wander near unexplained data. Give the values a gradient sampler as well, which refines
    those of active pairs between block updates: ``pm.sample(step=[NeuralMixedBlock([b, v]),
    pm.NUTS([v, ...])])`` (PyMC assigns each variable to one step only, so NUTS must be named).

    Parameters
    ----------
    vars : list of two variables
        A ``Bernoulli`` variable and a continuous one (in any order) with the same number of
        entries. A transformed continuous variable (e.g. positive) is moved in its value space.
    proposal : NeuralProposal or str, default "flag-value-g32"
        A flag-value proposal (:func:`pymc_lbp.samplers.block.motifs.flag_value.flag_value_motif`),
        or the name or path of one for :func:`pymc_lbp.load_proposal`. The shipped one is trained on
        random grid profiles (``scripts/train_flag_value_proposal.py``; see
        ``docs/neural_block.md``).
    loc, scale : float or array_like, optional
        Centre and scale of each pair's grid in the value's (value-space) units, broadcast to
        the pairs: the grid covers ``loc +- 3 scale``. Default: from :data:`PRIOR_DRAWS` draws
        of the value's prior, ``loc`` the median and ``scale`` a sixth of the central 99%
        range. A grid that misses the posterior costs acceptance, never correctness.
    steps_per_draw : int, optional
        MH steps per recorded draw; default: the number of pairs (one sweep).
    model, rng, initial_point, compile_kwargs
        As in PyMC's step methods.

    Notes
    -----
    Sampler statistics (one scalar per draw):

    {stats_table}
    """

    jax_kind = "flag_value"
    name = "neural_mixed_block"
    # DiscreteStep's stats but the model's logp (NUTS records it)
    stats_dtypes_shapes: ClassVar[dict] = dtypes_shapes(
        *(s for s in DiscreteStep.stats_dtypes_shapes if s != "model_logp"), "flags_on"
    )
    conditional_stats: ClassVar[tuple[str, ...]] = ()
    _state_class = DiscreteStepState
    auto_assignable: ClassVar[bool] = False
    auto_assign_needs: ClassVar[str] = "the pairing of a Bernoulli flag with a continuous value"

    def __init__(
        self,
        vars,
        *,
        proposal: NeuralProposal | str = DEFAULT_PROPOSAL,
        loc=None,
        scale=None,
        steps_per_draw: int | None = None,
        model=None,
        rng=None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
    ):
        model = pm.modelcontext(model)
        if initial_point is None:
            initial_point = model.initial_point()
        flag, value = self._flag_and_value(vars, model, initial_point)
        self.n_pairs = int(np.size(initial_point[flag.name]))
        self.proposal = self._resolve_proposal(proposal)
        self.grid_points = grid_size(self.proposal.motif)
        self.loc, self.scale = self._grid_placement(model, value, loc, scale)
        self._references = np.stack(  # each pair's 2G reference states (flag, value)
            [
                flag_value_reference_values(m, s, self.grid_points)
                for m, s in zip(self.loc, self.scale, strict=True)
            ]
        )
        if steps_per_draw is None:
            steps_per_draw = self.n_pairs
        self.steps_per_draw = positive_int("steps_per_draw", steps_per_draw)

        vars = [flag, value]
        shared = pm.make_shared_replacements(initial_point, vars, model)
        [logp], joined = join_nonshared_inputs(initial_point, [model_logp(model)], vars, shared)
        kw = dict(on_unused_input="ignore", **(compile_kwargs or {}))
        self._logp_fn = pm_compile([joined], logp, **kw)
        self._logp_fn.trust_input = True
        rows = pt.matrix("rows", dtype=joined.dtype)
        batch = unblock_gathers(vectorize_graph(checks_per_row(logp), replace={joined: rows}))
        self._batch_fn = pm_compile([rows], batch, **kw)
        self._batch_fn.trust_input = True
        self.dtype = joined.dtype
        # the graphs, for the compiled program's pair updates (flag_value_graph)
        self._joined, self._logp_graph, self._rows, self._batch_graph = joined, logp, rows, batch
        self.tune = True
        super().__init__(vars, shared, rng=rng)
        start = np.concatenate(
            [np.ravel(initial_point[flag.name]), np.ravel(initial_point[value.name])]
        ).astype(self.dtype)
        if not np.isfinite(self._logp_fn(start)):
            raise ValueError(
                f"the model logp is not finite at the initial point of {flag.name!r} and "
                f"{value.name!r}; give an initial point with finite logp"
            )
        _log.info(
            "NeuralMixedBlock on (%s, %s): %d pairs, proposal %s, grid loc +- %g scale.",
            flag.name,
            value.name,
            self.n_pairs,
            self.proposal.motif.name,
            HALF_WIDTH,
        )

    # ------------------------------------------------------------------ construction
    @staticmethod
    def _flag_and_value(vars, model, initial_point) -> tuple:
        if vars is None:
            raise ValueError(
                "NeuralMixedBlock needs vars=[flag, value]: a Bernoulli and a continuous variable"
            )
        vars = get_value_vars_from_user_vars(vars, model)
        if len(vars) != 2 or vars[0] is vars[1]:
            raise ValueError(
                "NeuralMixedBlock needs exactly two variables, a Bernoulli flag and a continuous "
                f"value; got {[v.name for v in vars]}"
            )
        flags = [v for v in vars if isinstance(model.values_to_rvs[v].owner.op, BernoulliRV)]
        values = [v for v in vars if v.dtype.startswith("float")]
        if len(flags) != 1 or len(values) != 1:
            raise ValueError(
                "NeuralMixedBlock needs one Bernoulli variable and one continuous variable; got "
                + ", ".join(
                    f"{v.name!r} ({type(model.values_to_rvs[v].owner.op).__name__}, {v.dtype})"
                    for v in vars
                )
            )
        flag, value = flags[0], values[0]
        n_flag = np.size(initial_point[flag.name])
        n_value = np.size(initial_point[value.name])
        if n_flag != n_value:
            raise ValueError(
                f"the flag {flag.name!r} has {n_flag} entries and the value {value.name!r} "
                f"{n_value}; entry k of each forms a pair, so the sizes must match"
            )
        return flag, value

    @staticmethod
    def _resolve_proposal(proposal) -> NeuralProposal:
        if isinstance(proposal, str):
            proposal = load_proposal(proposal)
        if not isinstance(proposal, NeuralProposal):
            raise ValueError(
                "proposal must be a NeuralProposal or the name or path of one, got "
                f"{type(proposal).__name__}"
            )
        try:
            grid_size(proposal.motif)
        except ValueError as err:
            raise ValueError(
                f"NeuralMixedBlock needs a flag-value proposal; {err} (see "
                "pymc_lbp.samplers.block.motifs.flag_value.flag_value_motif)"
            ) from None
        return proposal

    def _grid_placement(self, model, value, loc, scale) -> tuple[np.ndarray, np.ndarray]:
        n = self.n_pairs
        if loc is None or scale is None:
            draws = self._prior_value_draws(model, value)
            lo, mid, hi = np.quantile(draws, [0.005, 0.5, 0.995], axis=0)
            if loc is None:
                loc = mid
            if scale is None:
                scale = (hi - lo) / (2 * HALF_WIDTH)
                if not np.all(np.isfinite(scale) & (scale > 0)):
                    raise ValueError(
                        f"the prior of {value.name!r} does not give a grid scale (its draws are "
                        "not spread); pass scale="
                    )
        try:
            loc = np.broadcast_to(np.asarray(loc, dtype=np.float64).ravel(), (n,)).copy()
            scale = np.broadcast_to(np.asarray(scale, dtype=np.float64).ravel(), (n,)).copy()
        except ValueError:
            raise ValueError(
                f"loc and scale must be scalars or have one entry per pair ({n})"
            ) from None
        if not np.all(np.isfinite(loc)):
            raise ValueError(f"loc must be finite, got {loc}")
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError(f"scale must be positive and finite, got {scale}")
        return loc, scale

    def _prior_value_draws(self, model, value) -> np.ndarray:
        """Prior draws of the value variable in its value space, shape (draws, n_pairs)."""
        rv = model.values_to_rvs[value]
        # a fixed seed: the same model gets the same grid (the step's rng is not touched)
        draws = np.asarray(pm.draw(rv, draws=PRIOR_DRAWS, random_seed=0), dtype=np.float64)
        transform = model.rvs_to_transforms.get(rv)
        if transform is not None:
            draws = np.asarray(
                transform.forward(pt.as_tensor(draws), *rv.owner.inputs).eval(), dtype=np.float64
            )
        return draws.reshape(PRIOR_DRAWS, -1)

    # ------------------------------------------------------------------ sampling
    def program_steps(self, model, to_jax):
        """This step's steps of a draw in :func:`pymc_lbp.sample`'s compiled program
        (:func:`pymc_lbp.samplers.block.jax_flag_value.program_steps`)."""
        from pymc_lbp.samplers.block.jax_flag_value import program_steps

        return program_steps(self, model, to_jax)

    def reset_tuning(self) -> None:
        """Nothing is tuned; the ``tune`` flag is restored for a new chain."""
        self.tune = True

    def stop_tuning(self) -> None:
        """Nothing is tuned; later draws are marked ``tune=False``."""
        self.tune = False

    def pair_update(
        self, q: np.ndarray, logp: float, k: int
    ) -> tuple[np.ndarray, float, float, bool]:
        """One MH step on pair ``k`` from state ``q`` (flags then values) of logp ``logp``.

        Returns the new state, its logp, the acceptance probability and whether it was accepted.
        """
        n = self.n_pairs
        loc, scale = self.loc[k], self.scale[k]
        rows = np.repeat(q[None, :], 2 * self.grid_points, axis=0)
        rows[:, [k, n + k]] = self._references[k]
        params = canonical_flag_value_params(self._batch_fn(rows))
        log_w, log_tables, means, sds = self.proposal.net.full_mixture_from_preactivation(
            self.proposal.prepare(params)[None]
        )
        mix = (log_w[0], log_tables[0], means[0], sds[0])
        flag_y, t_y = draw_flag_value(*mix, self.rng)
        t_x = (q[n + k] - loc) / scale
        log_q = flag_value_log_q(*mix, np.array([q[k], flag_y]), np.array([t_x, t_y]))
        y = q.copy()
        y[k] = flag_y
        y[n + k] = loc + scale * t_y
        logp_y = float(self._logp_fn(y))
        prob, accepted = mh_accept(
            flag_value_log_ratio(logp, logp_y, log_q[0], log_q[1]), self.rng.random()
        )
        if accepted:
            return y, logp_y, prob, True
        return q, logp, prob, False

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        q = np.asarray(q0.data, dtype=self.dtype).copy()
        logp = float(self._logp_fn(q))
        n_steps = self.steps_per_draw
        order = np.concatenate(
            [self.rng.permutation(self.n_pairs) for _ in range(-(-n_steps // self.n_pairs))]
        )[:n_steps]
        sum_accept, n_accepted = 0.0, 0
        for k in order:
            q, logp, prob, accepted = self.pair_update(q, logp, int(k))
            sum_accept += prob
            n_accepted += accepted
        stats = {
            "tune": bool(self.tune),
            "accept": sum_accept / n_steps,
            "n_accepted": n_accepted,
            "mh_steps": n_steps,
            "sites_changed": int(np.sum(q != q0.data)),
            "flags_on": int(np.sum(q[: self.n_pairs] != 0)),
            "logp_evals": 1 + n_steps * (2 * self.grid_points + 1),
            "grad_evals": 0,
        }
        return RaveledVars(q, q0.point_map_info), [stats]

    @classmethod
    def competence(cls, var, has_grad=None) -> Competence:
        """Never auto-assigned: the pairs are chosen by the user."""
        return Competence.INCOMPATIBLE
