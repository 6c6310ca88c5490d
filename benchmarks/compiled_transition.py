"""Compiled transition vs the Python loop of MH steps: per-step time, construction, ESS/s.

Part 1, per MH step (each the minimum over 7 interleaved rounds of a mean over many calls, one
core; the machine is shared): one compiled logp-and-differences
call (``step.differences(x)``, what one MH step must evaluate at its proposal), the numpy
reference transition in a Python loop (``single_site_step``, how sampling ran before), and the
compiled kernel (``step.kernel``: ``steps`` transitions in one pytensor ``scan`` call), per
backend (C, NUMBA). Targets: the LSB image-segmentation Ising, case 3 (30x30, 900 binary sites,
GibbsWithGradients), and a 200-point two-component Gaussian mixture with Categorical assignments
(GibbsWithGradients and LocallyBalanced with exact differences, 200 sites x 2 slots; the means
and weights are shared inputs, as next to NUTS).

Part 2, construction time of GibbsWithGradients on the Ising, cold (a fresh pytensor compile
directory, in a subprocess) and warm (the same directory again).

Part 3, ``pm.sample`` on LSB case 3 with ``GibbsWithGradients(steps_per_draw=100)``, 2 chains,
one core: the compiled kernel against the same step running the Python loop of the numpy
reference (before); ESS of the Hamming statistic (benchmarks/common.py), wall seconds, ESS/s.

Writes docs/results/compiled_transition.{json,md}.

Usage: python -m benchmarks.compiled_transition [--quick] [--modes C NUMBA]
       [--parts steps construct sample]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pymc as pm

from benchmarks.common import (
    RESULTS,
    ROOT,
    benchmark_parser,
    machine_info,
    markdown_table,
    run_step,
    write_results,
)
from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.models import segmentation_model
from pymc_lbp.samplers.single_site.reference import single_site_step, single_site_steps


class PythonLoopGWG(GibbsWithGradients):
    """GibbsWithGradients running the numpy reference (``single_site_steps``) in a Python loop
    (before)."""

    def run_steps(self, x, logp, deltas, n_steps):
        uniforms = self.rng.random((n_steps, 2))
        evaluate = self.differences.evaluate
        res = single_site_steps(
            x, logp, deltas, self.proposal_weights, self.layout, evaluate, uniforms
        )
        return self.draw_from_kernel(res)


def mixture_model(n: int = 200, seed: int = 1) -> pm.Model:
    rng = np.random.default_rng(seed)
    data = np.r_[rng.normal(-2, 1, n // 2), rng.normal(2, 1, n - n // 2)]
    with pm.Model() as model:
        mu = pm.Normal("mu", [-1.0, 1.0], 3.0)
        w = pm.Dirichlet("w", np.ones(2))
        z = pm.Categorical("z", w, shape=n)
        pm.Normal("y", mu[z], 1.0, observed=data)
    return model


def _interleaved_min_times(fns: dict, n: dict, rounds: int = 7) -> dict:
    """Seconds per call of each function: the minimum over ``rounds`` of the mean of ``n[k]``
    calls, the functions taking turns within each round (robust to other load on the machine)."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, np.inf)
    for _ in range(rounds):
        for key, fn in fns.items():
            t = time.perf_counter()
            for _ in range(n[key]):
                fn()
            best[key] = min(best[key], (time.perf_counter() - t) / n[key])
    return best


def per_step(target: str, model, var: str, make, mode: str | None, steps: int, n: int) -> dict:
    ck = {"mode": mode} if mode else None
    with model:
        t0 = time.perf_counter()
        step = make([model[var]], ck)
        construct = time.perf_counter() - t0
    x = step._state_vector(model.initial_point())
    logp, deltas = step.differences(x)
    rng = np.random.default_rng(0)
    # move away from the start so timings are on typical states
    res = step.kernel(x, logp, deltas, rng.random((200, 2)))
    x, logp, deltas = res.x, res.logp, res.deltas
    state = {"x": x, "logp": logp, "prepared": step.proposal_weights(deltas)}

    def python_step():
        u_slot, u_accept = rng.random(), rng.random()
        move = single_site_step(
            state["x"],
            state["logp"],
            state["prepared"],
            step.layout,
            step.differences.evaluate,
            u_slot,
            u_accept,
        )
        if move.accepted:
            state.update(x=move.x, logp=move.logp, prepared=move.prepared)

    U = rng.random((steps, 2))
    U1 = U[:1]
    t = _interleaved_min_times(
        {
            "diff": lambda: step.differences(x),
            "python": python_step,
            "compiled": lambda: step.kernel(x, logp, deltas, U),
            "compiled1": lambda: step.kernel(x, logp, deltas, U1),
        },
        {"diff": n, "python": n, "compiled": max(1, n // steps), "compiled1": n},
    )
    t_diff, t_py, t_k1 = t["diff"], t["python"], t["compiled1"]
    t_k = t["compiled"] / steps
    return {
        "target": target,
        "mode": mode or "C",
        "steps_per_call": steps,
        "construct_s": construct,
        "differences_us": 1e6 * t_diff,
        "python_step_us": 1e6 * t_py,
        "compiled_step_us": 1e6 * t_k,
        "compiled_one_step_call_us": 1e6 * t_k1,
        "compiled_over_differences": t_k / t_diff,
        "python_over_compiled": t_py / t_k,
    }


CONSTRUCT = """
import time
from pymc_lbp import GibbsWithGradients
from pymc_lbp.models import segmentation_model
model = segmentation_model(case=3)
with model:
    t = time.perf_counter()
    GibbsWithGradients([model["x"]], steps_per_draw=100)
    print(time.perf_counter() - t)
"""


def construction_times() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        flags = env.get("PYTENSOR_FLAGS", "")
        env["PYTENSOR_FLAGS"] = ",".join(f for f in (flags, f"base_compiledir={tmp}") if f)
        env["PYTHONPATH"] = str(ROOT)
        out = []
        for _ in range(2):
            r = subprocess.run(
                [sys.executable, "-c", CONSTRUCT],
                env=env,
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            if r.returncode:
                raise RuntimeError(f"construction run failed:\n{r.stderr[-3000:]}")
            out.append(float(r.stdout.strip().splitlines()[-1]))
    return {"cold_s": out[0], "warm_s": out[1]}


def ess_runs(draws: int, tune: int, chains: int) -> list[dict]:
    model = segmentation_model(case=3)
    rows = []
    for name, cls in (("compiled kernel", GibbsWithGradients), ("Python loop", PythonLoopGWG)):
        run = run_step(
            model,
            ["x"],
            lambda v, cls=cls: cls(v, steps_per_draw=100),
            target="LSB case 3",
            sampler=f"GibbsWithGradients(100), {name}",
            repeat=0,
            draws=draws,
            tune=tune,
            chains=chains,
            seed=2026,
        )
        steps = 100 * (draws + tune) * chains
        rows.append(
            {
                "sampler": run.sampler,
                "seconds": run.seconds,
                "ess": run.ess,
                "ess_per_second": run.ess_per_second,
                "us_per_mh_step": 1e6 * run.seconds / steps,
                "accept": run.accept,
            }
        )
    return rows


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--modes", nargs="+", default=["C", "NUMBA"])
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["steps", "construct", "sample"],
        help="parts to run; the others are kept from the previous results file",
    )
    args = parser.parse_args(argv)
    n = 100 if args.quick else 300
    draws, tune = (200, 50) if args.quick else (1000, 200)
    previous = RESULTS / "compiled_transition.json"
    payload = json.loads(previous.read_text()) if previous.exists() else {}
    payload["machine"] = machine_info()

    if "steps" in args.parts:
        payload["per_step"] = per_step_rows(args.modes, n)
    if "construct" in args.parts:
        payload["construction"] = construction_times()
        print(payload["construction"], flush=True)
    if "sample" in args.parts:
        payload["sampling"] = ess_runs(draws, tune, 2)
        payload["sampling_protocol"] = {"draws": draws, "tune": tune, "chains": 2}
    write_results("compiled_transition", payload, render(payload))


def per_step_rows(modes: list[str], n: int) -> list[dict]:
    targets = [
        (
            "LSB case 3 (900 binary), GWG",
            segmentation_model(case=3),
            "x",
            lambda v, ck: GibbsWithGradients(v, compile_kwargs=ck),
        ),
        (
            "mixture (200 categorical), GWG",
            mixture_model(),
            "z",
            lambda v, ck: GibbsWithGradients(v, compile_kwargs=ck),
        ),
        (
            "mixture (200 categorical), LB exact",
            mixture_model(),
            "z",
            lambda v, ck: LocallyBalanced(v, differences="exact", compile_kwargs=ck),
        ),
    ]
    rows = []
    for mode in modes:
        for target, model, var, make in targets:
            exact = "exact" in target
            for steps in (10, 100):
                row = per_step(
                    target,
                    model,
                    var,
                    make,
                    None if mode == "C" else mode,
                    steps,
                    max(20, n // 50) if exact else n,
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def render(payload: dict) -> str:
    md = [
        "# Compiled transition vs the Python loop of MH steps\n",
        f"Machine: {payload['machine']}\n",
        "## Per MH step (microseconds; min over 7 interleaved rounds)\n",
        markdown_table(
            payload.get("per_step", []),
            [
                ("target", "target"),
                ("mode", "backend"),
                ("steps_per_call", "steps per call"),
                ("differences_us", "one differences call"),
                ("python_step_us", "Python-loop step"),
                ("compiled_step_us", "compiled step"),
                ("compiled_over_differences", "compiled / differences"),
                ("python_over_compiled", "speed-up"),
                ("construct_s", "step construction (s)"),
            ],
        ),
    ]
    construct = payload.get("construction")
    if construct:
        md += [
            "\n## Construction of GibbsWithGradients on LSB case 3 (seconds)\n",
            f"cold (empty compile cache): {construct['cold_s']:.1f}; "
            f"warm: {construct['warm_s']:.1f}\n",
        ]
    if payload.get("sampling"):
        p = payload["sampling_protocol"]
        md += [
            f"## pm.sample, LSB case 3, {p['chains']} chains, {p['draws']} draws + "
            f"{p['tune']} tune, one core\n",
            markdown_table(
                payload["sampling"],
                [
                    ("sampler", "sampler"),
                    ("seconds", "seconds"),
                    ("ess", "ESS (Hamming)"),
                    ("ess_per_second", "ESS/s"),
                    ("us_per_mh_step", "us per MH step (all in)"),
                    ("accept", "accept"),
                ],
            ),
        ]
    return "\n".join([*md, ""])


if __name__ == "__main__":
    main()
