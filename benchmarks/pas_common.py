"""Measurement harness of the path auxiliary benchmarks (run through ``pm.sample``).

Every sampler runs through ``pm.sample`` (sequential chains, ``cores=1``) on the same model. A
callback records, after every draw, the Hamming distance of the state to a fixed random
reference state (the ESS statistic of the ALBP/DISCS protocols), the Hamming distance to the
previous draw (the jump distance) and a timestamp. The time of the post-tuning draws is the
wall-clock time between the last tuning draw and the last draw, less the time spent in the
callback itself; it includes everything ``pm.sample`` does per draw (step dispatch, trace
recording), for our samplers and PyMC's alike. The same span is also measured in CPU time of
the process (``time.process_time``), which other jobs on a shared machine do not inflate; on the
2-core machine these benchmarks were written on, shared with other engineers' jobs, CPU time is
the more reproducible of the two. Compilation (step construction) is timed separately. ESS is
ArviZ's bulk ESS of the Hamming statistic over the post-tuning draws of all chains.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from benchmarks.common import ess


@dataclass
class RunResult:
    """Measurements of one sampler on one model (post-tuning draws)."""

    label: str
    sampler: str
    chains: int
    tune: int
    draws: int
    steps_per_draw: int
    construct_s: float
    time_s: float
    cpu_s: float
    accept: float | None
    path_length: float | None
    ejd_per_step: float
    ess: float
    ess_per_step: float
    ess_per_sec: float
    ess_per_cpu_sec: float
    sec_per_step: float
    cpu_sec_per_step: float
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


class _Recorder:
    def __init__(self, name: str, ref: np.ndarray, chains: int, draws: int, tune: int):
        self.name = name
        self.ref = ref
        n = tune + draws
        self.hamming = np.zeros((chains, n))
        self.ones = np.zeros((chains, n))
        self.jump = np.zeros((chains, n))
        self.stamp = np.zeros((chains, n))
        self.cpu = np.zeros((chains, n))
        self.overhead = np.zeros((chains, n))
        self.cpu_overhead = np.zeros((chains, n))
        self.prev: dict[int, np.ndarray] = {}

    def __call__(self, trace, draw) -> None:
        t0 = time.perf_counter()
        c0 = time.process_time()
        c, i = draw.chain, draw.draw_idx
        x = np.asarray(draw.point[self.name]).ravel()
        self.hamming[c, i] = np.count_nonzero(x != self.ref)
        self.ones[c, i] = np.count_nonzero(x)
        prev = self.prev.get(c)
        self.jump[c, i] = np.count_nonzero(x != prev) if prev is not None else 0
        self.prev[c] = x.copy()
        self.stamp[c, i] = t0
        self.cpu[c, i] = c0
        self.overhead[c, i] = time.perf_counter() - t0
        self.cpu_overhead[c, i] = time.process_time() - c0


def hamming_reference(n_sites: int, seed: int = 12345) -> np.ndarray:
    """The fixed random reference state of the Hamming statistic."""
    return np.random.default_rng(seed).integers(0, 2, size=n_sites)


def run_sampler(
    model: pm.Model,
    make_step: Callable[[], object],
    *,
    label: str,
    draws: int,
    tune: int,
    chains: int = 2,
    seed: int = 0,
    var_name: str = "x",
    ref: np.ndarray | None = None,
    steps_per_draw: int = 1,
    init_seed: int = 2024,
) -> RunResult:
    """Run one sampler through ``pm.sample`` and measure it.

    Parameters
    ----------
    model : pymc.Model
        A model whose only free variable is the binary block ``var_name``.
    make_step : callable
        Builds the step inside the model context (its construction is timed as compilation).
    label : str
        Name in the results.
    draws, tune, chains, seed
        As in ``pm.sample``; chains run sequentially.
    ref : ndarray, optional
        Reference state of the Hamming statistic (default: :func:`hamming_reference`).
    steps_per_draw : int
        MH steps per draw of the step (for per-step normalisation); PyMC's samplers count one
        step per draw (a Gibbs sweep is one step).
    init_seed : int
        Seed of the starting states: every chain starts from uniform random bits (the papers'
        protocol), the same ones for every sampler. (PyMC's default start, the mode of each
        Bernoulli, is atypical: from it a long path proposes only bad flips and a fixed large
        ``R`` can stay stuck.)
    """
    n_sites = int(np.prod(model.initial_point()[var_name].shape))
    ref = hamming_reference(n_sites) if ref is None else ref
    if "hamming" not in model.named_vars:
        with model:
            pm.Deterministic("hamming", pt.sum(pt.neq(model[var_name].ravel(), ref)))
    with model:
        t0 = time.perf_counter()
        step = make_step()
        construct = time.perf_counter() - t0
        rec = _Recorder(var_name, ref, chains, draws, tune)
        shape = model.initial_point()[var_name].shape
        init_rng = np.random.default_rng(init_seed)
        initvals = [{var_name: init_rng.integers(0, 2, size=shape)} for _ in range(chains)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(
                draws=draws,
                tune=tune,
                step=step,
                chains=chains,
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
                var_names=["hamming"],
                callback=rec,
                initvals=initvals,
            )
    # time of the post-tuning draws: last draw minus last tuning draw, less recording overhead
    post = slice(tune, tune + draws)

    def span(stamp, overhead):
        if tune > 0:
            spans = stamp[:, -1] - stamp[:, tune - 1]
        else:  # no tuning draw: extrapolate the first draw's share
            spans = (stamp[:, -1] - stamp[:, 0]) * draws / max(draws - 1, 1)
        return float(np.sum(spans - overhead[:, post].sum(axis=1)))

    time_s = span(rec.stamp, rec.overhead)
    cpu_s = span(rec.cpu, rec.cpu_overhead)
    ham = rec.hamming[:, post]
    ess_ham = ess(ham)
    ones = rec.ones[:, post]
    ess_ones = ess(ones)
    stats = getattr(idata, "sample_stats", {})  # BinaryGibbsMetropolis records no stats
    # (PyMC's BinaryMetropolis records the unclipped ratio as "accept")
    accept = float(np.minimum(stats["accept"], 1.0).mean()) if "accept" in stats else None
    path_length = float(stats["mean_path_length"].mean()) if "mean_path_length" in stats else None
    if "sites_moved_per_step" in stats:
        ejd = float(stats["sites_moved_per_step"].mean())
    else:
        ejd = float(rec.jump[:, post].mean()) / steps_per_draw
    steps = chains * draws * steps_per_draw
    sampler = type(step).__name__
    return RunResult(
        label=label,
        sampler=sampler,
        chains=chains,
        tune=tune,
        draws=draws,
        steps_per_draw=steps_per_draw,
        construct_s=construct,
        time_s=time_s,
        cpu_s=cpu_s,
        accept=accept,
        path_length=path_length,
        ejd_per_step=ejd,
        ess=ess_ham,
        ess_per_step=ess_ham / steps,
        ess_per_sec=ess_ham / time_s if time_s > 0 else float("nan"),
        ess_per_cpu_sec=ess_ham / cpu_s if cpu_s > 0 else float("nan"),
        sec_per_step=time_s / steps,
        cpu_sec_per_step=cpu_s / steps,
        extra={
            # magnetisation for spin models: ESS of the number of ones (= affine in mean spin)
            "ess_ones": ess_ones,
            "ess_ones_per_sec": ess_ones / time_s if time_s > 0 else float("nan"),
            "ess_ones_per_cpu_sec": ess_ones / cpu_s if cpu_s > 0 else float("nan"),
            "mean_hamming": float(ham.mean()),
            "mean_ones": float(ones.mean()),
        },
    )
