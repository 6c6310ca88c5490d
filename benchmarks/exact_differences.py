"""Cost of exact neighbour differences: local (pymc_lbp.logp.local_differences) vs batched.

Per call of ``(logp, deltas) = differences(x)`` at a random state, against one evaluation of the
compiled model logp (measured in alternating blocks; the ratio is the median of per-block
ratios), on the LSB Ising (case 3) as :func:`pymc_lbp.models.segmentation_model` writes it and
as a user writes it (``pt.roll``), on 30x30 and 100x100 tori, and on a 30x30 Potts model
(q = 3). All in one process on the same machine; the batched method's 100x100 call is timed
over fewer calls (it takes seconds).

Writes docs/results/exact_differences.{json,md}.
Usage (from the repository root): python -m benchmarks.exact_differences [--repeats N] [--quick]
"""

from __future__ import annotations

import json
import platform
import sys
import time

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from benchmarks.common import RESULTS, benchmark_parser
from pymc_lbp.logp.differences import ExactDifferences
from pymc_lbp.logp.layout import BlockLayout, describe_block
from pymc_lbp.models import potts_model, segmentation_model


def user_ising(n: int, lam: float = 1.0, seed: int = 0) -> pm.Model:
    """The LSB Ising as a user writes it: Bernoulli image, spins, ``pt.roll`` coupling."""
    from pymc_lbp.models.lattice import segmentation_field

    alpha = segmentation_field(n, 1.0, 3.0, seed)
    with pm.Model() as model:
        b = pm.Bernoulli("b", logit_p=2 * alpha, shape=(n, n))
        s = 2 * b - 1
        pm.Potential(
            "coupling", lam * (pt.sum(s * pt.roll(s, 1, 0)) + pt.sum(s * pt.roll(s, 1, 1)))
        )
    return model


def targets(quick: bool):
    yield "ising30 (models)", lambda: segmentation_model(case=3, n=30)
    yield "ising30 (pt.roll)", lambda: user_ising(30)
    yield (
        "potts30 q=3",
        lambda: potts_model((30, 30), 3, 0.5, np.random.default_rng(0).normal(size=(30, 30, 3))),
    )
    if not quick:
        yield "ising100 (models)", lambda: segmentation_model(case=3, n=100)
        yield "ising100 (pt.roll)", lambda: user_ising(100)


def block(fn, x, calls: int) -> float:
    """Mean seconds per call over ``calls`` calls."""
    t = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - t) / calls


def interleaved(fns: dict, x, calls: dict, repeats: int) -> dict:
    """Per-call seconds of every function, measured in alternating blocks (so that load from
    other processes hits all alike); medians over repeats, and the median of the per-repeat
    ratio to the first function."""
    for fn in fns.values():
        fn(x)
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            times[k].append(block(fn, x, calls[k]))
    first = next(iter(fns))
    out = {k: float(np.median(v)) for k, v in times.items()}
    ratios = {k: float(np.median(np.array(v) / np.array(times[first]))) for k, v in times.items()}
    return out, ratios


def measure(name, make, repeats: int) -> dict:
    model = make()
    ip = model.initial_point()
    vars_ = model.value_vars
    specs = describe_block(model, vars_, ip)
    shared = pm.make_shared_replacements(ip, vars_, model)
    t = time.perf_counter()
    local = ExactDifferences(model, specs, BlockLayout(specs), shared, method="local")
    build_local = time.perf_counter() - t
    t = time.perf_counter()
    batched = ExactDifferences(model, specs, BlockLayout(specs), shared, method="batched")
    build_batched = time.perf_counter() - t
    lay = local.layout
    rng = np.random.default_rng(1)
    x = rng.integers(0, np.maximum(lay.site_ncat, 2)).astype(np.int64)
    lb, db = batched(x)
    ll, dl = local(x)
    fin = np.isfinite(db)
    err = float(np.max(np.abs(dl[fin] - db[fin]))) if fin.any() else 0.0
    same_mask = bool(np.array_equal(np.isfinite(dl), fin))
    times, ratios = interleaved(
        {"logp": local.logp, "local": local}, x, {"logp": 2000, "local": 500}, 3 * repeats
    )
    logp_s, local_s = times["logp"], times["local"]
    big = lay.n_slots * lay.n_sites > 2e6
    batched_s = float(
        np.median([block(batched, x, 1 if big else 10) for _ in range(2 if big else repeats)])
    )
    plan = local._local.plan
    row = {
        "target": name,
        "sites": int(lay.n_sites),
        "neighbours": int(lay.n_slots),
        "colours": int(plan.n_colours),
        "moved_states": int(plan.n_rows),
        "logp_ms": 1e3 * logp_s,
        "local_ms": 1e3 * local_s,
        "batched_ms": 1e3 * batched_s,
        "local_over_logp": ratios["local"],
        "batched_over_local": batched_s / local_s,
        "max_abs_difference": err,
        "same_minus_inf": same_mask,
        "build_local_s": build_local,
        "build_batched_s": build_batched,
    }
    print(json.dumps(row), flush=True)
    return row


def table(rows: list[dict]) -> str:
    head = (
        "| target | sites | neighbours | colours | moved states | logp (ms) | local (ms) | "
        "local / logp | batched (ms) | batched / local | max abs diff | build local (s) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['target']} | {r['sites']} | {r['neighbours']} | {r['colours']} | "
        f"{r['moved_states']} | {r['logp_ms']:.3f} | {r['local_ms']:.3f} | "
        f"{r['local_over_logp']:.1f} | {r['batched_ms']:.1f} | {r['batched_over_local']:.0f} | "
        f"{r['max_abs_difference']:.1e} | {r['build_local_s']:.1f} |\n"
        for r in rows
    )
    return head + body


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__, quick="30x30 targets only", repeats=5)
    args = parser.parse_args(argv)
    rows = [measure(name, make, args.repeats) for name, make in targets(args.quick)]
    meta = {
        "python": sys.version.split()[0],
        "pymc": pm.__version__,
        "pytensor": pytensor.__version__,
        "machine": platform.platform(),
        "blas_ldflags": pytensor.config.blas__ldflags,
        "repeats": args.repeats,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "exact_differences.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n"
    )
    md = (
        "# Exact differences: local vs batched\n\n"
        "Per call of `(logp, deltas) = differences(x)` (median of mean-per-call blocks), "
        "against one compiled model-logp evaluation. Generated by "
        "`benchmarks/exact_differences.py`; see docs/differences.md.\n\n"
        + table(rows)
        + f"\n{meta}\n"
    )
    (RESULTS / "exact_differences.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
