"""pymc_lbp against NumPyro's DiscreteHMCGibbs and PyMC's default samplers, on the same targets.

Targets (issue #9): the LSB image-segmentation posterior, cases 3 and 4 (30x30 torus,
:func:`pymc_lbp.models.segmentation_model`), the 50x50 Ising of the optimal-scaling paper
(:func:`pymc_lbp.models.scaling_ising_model`, configuration C2, open boundary), and a mixed
spike-and-slab regression (n=200, p=30: Bernoulli inclusion indicators, Normal coefficients whose
prior sd is the slab's or the spike's, HalfNormal noise sd). The NumPyro models are written
here; the script checks at random states that their log densities equal the PyMC models' up to a
constant (and the lattices' equal :func:`pymc_lbp.models.lattice.ising_log_density`) before
it samples anything.

Samplers, in one run: ``PathAuxiliaryLBP`` and ``GibbsWithGradients`` (pymc_lbp; NUTS for the
continuous part of the mixed model), PyMC's ``BinaryGibbsMetropolis`` (PyMC's default for
Bernoulli variables; with NUTS on the mixed model, i.e. ``pm.sample()``'s default assignment),
NumPyro ``DiscreteHMCGibbs(NUTS(model))`` plain and ``modified=True``. Every option of the
pymc_lbp steps is passed explicitly (see :data:`PYMC_LBP_OPTIONS`), so a change of a default
does not change what this benchmark measures; the exception is ``LocallyBalanced-defaults``,
``LocallyBalanced([var])`` with no option set, which measures what a user gets.

What one recorded draw is:

* PathAuxiliaryLBP / GibbsWithGradients: ``steps_per_draw`` MH steps (+ one NUTS trajectory on
  the mixed model);
* LocallyBalanced-defaults: one sweep of single-site steps on the lattices; on the mixed model,
  whose indicators share no term, every indicator drawn from its full conditional at once
  (+ one NUTS trajectory);
* BinaryGibbsMetropolis: one sweep over all binary sites in a random order (+ one NUTS trajectory);
* NumPyro DiscreteHMCGibbs: one sweep over all discrete sites in a random order, each site an MH
  step from its conditional (``modified=True``: Liu's Metropolised Gibbs, always proposes the
  other value), each evaluating the model's full potential, then one HMC (NUTS) trajectory over
  the continuous sites (none on the lattices: the HMC block is empty there).

Protocol: 2 chains per sampler, run one after the other on one core (PyMC ``cores=1``, NumPyro
``chain_method="sequential"`` with XLA's CPU thread pool at one thread), the same uniformly
random starting states for every sampler, ``--tune`` draws of burn-in (tuning) then ``--draws``
recorded draws for everyone. ESS: ArviZ bulk ESS over the recorded draws only, of the Hamming
distance to a fixed random reference state (lattices) or the minimum over the 30 coefficients
(mixed model). Seconds: the sampling phase only (recorded draws, both chains), wall
(``perf_counter``) and CPU (``process_time``) side by side; for NumPyro the JIT compilation time
(JAX's own compile events) is subtracted from the wall time of the sampling call and reported
separately. Step construction: wall time of building the step object (pymc_lbp and PyMC compile
there); the first construction per target and process versus later ones (in-process and on-disk
compile caches warm); ``--cold`` also builds the steps in a subprocess with an empty pytensor
compile directory. Medians over ``--repeats`` repeats.

Writes docs/results/vs_numpyro.{json,md,png} (or ``--out``).

Usage: python -m benchmarks.vs_numpyro [--quick] [--repeats 3] [--no-numpyro] [--cold]
       [--targets lsb3 lsb4 ising50 spike_slab] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# One XLA CPU thread, as pytensor runs single-threaded here (set before jax is imported).
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import numpy as np
import pymc as pm

from benchmarks.common import (
    ROOT,
    add_out,
    benchmark_parser,
    hamming_ess,
    load_info,
    machine_info,
    markdown_table,
    phase_seconds,
    pyplot,
    save_figure,
    write_results,
)
from pymc_lbp import GibbsWithGradients, LocallyBalanced, PathAuxiliaryLBP
from pymc_lbp.models.ising_scaling import SCALING_ISING_CONFIGS, scaling_ising_model
from pymc_lbp.models.lattice import ising_log_density, ising_model, segmentation_model

HAMMING_SEED = 12345
CHAINS = 2

# Every option of the pymc_lbp steps, explicit (defaults may change; this benchmark must not).
PYMC_LBP_OPTIONS: dict[str, dict] = {
    "PathAuxiliaryLBP": dict(
        path_scale=None,
        single_site_share=0.1,
        target_accept=0.574,
        balancing="sqrt",
        # exact differences: on these pairwise binary lattices, the couplings and the numba
        # kernel of pymc_lbp.samplers.pairwise.couplings (runs before 2026-11-25 used "gradient":
        # 47-109 us a step)
        differences="exact",
        initial_path_scale=1.0,
        steps_per_draw=10,
    ),
    "GibbsWithGradients": dict(steps_per_draw=100, differences="auto"),
}
# The mixed model: the Normal prior's sd jumps with gamma (0.05 -> 2), so first-order
# differences are far off (a quick run accepted ~1% of PathAuxiliaryLBP's gradient proposals);
# PathAuxiliaryLBP uses exact differences there: the indicators are a pairwise binary block
# (no couplings), so its fields are read off the exact differences once per draw (the
# coefficients move) and the steps run in the numba kernel. GibbsWithGradients as auto chooses.
PYMC_LBP_OPTIONS_MIXED: dict[str, dict] = {
    "PathAuxiliaryLBP": {
        **PYMC_LBP_OPTIONS["PathAuxiliaryLBP"],
        "differences": "exact",
        "steps_per_draw": 10,
    },
    "GibbsWithGradients": dict(steps_per_draw=30, differences="auto"),
}
# (burn-in, recorded) draws per chain: the same for every sampler on a target; smaller where a
# PyMC Gibbs sweep is expensive (its per-site logp is a full-model evaluation).
DRAWS: dict[str, tuple[int, int]] = {
    "lsb3": (50, 200),
    "lsb4": (50, 200),
    "ising50": (20, 80),
    "spike_slab": (100, 300),
    "tiny": (20, 100),
}
QUICK_DRAWS = (10, 30)
PYMC_SAMPLERS = (
    "PathAuxiliaryLBP",
    "GibbsWithGradients",
    "LocallyBalanced-defaults",
    "PyMC-BinaryGibbs",
)
NUMPYRO_SAMPLERS = ("NumPyro-DHMCGibbs", "NumPyro-DHMCGibbs-modified")

SPIKE_SD, SLAB_SD, PRIOR_INCLUSION = 0.05, 2.0, 0.2


# ---------------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------------


@dataclass
class Target:
    """One benchmark target: the PyMC model, and what NumPyro needs to build the same one."""

    name: str
    kind: str  # "ising" or "mixed"
    n_sites: int  # binary sites
    shape: tuple[int, ...] = ()
    field: np.ndarray | None = None
    coupling: float = 0.0
    periodic: bool = True
    X: np.ndarray | None = None
    y: np.ndarray | None = None
    _model: pm.Model | None = dataclasses.field(default=None, repr=False)

    def pymc_model(self) -> pm.Model:
        if self._model is None:
            if self.kind == "ising":
                self._model = ising_model(
                    self.shape, coupling=self.coupling, field=self.field, periodic=self.periodic
                )
            else:
                self._model = spike_slab_pymc(self.X, self.y)
        return self._model

    @property
    def discrete(self) -> str:
        return "x" if self.kind == "ising" else "gamma"


def make_target(name: str) -> Target:
    """The named target (``lsb3``, ``lsb4``, ``ising50``, ``spike_slab``, or ``tiny``)."""
    if name in ("lsb3", "lsb4"):
        case = int(name[-1])
        model = segmentation_model(case=case, n=30, seed=0, periodic=True)
        lam = {3: 1.0, 4: 1.0}[case]
        return Target(name, "ising", 900, (30, 30), model.alpha, lam, True, _model=model)
    if name == "ising50":
        model = scaling_ising_model(n=50, config=2, seed=0)
        assert model.coupling == SCALING_ISING_CONFIGS[2][2]
        return Target(
            name, "ising", 2500, (50, 50), model.field, model.coupling, False, _model=model
        )
    if name == "tiny":  # for the smoke test
        field_ = np.random.default_rng(0).uniform(-0.5, 0.5, size=(4, 4))
        return Target(name, "ising", 16, (4, 4), field_, 0.4, True)
    if name == "spike_slab":
        X, y = spike_slab_data()
        return Target(name, "mixed", X.shape[1], X=X, y=y)
    raise ValueError(f"unknown target {name!r}")


def spike_slab_data(n: int = 200, p: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal design, 5 non-zero coefficients (2, -1.5, 1, -0.75, 0.5), noise sd 1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    beta = np.zeros(p)
    beta[:5] = [2.0, -1.5, 1.0, -0.75, 0.5]
    return X, X @ beta + rng.normal(size=n)


def spike_slab_pymc(X: np.ndarray, y: np.ndarray) -> pm.Model:
    """gamma_j ~ Bernoulli(0.2), beta_j ~ N(0, spike + (slab - spike) gamma_j), sigma ~ HN(2)."""
    with pm.Model() as model:
        gamma = pm.Bernoulli("gamma", p=PRIOR_INCLUSION, shape=X.shape[1])
        beta = pm.Normal("beta", 0.0, SPIKE_SD + (SLAB_SD - SPIKE_SD) * gamma, shape=X.shape[1])
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", X @ beta, sigma, observed=y)
    return model


def numpyro_model(target: Target):
    """The NumPyro model of ``target`` (the same density; checked by :func:`check_same_target`)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    if target.kind == "ising":
        shape, periodic = target.shape, target.periodic
        logits = jnp.asarray(2.0 * np.asarray(target.field, dtype=float).ravel())
        coupling = float(target.coupling)

        def model():
            with numpyro.plate("sites", target.n_sites):
                x = numpyro.sample("x", dist.Bernoulli(logits=logits))
            s = (2.0 * x - 1.0).reshape(shape)
            total = 0.0
            for axis, n in enumerate(shape):
                if n < 2:
                    continue
                lo = jnp.take(s, jnp.arange(n - 1), axis=axis)
                hi = jnp.take(s, jnp.arange(1, n), axis=axis)
                total = total + jnp.sum(lo * hi)
                if periodic and n > 2:
                    first = jnp.take(s, jnp.array([0]), axis=axis)
                    last = jnp.take(s, jnp.array([n - 1]), axis=axis)
                    total = total + jnp.sum(first * last)
            numpyro.factor("coupling", coupling * total)

        return model

    X, y = jnp.asarray(target.X), jnp.asarray(target.y)

    def model():
        with numpyro.plate("coef", X.shape[1]):
            gamma = numpyro.sample("gamma", dist.Bernoulli(probs=PRIOR_INCLUSION))
            beta = numpyro.sample("beta", dist.Normal(0.0, SPIKE_SD + (SLAB_SD - SPIKE_SD) * gamma))
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
        with numpyro.plate("obs", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, sigma), obs=y)

    return model


def random_states(target: Target, k: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``k`` random points (constrained values) of the target's latent variables."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        if target.kind == "ising":
            out.append({"x": rng.integers(0, 2, size=target.shape)})
        else:
            p = target.n_sites
            out.append(
                {
                    "gamma": rng.integers(0, 2, size=p),
                    "beta": rng.normal(0.0, 1.0, size=p),
                    "sigma": np.array(rng.uniform(0.5, 2.0)),
                }
            )
    return out


def pymc_log_density(target: Target, states: list[dict]) -> np.ndarray:
    """The PyMC model's log density (no Jacobian) at constrained ``states``."""
    model = target.pymc_model()
    logp = model.compile_logp(jacobian=False)
    vals = []
    for st in states:
        point = {}
        for rv in model.free_RVs:
            value_var = model.rvs_to_values[rv]
            v = np.asarray(st[rv.name], dtype=value_var.dtype)
            transform = model.rvs_to_transforms[rv]
            if transform is not None:  # only sigma's log transform here
                v = np.log(v).astype(value_var.dtype)
            point[value_var.name] = v
        vals.append(float(logp(point)))
    return np.array(vals)


def numpyro_log_density(target: Target, states: list[dict]) -> np.ndarray:
    """The NumPyro model's log density at constrained ``states``."""
    from numpyro.infer.util import log_density

    model = numpyro_model(target)
    vals = []
    for st in states:
        params = {k: (np.ravel(v) if k == "x" else v) for k, v in st.items()}
        vals.append(float(log_density(model, (), {}, params)[0]))
    return np.array(vals)


def check_same_target(target: Target, *, numpyro: bool, k: int = 8, seed: int = 7) -> dict:
    """Spread (max - min) over random states of the log-density differences: zero up to rounding.

    Compares the PyMC model with the numpy Ising energy (lattices) and with the NumPyro model.
    Raises ``AssertionError`` when a spread exceeds ``1e-6 * (1 + |log density|)``.
    """
    states = random_states(target, k, seed)
    ref = pymc_log_density(target, states)
    out = {}
    tol = 1e-6 * (1.0 + np.abs(ref).max())
    if target.kind == "ising":
        energy = np.array(
            [
                ising_log_density(
                    st["x"].ravel(), target.shape, target.coupling, target.field, target.periodic
                )
                for st in states
            ]
        )
        out["pymc_vs_numpy_energy"] = float(np.ptp(ref - energy))
    if numpyro:
        out["pymc_vs_numpyro"] = float(np.ptp(ref - numpyro_log_density(target, states)))
    for key, spread in out.items():
        if not spread <= tol:
            raise AssertionError(f"{target.name}: {key} log densities differ by {spread:.3g}")
    return out


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


def start_states(target: Target, seed: int) -> list[np.ndarray]:
    """Uniformly random binary starting states, one per chain (the same for every sampler)."""
    rng = np.random.default_rng(seed)
    shape = target.shape if target.kind == "ising" else (target.n_sites,)
    return [rng.integers(0, 2, size=shape) for _ in range(CHAINS)]


def efficiency(target: Target, draws: dict[str, np.ndarray]) -> float:
    """ESS of the benchmark statistic from ``(chain, draw, ...)`` arrays of the recorded draws."""
    if target.kind == "ising":
        x = np.asarray(draws["x"])
        return hamming_ess(x.reshape(x.shape[0], x.shape[1], -1), seed=HAMMING_SEED)
    import arviz as az

    beta = np.asarray(draws["beta"])
    ess = az.ess(az.convert_to_dataset({"beta": beta}), method="bulk")["beta"].values
    return float(np.min(ess))


def make_pymc_step(sampler: str, target: Target, model: pm.Model):
    options = (PYMC_LBP_OPTIONS if target.kind == "ising" else PYMC_LBP_OPTIONS_MIXED).get(
        sampler, {}
    )
    var = model[target.discrete]
    if sampler == "PathAuxiliaryLBP":
        return PathAuxiliaryLBP([var], **options), options
    if sampler == "GibbsWithGradients":
        return GibbsWithGradients([var], **options), options
    if sampler == "LocallyBalanced-defaults":  # what a user gets with no option set
        return LocallyBalanced([var]), {}
    if sampler == "PyMC-BinaryGibbs":
        return pm.BinaryGibbsMetropolis([var]), {}
    raise ValueError(sampler)


def run_pymc(target: Target, sampler: str, *, tune: int, draws: int, seed: int) -> dict:
    """One pm.sample run (2 chains, sequential, one core) and its measurements."""
    model = target.pymc_model()
    starts = start_states(target, seed)
    stamps: dict[int, list[tuple[float, float]]] = {}

    def callback(trace, draw):
        stamps.setdefault(draw.chain, []).append((time.perf_counter(), time.process_time()))

    with model:
        t0 = time.perf_counter()
        step, options = make_pymc_step(sampler, target, model)
        construct = time.perf_counter() - t0
        idata = pm.sample(
            tune=tune,
            draws=draws,
            step=[step],
            chains=CHAINS,
            cores=1,
            initvals=[{target.discrete: s} for s in starts],
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            callback=callback,
        )
    wall, cpu = phase_seconds(stamps, tune)
    posterior = {k: idata.posterior[k].values for k in idata.posterior.data_vars}
    spd = options.get("steps_per_draw", target.n_sites)  # Gibbs: one sweep = n_sites updates
    stats = getattr(idata, "sample_stats", {})
    return {
        "ess": efficiency(target, posterior),
        "wall": wall,
        "cpu": cpu,
        "construct": construct,
        "mh_steps_per_draw": spd,
        "accept": float(stats["accept"].mean()) if "accept" in stats else None,
        "options": options,
    }


class CompileTimer:
    """Sums JAX's compile-event durations (tracing, lowering, XLA compilation) while active."""

    EVENTS = (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )
    _installed = False
    _active: list[CompileTimer] = []

    def __init__(self):
        self.seconds = 0.0
        self.last_wall: float | None = None  # clocks when the last compile event ended
        self.last_cpu: float | None = None
        if not CompileTimer._installed:
            import jax.monitoring

            jax.monitoring.register_event_duration_secs_listener(CompileTimer._listen)
            CompileTimer._installed = True

    @staticmethod
    def _listen(event, duration, **kwargs):
        if event in CompileTimer.EVENTS:
            wall, cpu = time.perf_counter(), time.process_time()
            for t in CompileTimer._active:
                t.seconds += duration
                t.last_wall, t.last_cpu = wall, cpu

    def __enter__(self):
        CompileTimer._active.append(self)
        return self

    def __exit__(self, *exc):
        CompileTimer._active.remove(self)


def run_numpyro(target: Target, modified: bool, *, tune: int, draws: int, seed: int) -> dict:
    """One NumPyro DiscreteHMCGibbs(NUTS) run (2 chains, sequential) and its measurements.

    ``warmup`` and ``run`` are timed apart. JIT compilation (tracing, lowering, XLA) happens at
    the start of each call, before anything runs; the sampling time is measured from the end
    of the call's last compile event to the moment the samples are ready (wall and CPU), the
    compile time is the sum of JAX's compile-event durations. With the persistent compile cache
    (:func:`enable_jax_cache`) a repeat skips the XLA compilation but still traces and lowers.
    """
    import jax
    from numpyro.infer import MCMC, NUTS, DiscreteHMCGibbs

    model = numpyro_model(target)
    starts = start_states(target, seed)
    kernel = DiscreteHMCGibbs(NUTS(model), modified=modified)
    mcmc = MCMC(
        kernel,
        num_warmup=tune,
        num_samples=draws,
        num_chains=CHAINS,
        chain_method="sequential",
        progress_bar=False,
    )
    init = {target.discrete: np.stack([np.ravel(s) for s in starts])}
    if target.kind == "mixed":
        p = target.n_sites
        init["beta"] = np.zeros((CHAINS, p))
        init["sigma"] = np.ones(CHAINS)
    key = jax.random.PRNGKey(seed)
    with CompileTimer() as ct_w:
        t0 = time.perf_counter()
        mcmc.warmup(key, init_params=init, collect_warmup=False)
        jax.block_until_ready(mcmc.post_warmup_state)
        warm_wall = time.perf_counter() - t0
    with CompileTimer() as ct_s:
        t0, c0 = time.perf_counter(), time.process_time()
        mcmc.run(mcmc.post_warmup_state.rng_key)
        samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        t1, c1 = time.perf_counter(), time.process_time()
    if ct_s.last_wall is not None:
        t0, c0 = max(t0, ct_s.last_wall), max(c0, ct_s.last_cpu)
    run_wall, run_cpu = t1 - t0, c1 - c0
    samples = {k: np.asarray(v) for k, v in samples.items()}
    return {
        "ess": efficiency(target, samples),
        "wall": run_wall,
        "cpu": run_cpu,
        "wall_incl_compile": run_wall + ct_s.seconds,
        "compile_warmup": ct_w.seconds,
        "compile_sampling": ct_s.seconds,
        "warmup_wall_excl_compile": warm_wall - ct_w.seconds,
        "construct": ct_w.seconds + ct_s.seconds,  # NumPyro "constructs" by compiling
        "mh_steps_per_draw": target.n_sites,  # one sweep: every discrete site once
        "accept": None,
        "options": {"modified": modified, "inner": "NUTS", "chain_method": "sequential"},
    }


def enable_jax_cache(directory: str) -> None:
    """JAX's persistent compile cache in ``directory``, for every compilation (cold at first)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def numpyro_available() -> bool:
    try:
        import jax  # noqa: F401
        import numpyro  # noqa: F401
    except ImportError:
        return False
    return True


def cold_construction(targets: list[str]) -> dict:
    """Step construction times in a subprocess with an empty pytensor compile directory."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        flags = env.get("PYTENSOR_FLAGS", "")
        env["PYTENSOR_FLAGS"] = ",".join(f for f in (flags, f"base_compiledir={tmp}") if f)
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.vs_numpyro",
            "--construct-only",
            "--targets",
            *targets,
        ]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
        out = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def construct_only(targets: list[str]) -> dict:
    """Build each pymc_lbp / PyMC step twice: (first, second) wall seconds per target/sampler."""
    times = {}
    for name in targets:
        target = make_target(name)
        model = target.pymc_model()
        for sampler in PYMC_SAMPLERS:
            pair = []
            for _ in range(2):
                with model:
                    t0 = time.perf_counter()
                    make_pymc_step(sampler, target, model)
                    pair.append(time.perf_counter() - t0)
            times[f"{name}/{sampler}"] = pair
    return times


# ---------------------------------------------------------------------------------------------
# Summary, table, plot
# ---------------------------------------------------------------------------------------------


def summarize(runs: list[dict]) -> list[dict]:
    """Medians over repeats per (target, sampler), with ESS/s relative to NumPyro modified."""
    rows = []
    keys = list(dict.fromkeys((r["target"], r["sampler"]) for r in runs))
    for target, sampler in keys:
        rs = [r for r in runs if (r["target"], r["sampler"]) == (target, sampler)]

        def med(key, rs=rs):
            vals = [r[key] for r in rs if r.get(key) is not None]
            return float(np.median(vals)) if vals else None

        draws = rs[0]["draws"] * CHAINS
        wall = med("wall")
        row = {
            "target": target,
            "sampler": sampler,
            "repeats": len(rs),
            "draws": f"{rs[0]['tune']}+{rs[0]['draws']}",
            "ess": med("ess"),
            "wall": wall,
            "cpu": med("cpu"),
            "ess_per_s": float(np.median([r["ess"] / r["wall"] for r in rs])),
            "ess_per_cpu_s": float(np.median([r["ess"] / r["cpu"] for r in rs])),
            "ms_per_draw": 1000.0 * wall / draws,
            "mh_steps_per_draw": rs[0]["mh_steps_per_draw"],
            "us_per_mh_step": 1e6 * wall / (draws * rs[0]["mh_steps_per_draw"]),
            "construct_first": rs[0]["construct"],
            "construct_warm": med("construct")
            if len(rs) == 1
            else float(np.median([r["construct"] for r in rs[1:]])),
            "compile_warmup": med("compile_warmup"),
            "compile_sampling": med("compile_sampling"),
            "accept": med("accept"),
        }
        rows.append(row)
    for row in rows:
        base = next(
            (
                r
                for r in rows
                if r["target"] == row["target"] and r["sampler"] == "NumPyro-DHMCGibbs-modified"
            ),
            None,
        )
        if base:
            row["vs_numpyro_modified"] = row["ess_per_s"] / max(base["ess_per_s"], 1e-12)
    return rows


COLUMNS = [
    ("target", "target"),
    ("sampler", "sampler"),
    ("draws", "burn-in+draws per chain"),
    ("ess", "ESS"),
    ("wall", "sampling s (wall)"),
    ("cpu", "sampling s (CPU)"),
    ("ess_per_s", "ESS/s"),
    ("ess_per_cpu_s", "ESS/CPU-s"),
    ("vs_numpyro_modified", "ESS/s vs NumPyro mod."),
    ("mh_steps_per_draw", "MH steps (site updates) per draw"),
    ("ms_per_draw", "ms per draw"),
    ("us_per_mh_step", "us per MH step"),
    ("construct_first", "construct s (first)"),
    ("construct_warm", "construct s (warm)"),
    ("compile_warmup", "JIT s (warmup)"),
    ("compile_sampling", "JIT s (sampling)"),
    ("accept", "accept"),
]

COLORS = {
    "PathAuxiliaryLBP": "tab:red",
    "GibbsWithGradients": "tab:orange",
    "PyMC-BinaryGibbs": "tab:purple",
    "NumPyro-DHMCGibbs": "tab:blue",
    "NumPyro-DHMCGibbs-modified": "tab:cyan",
}


def plot(rows: list[dict], path: Path, title: str) -> None:
    plt = pyplot()
    targets = list(dict.fromkeys(r["target"] for r in rows))
    samplers = [s for s in COLORS if any(r["sampler"] == s for r in rows)]
    fig, ax = plt.subplots(figsize=(1.8 + 2.2 * len(targets), 4.2))
    width = 0.8 / max(len(samplers), 1)
    for j, sampler in enumerate(samplers):
        xs, ys = [], []
        for i, target in enumerate(targets):
            r = next((r for r in rows if (r["target"], r["sampler"]) == (target, sampler)), None)
            if r and r["ess_per_s"] > 0:
                xs.append(i + (j - (len(samplers) - 1) / 2) * width)
                ys.append(r["ess_per_s"])
        ax.bar(xs, ys, width=width, color=COLORS[sampler], label=sampler)
    ax.set_yscale("log")
    ax.set_xticks(range(len(targets)))
    ax.set_xticklabels(targets)
    ax.set_ylabel("ESS per second (sampling phase, wall)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    save_figure(fig, path)


def git_commit() -> str | None:
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return res.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def report(args, runs, checks, cold, load_before, t_start, *, done: int) -> dict:
    """Summarise ``runs`` (``done`` repeats so far) and write JSON, markdown and plot."""
    elapsed = time.perf_counter() - t_start
    rows = summarize(runs)
    info = machine_info()
    info.update(commit=git_commit(), load_before=load_before, load_after=load_info())
    if any(r["sampler"] in NUMPYRO_SAMPLERS for r in runs):
        import jax
        import numpyro

        info.update(numpyro=numpyro.__version__, jax=jax.__version__)
    payload = {
        "protocol": {
            "chains": CHAINS,
            "tune_draws": {
                n: sorted({(r["tune"], r["draws"]) for r in runs if r["target"] == n})
                for n in dict.fromkeys(r["target"] for r in runs)
            },
            "repeats": done,
            "quick": args.quick,
            "hamming_seed": HAMMING_SEED,
            "pymc_lbp_options": PYMC_LBP_OPTIONS,
            "pymc_lbp_options_mixed": PYMC_LBP_OPTIONS_MIXED,
        },
        "same_target_checks": checks,
        "cold_construction": cold,
        "elapsed_seconds": elapsed,
        "machine": info,
        "rows": rows,
        "runs": runs,
    }
    title = f"2 chains, equal draws per target, median of {done}; commit {str(info['commit'])[:8]}"
    md = [
        "# pymc_lbp vs NumPyro DiscreteHMCGibbs and PyMC (benchmarks/vs_numpyro.py)\n",
        f"{title}. Load average before/after: {load_before} / {info['load_after']}; "
        f"total {elapsed:.0f} s. Protocol: docs/benchmarks.md.\n",
        markdown_table(rows, COLUMNS),
        "",
    ]
    if cold:
        md.append(
            "\nStep construction with an empty pytensor compile directory "
            "(subprocess; first and second construction, s):\n"
        )
        md += [f"- {k}: {v[0]:.1f} / {v[1]:.2f}" for k, v in cold.items()]
        md.append("")
    md.append(f"\nSame-target checks (spread of log-density differences): {checks}\n")
    out = Path(args.out)
    write_results(args.name, payload, "\n".join(md), results=out)
    plot(rows, out / f"{args.name}.png", title)
    payload["markdown"] = "\n".join(md)
    return payload


def main(argv=None) -> dict:
    parser = benchmark_parser(__doc__, quick="smoke run (tiny draws, 1 repeat)", repeats=3)
    parser.add_argument("--targets", nargs="*", default=["lsb3", "lsb4", "ising50", "spike_slab"])
    parser.add_argument("--samplers", nargs="*", default=[*PYMC_SAMPLERS, *NUMPYRO_SAMPLERS])
    parser.add_argument("--tune", type=int, help="burn-in draws per chain (default: DRAWS)")
    parser.add_argument("--draws", type=int, help="recorded draws per chain (default: DRAWS)")
    parser.add_argument("--no-numpyro", action="store_true", help="PyMC side only")
    parser.add_argument("--cold", action="store_true", help="also cold-cache step construction")
    parser.add_argument("--construct-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=2026)
    add_out(parser)
    parser.add_argument("--name", default="vs_numpyro")
    args = parser.parse_args(argv)
    if args.construct_only:
        print(json.dumps(construct_only(args.targets)))
        return {}
    if args.quick:
        args.repeats = 1
    have_numpyro = numpyro_available() and not args.no_numpyro
    samplers = [s for s in args.samplers if have_numpyro or s not in NUMPYRO_SAMPLERS]
    if not have_numpyro and not args.no_numpyro:
        print("numpyro/jax not installed: NumPyro samplers skipped", flush=True)
    jax_cache = tempfile.TemporaryDirectory() if have_numpyro else None
    if jax_cache is not None:
        enable_jax_cache(jax_cache.name)
    load_before = load_info()
    t_start = time.perf_counter()
    targets = {name: make_target(name) for name in args.targets}
    checks = {name: check_same_target(t, numpyro=have_numpyro) for name, t in targets.items()}
    runs = []
    for repeat in range(args.repeats):
        for name, target in targets.items():
            seed = args.seed + 1000 * repeat
            tune, draws = QUICK_DRAWS if args.quick else DRAWS[name]
            tune = args.tune if args.tune is not None else tune
            draws = args.draws if args.draws is not None else draws
            for sampler in samplers:
                if sampler in NUMPYRO_SAMPLERS:
                    modified = sampler.endswith("modified")
                    res = run_numpyro(target, modified, tune=tune, draws=draws, seed=seed)
                else:
                    res = run_pymc(target, sampler, tune=tune, draws=draws, seed=seed)
                res.update(target=name, sampler=sampler, repeat=repeat, tune=tune, draws=draws)
                runs.append(res)
                print(
                    f"[{repeat}] {name:10s} {sampler:27s} ESS {res['ess']:7.1f} "
                    f"wall {res['wall']:6.2f}s cpu {res['cpu']:6.2f}s "
                    f"ESS/s {res['ess'] / res['wall']:8.2f} construct {res['construct']:.2f}s",
                    flush=True,
                )
        report(args, runs, checks, None, load_before, t_start, done=repeat + 1)
    if jax_cache is not None:
        jax_cache.cleanup()
    cold = cold_construction(["lsb3"]) if args.cold else None
    payload = report(args, runs, checks, cold, load_before, t_start, done=args.repeats)
    print(payload["markdown"])
    return payload


if __name__ == "__main__":
    main()
