"""Neural Block Sampling on a chain CRF (Wang et al. 2018's tagging experiment, synthetic).

A chain CRF over ``T`` tags with ``K = 3`` categories, written the way a PyMC user writes it:
``Categorical`` tags, the transition log-potentials ``W[z[:-1], z[1:]]`` and the emission
log-potentials ``U[t, z[t]]`` as ``pm.Potential`` terms. The transitions are strongly sticky
(``W = s I``, ``s = 3``), so the posterior has *local modes*: changing the tag of one site inside
a segment costs ``2 s`` nats, and a segment's label changes only through its boundaries. The
data: a sticky chain of true tags (stay probability 0.9) observed through Gaussian noise between
the neighbouring levels 0, 1, 2 (sd 0.8), so neighbouring tags are often ambiguous.

Each sampler runs one chain through ``pm.sample`` for about the same wall time (a pilot run sets
the number of draws), from a random start; the running estimates of the marginals
``P(z_t = k)`` are compared with the exact ones (forward-backward) over wall time, and the
log-density of every draw is recorded. Samplers:

``neural``
    ``NeuralBlock([z])`` with defaults: the chain is found in the model graph and the shipped
    ``chain-k3-b3`` proposal (trained once on random chain potentials, never on this model)
    proposes blocks of 3 consecutive tags; one draw = one MH step per block.
``block-gibbs``
    The same blocks resampled from their exact conditionals (27 states each).
``gibbs``
    Our single-site Gibbs (``NeuralBlock(blocks=None)``); one draw = one update per site.
``pymc-categorical``
    PyMC's ``CategoricalGibbsMetropolis`` (its default for ``Categorical``); one draw = a sweep.
``locally-balanced``, ``path-auxiliary``
    ``LocallyBalanced([z])`` and ``PathAuxiliaryLBP([z])`` with defaults.

Wall time counts from the first step (construction and compilation are reported separately);
there is no burn-in cut. Medians over repeats (different data start states and seeds).

Outputs: ``docs/results/chain_crf.{json,md,png}``.

Usage::

    python -m benchmarks.chain_crf                    # default: 10 s per run, 3 repeats
    python -m benchmarks.chain_crf --quick --out /tmp # smoke run
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from benchmarks.common import (
    add_out,
    at_times,
    benchmark_parser,
    load_info,
    machine_info,
    pyplot,
    save_figure,
    timed_sample,
    write_results,
)
from pymc_lbp import LocallyBalanced, NeuralBlock, PathAuxiliaryLBP
from pymc_lbp.samplers.block.motifs.chain import chain_blocks

SAMPLERS = (
    "neural",
    "block-gibbs",
    "gibbs",
    "pymc-categorical",
    "locally-balanced",
    "path-auxiliary",
)
K = 3
STICK = 3.0
LEVELS = np.array([0.0, 1.0, 2.0])
NOISE = 0.8


def crf_data(T: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Transition ``W (K, K)`` and emission ``U (T, K)`` log-potentials."""
    rng = np.random.default_rng(seed)
    z = np.zeros(T, dtype=int)
    z[0] = rng.integers(K)
    for t in range(1, T):
        z[t] = z[t - 1] if rng.random() < 0.9 else rng.integers(K)
    y = rng.normal(LEVELS[z], NOISE)
    U = -0.5 * ((y[:, None] - LEVELS[None, :]) / NOISE) ** 2
    return STICK * np.eye(K), U


def build_model(W: np.ndarray, U: np.ndarray, start: np.ndarray) -> pm.Model:
    """The CRF as a user writes it."""
    T = U.shape[0]
    with pm.Model() as model:
        z = pm.Categorical("z", p=np.full(K, 1.0 / K), shape=T, initval=start)
        pm.Potential("transitions", pt.as_tensor(W)[z[:-1], z[1:]].sum())
        pm.Potential("emissions", pt.as_tensor(U)[np.arange(T), z].sum())
    return model


def exact_marginals(W: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Forward-backward marginals ``(T, K)`` of the chain CRF."""
    T = U.shape[0]
    psi = np.exp(W - W.max())
    em = np.exp(U - U.max(axis=1, keepdims=True))
    alpha = np.zeros((T, K))
    alpha[0] = em[0] / em[0].sum()
    for t in range(1, T):
        alpha[t] = (alpha[t - 1] @ psi) * em[t]
        alpha[t] /= alpha[t].sum()
    beta = np.ones((T, K))
    for t in range(T - 2, -1, -1):
        beta[t] = psi @ (em[t + 1] * beta[t + 1])
        beta[t] /= beta[t].sum()
    post = alpha * beta
    return post / post.sum(axis=1, keepdims=True)


def log_density(states: np.ndarray, W: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Unnormalised log density of every state (draws, T)."""
    t = np.arange(U.shape[0])
    return W[states[:, :-1], states[:, 1:]].sum(axis=1) + U[t, states].sum(axis=1)


def make_step(name: str, model: pm.Model, T: int):
    z = model["z"]
    if name == "neural":
        return NeuralBlock([z])
    if name == "block-gibbs":
        return NeuralBlock([z], blocks=chain_blocks("z", T, K, 3), proposal="exact")
    if name == "gibbs":
        return NeuralBlock([z], blocks=None)
    if name == "pymc-categorical":
        return pm.CategoricalGibbsMetropolis([z])
    if name == "locally-balanced":
        return LocallyBalanced([z])
    if name == "path-auxiliary":
        return PathAuxiliaryLBP([z])
    raise ValueError(name)


def run_one(model, step, draws: int, seed: int):
    """Sample one chain; returns (states (draws, T), seconds since the first step per draw,
    idata)."""
    idata, stamps = timed_sample(model, step, draws, seed)
    return idata.posterior["z"].values[0].astype(np.int64), stamps, idata


def error_curve(states: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Mean ``|P_hat(z_t = k) - P(z_t = k)|`` over sites and categories, after every draw."""
    onehot = states[:, :, None] == np.arange(K)
    running = np.cumsum(onehot, axis=0) / np.arange(1, len(states) + 1)[:, None, None]
    return np.abs(running - exact[None]).mean(axis=(1, 2))


def main(argv: list[str] | None = None) -> dict:
    ap = benchmark_parser(__doc__, quick="smoke run: short budget", repeats=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="wall-time budget per run")
    ap.add_argument("--tags", type=int, default=120, help="chain length T")
    ap.add_argument("--samplers", nargs="*", default=list(SAMPLERS))
    add_out(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats, args.tags = 0.05, 1, 12
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    T = args.tags
    checkpoints = [args.seconds * f for f in (0.1, 0.25, 0.5, 1.0)]
    rows, curves = [], {}
    for rep in range(args.repeats):
        W, U = crf_data(T, seed=rep)
        exact = exact_marginals(W, U)
        start = np.random.default_rng(100 + rep).integers(0, K, size=T)
        map_like = float(log_density(exact.argmax(axis=1)[None], W, U)[0])
        for name in args.samplers:
            model = build_model(W, U, start)
            t0 = time.perf_counter()
            with model:
                step = make_step(name, model, T)
            setup = time.perf_counter() - t0
            _, pilot, _ = run_one(model, step, 30, seed=1000 + rep)
            per_draw = max((pilot[-1] - pilot[9]) / 20, 1e-4)  # after first-use compilation
            draws = max(20, int(args.seconds / per_draw))
            with model:
                step = make_step(name, model, T)
            states, stamps, idata = run_one(model, step, draws, seed=rep)
            err = error_curve(states, exact)
            logp = log_density(states, W, U)
            stats = getattr(idata, "sample_stats", {})
            row = {
                "sampler": name,
                "repeat": rep,
                "setup_seconds": setup,
                "seconds": float(stamps[-1]),
                "draws": draws,
                "draws_per_second": draws / float(stamps[-1]),
                "final_error": float(err[-1]),
                "error_at": dict(
                    zip(
                        [f"{c:g}s" for c in checkpoints],
                        at_times(stamps, err, checkpoints),
                        strict=True,
                    )
                ),
                "mean_log_density_last_half": float(logp[len(logp) // 2 :].mean()),
                "log_density_of_marginal_argmax": map_like,
                "accept": float(stats["accept"].mean()) if "accept" in stats else None,
                "blocks_reason": getattr(step, "blocks_reason", None),
            }
            rows.append(row)
            curves[(name, rep)] = (stamps, err, logp)
            print(
                f"rep {rep} {name:17s}: {draws} draws in {row['seconds']:.1f}s (setup "
                f"{setup:.1f}s), error {row['final_error']:.4f}, accept {row['accept']}",
                flush=True,
            )
    payload = {
        "meta": {
            "seconds": args.seconds,
            "repeats": args.repeats,
            "tags": T,
            "K": K,
            "stick": STICK,
            "machine": machine_info(),
            "load": load_info(),
        },
        "rows": rows,
    }
    write_outputs(payload, curves, args, checkpoints)
    return payload


def write_outputs(payload: dict, curves: dict, args, checkpoints) -> None:
    stem = "chain_crf" + ("_quick" if args.quick else "")
    rows = payload["rows"]
    half = f"{checkpoints[1]:g}s"
    lines = [
        f"Chain CRF, T = {args.tags} tags, K = {K}, sticky transitions (s = {STICK:g}): mean "
        f"absolute marginal error after {args.seconds:g} s of sampling, median over "
        f"{args.repeats} repeat(s), one chain, lower is better. Machine: "
        f"{payload['meta']['machine'].get('cpus')} CPUs, load {payload['meta']['load']}.",
        "",
        f"| sampler | error at {args.seconds:g} s | error at {half} | draws/s | setup s | "
        "mean log density (last half) | accept |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in args.samplers:
        rs = [r for r in rows if r["sampler"] == name]
        if not rs:
            continue
        mid = [r["error_at"][half] for r in rs if r["error_at"][half] is not None]
        acc = [r["accept"] for r in rs if r["accept"] is not None]
        lines.append(
            f"| {name} | {np.median([r['final_error'] for r in rs]):.4f} | "
            + (f"{np.median(mid):.4f}" if mid else "-")
            + f" | {np.median([r['draws_per_second'] for r in rs]):.0f} | "
            f"{np.median([r['setup_seconds'] for r in rs]):.2f} | "
            f"{np.median([r['mean_log_density_last_half'] for r in rs]):.1f} | "
            + (f"{np.median(acc):.3f}" if acc else "-")
            + " |"
        )
    lines += [
        "",
        "Log density of the marginal argmax (a reference level): "
        + ", ".join(
            f"{r['log_density_of_marginal_argmax']:.1f}" for r in rows[:: len(args.samplers)]
        ),
    ]
    _, md_path = write_results(stem, payload, "\n".join(lines) + "\n", args.out, indent=1)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = {n: f"C{i}" for i, n in enumerate(SAMPLERS)}
    for (name, rep), (stamps, err, logp) in curves.items():
        label = name if rep == 0 else None
        axes[0].plot(stamps, err, color=colors[name], lw=1.1, alpha=0.85, label=label)
        axes[1].plot(stamps, logp, color=colors[name], lw=0.8, alpha=0.7, label=label)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("wall time (s)")
    axes[0].set_ylabel("mean |marginal error|")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("wall time (s)")
    axes[1].set_ylabel("log density of the draw")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    save_figure(fig, md_path.with_suffix(".png"))


if __name__ == "__main__":
    main()
