"""What 32 vectorised chains cost a CPU in arithmetic alone: one gradient of a mixed model's logp.

Issue #25 asked 32 chains vectorised on a 2-core CPU to cost at most 6x one chain's wall time a
draw. This benchmark isolates the part no program around it can batch away: the gradient of the
model's logp with respect to its continuous values (the leapfrog's work; the discrete values
held at the model's initial point), converted by PyMC's ``get_jaxified_graph`` as
``pymc_lbp.sample`` converts it. ``--steps`` gradient steps run inside one jitted
``lax.fori_loop`` (no Python dispatch between them), for one chain and for ``--chains`` chains
under ``jax.vmap``; the table gives microseconds a gradient and their ratio. A ratio of r means
a draw of those chains cannot cost less than about r times one chain's leapfrogs, before NUTS's
longest trajectory (the batched ``while_loop`` runs until every chain's tree is done) multiplies
it again.

Writes ``batched_gradient.{json,md}``. Run: ``python -m benchmarks.batched_gradient [--quick]``.
"""

from __future__ import annotations

from benchmarks.common import (
    add_out,
    benchmark_parser,
    machine_info,
    markdown_table,
    min_time,
    write_results,
)


def _gradient_loop(model, continuous: list[str], steps: int):
    """A function (values of ``continuous``, other values) -> values after ``steps`` small
    gradient steps, and the model's initial values of both."""
    import jax
    import jax.numpy as jnp
    from pymc.sampling.jax import get_jaxified_graph

    values = [model.rvs_to_values[v] for v in model.free_RVs]
    logp = get_jaxified_graph(inputs=values, outputs=[model.logp()])
    names = {model.rvs_to_values[model[n]].name for n in continuous}
    moving = [i for i, v in enumerate(values) if v.name in names]
    point = model.initial_point()
    start = [jnp.asarray(point[v.name]) for v in values]

    def logp_of(c, others):
        full = list(others)
        for k, i in enumerate(moving):
            full[i] = c[k]
        return logp(*full)[0]

    grad = jax.grad(logp_of)

    def loop(c, others):
        def body(_, c):
            return [ci + 1e-6 * gi for ci, gi in zip(c, grad(c, others), strict=True)]

        return jax.lax.fori_loop(0, steps, body, c)

    return loop, [start[i] for i in moving], start


def _seconds_a_gradient(fn, *args, steps: int, repeats: int) -> float:
    """Seconds a gradient: the fastest of ``repeats`` calls of ``fn`` (``steps`` gradients each),
    compiled by a first call that is not timed."""
    import jax

    jax.block_until_ready(fn(*args))
    return min_time(lambda: jax.block_until_ready(fn(*args)), n=steps, rounds=repeats)


def measure(name: str, chains: int, steps: int, repeats: int) -> dict:
    """Microseconds a gradient for one chain and for ``chains`` vectorised chains of model
    ``name`` (:data:`benchmarks.compiled_mixed_models.MODELS`)."""
    import jax
    import jax.numpy as jnp

    from benchmarks.compiled_mixed_models import MODELS

    spec = MODELS[name]
    loop, c0, others = _gradient_loop(spec.build(), spec.continuous, steps)
    batch = [jnp.stack([c + 1e-3 * k for k in range(chains)]) for c in c0]
    one = _seconds_a_gradient(jax.jit(loop), c0, others, steps=steps, repeats=repeats)
    batched = jax.jit(jax.vmap(loop, in_axes=(0, None)))
    many = _seconds_a_gradient(batched, batch, others, steps=steps, repeats=repeats)
    return {"model": name, "chains": chains, "one_chain_us": one * 1e6,
            "chains_us": many * 1e6, "ratio": many / one}  # fmt: skip


COLUMNS = [
    ("model", "model"),
    ("one_chain_us", "one chain: µs a gradient"),
    ("chains", "chains"),
    ("chains_us", "vectorised chains: µs a gradient"),
    ("ratio", "ratio"),
]


def main(argv: list[str] | None = None) -> dict:
    import jax

    from benchmarks.compiled_mixed_models import MODELS

    parser = benchmark_parser(__doc__, quick="one model, fewer steps", repeats=20, chains=32)
    parser.add_argument("--steps", type=int, default=200, help="gradients a timed call")
    add_out(parser)
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # pymc_lbp.sample's default
    models = list(MODELS)[:1] if args.quick else list(MODELS)
    steps = 20 if args.quick else args.steps
    rows = [measure(m, args.chains, steps, args.repeats) for m in models]
    name = "batched_gradient_quick" if args.quick else "batched_gradient"
    md = markdown_table(rows, COLUMNS)
    payload = {"machine": machine_info(), "steps": steps, "repeats": args.repeats, "rows": rows}
    write_results(name, payload, md, args.out)
    print(md)
    return payload


if __name__ == "__main__":
    main()
