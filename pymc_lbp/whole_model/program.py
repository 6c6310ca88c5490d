"""One chain of the compiled program: discrete draws, then NUTS given them, in one ``lax.scan``.

A draw of the chain (:func:`chain_program`) is every discrete block's draw
(:mod:`pymc_lbp.whole_model.discrete_blocks`) in turn, then one NUTS transition of the continuous
variables given the new discrete values: BlackJAX's ``nuts`` kernel on the model's logp (PyMC's
JAX conversion), its state's logp and gradient computed afresh at the draw's start because the
discrete move changed the target. Warmup runs the same draws while Stan's window adaptation
(:mod:`pymc_lbp.whole_model.warmup`, on BlackJAX's pieces) tunes the step size and the diagonal
inverse mass matrix; they are frozen for the draws kept. A model without continuous variables
has no NUTS part; one without discrete variables is plain NUTS. Where NUTS's target is the
model with the discrete sites summed out (:mod:`pymc_lbp.whole_model.marginal`), the draw runs
NUTS first and then the discrete draws, which draw the sites given NUTS's new values.

Precision (:attr:`Program.float_dtype`): NUTS's positions, momenta, gradient, step size and
inverse mass matrix are in the model's float type (``floatX``: float64 by default, float32 where
the user set it); the log density NUTS sees is the model's logp cast to float64, so its
energies, the trajectory's multinomial weights, the divergence check and the acceptance rate
are float64 sums of float32 terms, and the adaptation's statistics (dual averaging, Welford's
variances) are float64, cast to the float type where the kernel uses them. The discrete
kernels' acceptance ratios and uniforms are float64 in either case
(:mod:`pymc_lbp.samplers.mh_graph`). Under float64 every cast is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from pymc_lbp.step_methods.stats import STATS

NUTS_STAT_DTYPES = {
    "diverging": bool,
    "energy": np.float64,
    "tree_depth": np.int64,
    "n_steps": np.int64,
    "acceptance_rate": np.float64,
    "step_size": np.float64,
}
"""NUTS's stats under PyMC's names (``tree_depth``: BlackJAX's trajectory expansions)."""


STAT_DTYPES = {
    name: STATS[name].dtype
    for name in (
        "accept n_accepted mh_steps sites_changed logp_evals grad_evals integer_accept "
        "integer_jump_size exact_differences mean_path_length sites_moved_per_step path_scale "
        "lsb_loss learning_steps block flags_on pair_accept pairs_switched"
    ).split()
}
"""The discrete stats a draw of the program records, in its order, with their dtypes from the
one registry (:data:`pymc_lbp.step_methods.stats.STATS`). A step's others are recorded apart:
``tune`` and ``model_logp`` by the program (``lp``), SelfBalancing's descriptive ones by its
block's :attr:`BlockDraw.finish`."""


@dataclass
class BlockDraw:
    """One discrete step in the program.

    Made by :func:`pymc_lbp.whole_model.discrete_blocks.block_draw`.

    Attributes
    ----------
    step : DiscreteStep
    draw : callable
        ``(key, values, state, tuning) -> (values, state, stats)``, JAX-traceable (``tuning`` a
        Python bool: warmup or kept draws).
    init : callable
        ``() -> state``: the block's own state at a chain's start (its adaptation's).
    freeze : callable
        ``state -> state`` at the end of warmup.
    stat_names : tuple of str
    finish : callable
        ``stats -> stats`` on the recorded numpy arrays (SelfBalancing: its parameters per draw
        become the step's descriptive stats, e.g. LSB1's weights).
    """

    step: object
    draw: Callable
    init: Callable
    freeze: Callable
    stat_names: tuple[str, ...]
    finish: Callable = staticmethod(lambda stats: stats)


class ChainResult(NamedTuple):
    """A chain's draws: values in ``model.value_vars`` order (draw axis first) and stats."""

    warmup_values: tuple
    warmup_stats: dict
    values: tuple
    stats: dict


@dataclass
class Program:
    """What a chain runs.

    Attributes
    ----------
    blocks : list of BlockDraw
    continuous : list of int
        Indices in ``model.value_vars`` of the variables NUTS samples.
    logp : callable
        ``logp(*values)``: the model's logp (JAX).
    logp_and_gradient : callable
        ``(*values) -> [logp, *gradient]``, the gradient with respect to the continuous values:
        PyTensor's symbolic gradient (what ``pm.sample``'s NUTS uses), converted to JAX. NUTS
        differentiates through it, not through the converted logp: ``jax.grad`` of a
        ``switch`` whose other branch is infinite gives NaN (``0 * inf``, e.g. the gradient of
        ``Bernoulli(z * p)`` at ``z = 0``), PyTensor's gradient does not.
    target_accept : float
    max_treedepth : int
    float_dtype : str
        The continuous values' float type (``"float64"`` or ``"float32"``, ``floatX``): that of
        NUTS's positions, momenta, step size and inverse mass matrix.
    gated : dict
        ``{position of a value: position of its flag}`` in ``model.value_vars`` for the values
        a flag multiplies (:mod:`pymc_lbp.samplers.laplace_pairs`): NUTS's inverse mass for
        their entries is adapted apart over the draws where the entry's flag is on and used
        where it is on (:func:`pymc_lbp.whole_model.warmup.warmup`). With the flag off such a
        value has its prior's scale, with it on the data's, and one mass matrix cannot serve
        both: every trajectory started while a flag of a null predictor was on diverged.
    nuts_first : bool
        NUTS's transition first, then the discrete draws: where ``logp`` is the marginal logp
        of the continuous values (:mod:`pymc_lbp.whole_model.marginal`) and the blocks draw the
        summed variables from their full conditional given NUTS's new values.
    """

    blocks: list
    continuous: list[int]
    logp: Callable
    logp_and_gradient: Callable | None = None
    target_accept: float = 0.8
    max_treedepth: int = 10
    float_dtype: str = "float64"
    gated: dict = field(default_factory=dict)
    nuts_first: bool = False

    def run_chain(
        self, key, values: tuple, tune: int, draws: int, progress=None, *, chains: int | None = None
    ) -> ChainResult:
        """Warmup then draws from ``values`` (a chain's start); JAX-traceable in ``key`` and
        ``values`` (``tune``, ``draws`` static).

        With ``chains`` given, ``key`` and every array of ``values`` have a leading axis of that
        many chains, and so do the results (chain, draw, ...): the scans run over draws, and each
        draw's per-chain pieces (the discrete draws and NUTS transition) are ``jax.vmap``-ed
        inside them. NUTS's step size and mass matrix adapt once for all the chains
        (:mod:`pymc_lbp.whole_model.warmup`), so the chains' warmups differ from the chain run
        alone; without a warmup (``tune=0``) chain ``i`` computes what it computes alone, up to
        the rounding of batched arithmetic.
        Batching the draw rather than the whole chain traces it once per phase: ``vmap`` of a
        ``scan`` traces the scan's body again until the batched parts of its carry settle (the
        blocks' states start unbatched, so the warmup's body was traced a second time). The
        tracing times before and after are in docs/whole_model.md, "Compile time".
        """
        import jax
        import jax.numpy as jnp
        from blackjax.mcmc import hmc, nuts

        from pymc_lbp.whole_model.warmup import schedule, warmup

        cont = self.continuous
        kernel = nuts.build_kernel()
        adapt_init, adapt_update, adapt_final = warmup(
            self.target_accept, chains, gated=bool(self.gated)
        )
        if chains is None:

            def per_chain(f):
                return f

            def draws_first(a):
                return a

        else:

            def per_chain(f):  # axis_size: a block without state (empty tuples)
                return jax.vmap(f, axis_size=chains)

            def draws_first(a):  # a scan's stacked outputs: (draw, chain, ...) -> (chain, draw)
                return jnp.swapaxes(a, 0, 1)

        def merged(values, position):
            out = list(values)
            for i, p in zip(cont, position, strict=True):
                out[i] = p
            return tuple(out)

        float_dtype = jnp.dtype(self.float_dtype)

        # float64 whatever the model's float type (see the module docs); no-ops under float64
        @jax.custom_jvp
        def continuous_logp(position, values):
            return jnp.asarray(self.logp(*merged(values, position)), jnp.float64)

        @continuous_logp.defjvp
        def _continuous_logp_jvp(primals, tangents):
            position, values = primals
            out = self.logp_and_gradient(*merged(values, position))
            slope = sum(jnp.sum(g * t) for g, t in zip(out[1:], tangents[0], strict=True))
            return jnp.asarray(out[0], jnp.float64), jnp.asarray(slope, jnp.float64)

        def on_mask(values):
            """Per entry of NUTS's flattened position: whether a flag multiplying it is on."""
            parts = [
                jnp.ravel(values[self.gated[i]]) != 0
                if i in self.gated
                else jnp.zeros(jnp.size(values[i]), dtype=bool)
                for i in cont
            ]
            return jnp.concatenate(parts)

        def nuts_move(key, values, step_size, inverse_mass_matrix):
            """One NUTS transition of the continuous values given the others; its stats."""
            if self.gated:  # the inverse masses of the flags' states: fixed given the flags
                all_draws, flag_on = inverse_mass_matrix
                inverse_mass_matrix = jnp.where(on_mask(values), flag_on, all_draws)

            def logdensity(position):
                return continuous_logp(tuple(position), values)

            state = hmc.init([values[i] for i in cont], logdensity)
            step_size = jnp.asarray(step_size, float_dtype)
            state, info = kernel(
                key,
                state,
                logdensity,
                step_size,
                jnp.asarray(inverse_mass_matrix, float_dtype),
                max_num_doublings=self.max_treedepth,
            )
            stats = dict(
                diverging=info.is_divergent,
                energy=jnp.asarray(info.energy, jnp.float64),
                tree_depth=jnp.asarray(info.num_trajectory_expansions, jnp.int64),
                n_steps=jnp.asarray(info.num_integration_steps, jnp.int64),
                acceptance_rate=jnp.asarray(info.acceptance_rate, jnp.float64),
                step_size=jnp.asarray(step_size, jnp.float64),
                lp=jnp.asarray(state.logdensity, jnp.float64),
            )
            return merged(values, state.position), stats, info.acceptance_rate

        # one jitted function for both phases: JAX traces (and batches) NUTS's trajectory once
        # and the warmup's and the draws' transitions call the same traced form
        shared_nuts_move = jax.jit(nuts_move)

        def transition(key, values, states, step_size, inverse_mass_matrix, tuning):
            keys = jax.random.split(key, len(self.blocks) + 1)

            def nuts(values):
                if not cont:
                    return values, {}, None
                return shared_nuts_move(keys[-1], values, step_size, inverse_mass_matrix)

            if self.nuts_first:  # summed sites: drawn given NUTS's new values
                values, nuts_stats, acceptance_rate = nuts(values)
            per_block, new_states = [], []
            for i, block in enumerate(self.blocks):
                values, state, block_stats = block.draw(keys[i], values, states[i], tuning)
                per_block.append(block_stats)
                new_states.append(state)
            if not self.nuts_first:
                values, nuts_stats, acceptance_rate = nuts(values)
            # as pm.sample records them: a stat several steps record is stacked, step by step
            stats = {}
            for name in dict.fromkeys(k for b in per_block for k in b):
                recorded = [b[name] for b in per_block if name in b]
                stats[name] = recorded[0] if len(recorded) == 1 else jnp.stack(recorded)
            stats.update(nuts_stats)
            if not cont:
                stats["lp"] = jnp.asarray(self.logp(*values), jnp.float64)
            return values, tuple(new_states), stats, acceptance_rate

        # traced once per phase
        warm_transition = jax.jit(
            per_chain(lambda k, v, s, ss, imm: transition(k, v, s, ss, imm, True))
        )
        draw_transition = jax.jit(
            per_chain(lambda k, v, s, ss, imm: transition(k, v, s, ss, imm, False))
        )

        every = max(1, (tune + draws) // 50)

        def tick(i, phase):
            if progress is None:
                return
            jax.lax.cond(
                (i + 1) % every == 0,
                lambda: jax.debug.callback(progress, phase, i),
                lambda: None,
            )

        def split_keys(key, n):  # (n, [chains,] key): the scan's xs, a chain's keys as alone
            return draws_first(per_chain(lambda k: jax.random.split(k, n))(key))

        def every_chain(tree):  # the same arrays in every chain (the one adaptation's kernel)
            if chains is None:
                return tree
            return jax.tree_util.tree_map(
                lambda a: jnp.broadcast_to(a, (chains, *jnp.shape(a))), tree
            )

        if cont:  # one adaptation for all the chains (pymc_lbp.whole_model.warmup)
            first = [values[i] if chains is None else values[i][0] for i in cont]
            adapt_state = adapt_init(first, 1.0)
        else:
            adapt_state = None

        def warm(carry, xs):
            values, states, adapt_state = carry
            key, stage, i = xs
            if cont:
                step_size, imm = every_chain(
                    (adapt_state.step_size, adapt_state.inverse_mass_matrix)
                )
            else:
                step_size = imm = None
            values, states, stats, acceptance_rate = warm_transition(
                key, values, states, step_size, imm
            )
            if cont:
                on = per_chain(on_mask)(values) if self.gated else None
                adapt_state = adapt_update(
                    adapt_state, stage, [values[j] for j in cont], acceptance_rate, on
                )
            tick(i, 0)
            return (values, states, adapt_state), (values, stats)

        halves = per_chain(jax.random.split)(key)
        k_warm, k_draw = halves[..., 0, :], halves[..., 1, :]
        states = every_chain(tuple(block.init() for block in self.blocks))
        if tune:
            stages = jnp.asarray(schedule(tune))
            (values, states, adapt_state), (w_values, w_stats) = jax.lax.scan(
                warm,
                (values, states, adapt_state),
                (split_keys(k_warm, tune), stages, jnp.arange(tune)),
            )
            w_values, w_stats = jax.tree_util.tree_map(draws_first, (w_values, w_stats))
        else:
            w_values, w_stats = None, None
        # tuning ends: the blocks freeze what they adapted (pm.sample's stop_tuning)
        states = tuple(
            per_chain(block.freeze)(s) for block, s in zip(self.blocks, states, strict=True)
        )
        if cont:
            if tune:
                step_size, imm = every_chain(adapt_final(adapt_state))
            else:
                step_size, imm = every_chain(
                    (adapt_state.step_size, adapt_state.inverse_mass_matrix)
                )
        else:
            step_size = imm = None

        def sample(carry, xs):
            values, states = carry
            key, i = xs
            values, states, stats, _ = draw_transition(key, values, states, step_size, imm)
            tick(i, 1)
            return (values, states), (values, stats)

        _, (d_values, d_stats) = jax.lax.scan(
            sample, (values, states), (split_keys(k_draw, draws), jnp.arange(draws))
        )
        d_values, d_stats = jax.tree_util.tree_map(draws_first, (d_values, d_stats))
        return ChainResult(w_values, w_stats, d_values, d_stats)
