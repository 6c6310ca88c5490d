"""``mar --time-limit``: sampling until a wall-clock budget is spent (anytime marginals).

:class:`BudgetRecorder` is a ``pm.sample`` callback. PyMC calls it after every draw of every
chain (in the main process, also when the chains run in parallel processes); it

* records every post-tuning draw as a full network state, per chain;
* adds the draws, in batches, to the running marginal estimate (the Rao-Blackwellised full
  conditionals or the counts), so little is left to compute when the time is up;
* raises ``KeyboardInterrupt`` when the chain's time is up, which is how PyMC 5 lets a callback
  stop sampling (``pymc/sampling/mcmc.py``): run one after the other (``_sample_many``) the
  interrupt ends the current chain and PyMC goes on with the next one, so a chain gets an
  equal share of the time left when it starts; run in parallel (``_mp_sample``) it ends every
  chain at once, so every chain gets the whole time.

A chain stops before its deadline when the draw after the next would pass it (the next draw
is expected to take as long as the slowest of the last ones), so the run ends on time also
when one draw takes long, and the processes of parallel chains, which finish the draw they
are in before they stop, are back in time. Draws of one chain are never reused by another.

The time left after the build is divided: a chain's tuning ends after ``--tune`` draws or
when :data:`TUNING_SHARE` of the chain's time is spent, whichever comes first
(:class:`TimedTuning`, in the chain's own process), so every chain has time left to sample.
When no draw after tuning is made all the same, :class:`NoDrawsError` says how long the build
took and what limit would do.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pymc.step_methods import CompoundStep

from pymc_lbp.cli.interrupts import interrupt_main
from pymc_lbp.cli.parser import EXIT_SAMPLING, CLIError

__all__ = [
    "TUNING_SHARE",
    "BudgetRecorder",
    "NoDrawsError",
    "TimedTuning",
    "chain_deadline",
    "default_draws_cap",
    "sample_until",
    "sampling_deadline",
    "writing_margin",
]

TUNING_SHARE = 0.5
"""The most of a chain's time (the time left after the build, shared by the chains that run
one after the other) that its tuning may take: tuning ends then, whatever ``--tune`` says."""

_TUNING_STAT = "timed_tuning"
""":class:`TimedTuning`'s own stat: whether a draw was made while tuning."""

_MIN_DRAWS = 10
"""Draws after tuning per chain that the limit :class:`NoDrawsError` proposes leaves time for."""

_BATCH = 256
"""Draws added to the running estimate at once."""


def default_draws_cap(n_free: int) -> int:
    """The ``--draws`` cap of a ``--time-limit`` run when none is given: as many draws as fit
    2^24 values (128 MiB of PyMC's int64 trace) per chain, at least 1000, at most 10^6."""
    return int(min(10**6, max(1000, (1 << 24) // max(1, n_free))))


_MARGIN_SECONDS, _MARGIN_SHARE = 0.25, 0.02
"""The writing margin of a ``--time-limit`` (:func:`writing_margin`): seconds, and share."""


def writing_margin(time_limit: float) -> float:
    """Seconds of ``time_limit`` kept for writing the results: 0.25 s + 2 % of the limit."""
    return _MARGIN_SECONDS + _MARGIN_SHARE * time_limit


def sampling_deadline(started: float, time_limit: float) -> float:
    """``time.perf_counter()`` by which sampling has to stop in a run that started at
    ``started`` with ``--time-limit time_limit``: the limit less :func:`writing_margin`."""
    return started + time_limit - writing_margin(time_limit)


def _limit(seconds: float) -> int:
    """The least whole ``--time-limit`` that leaves ``seconds`` before the writing margin
    (the inverse of :func:`writing_margin`)."""
    return math.ceil((seconds + _MARGIN_SECONDS) / (1 - _MARGIN_SHARE) + 1e-9)


def chain_deadline(now: float, end: float, chains_left: int, parallel: bool) -> float:
    """When a chain starting ``now`` has to stop: parallel chains all at ``end``; a chain of
    those run one after the other at an equal share of the time left (``chains_left``: it and
    the chains after it)."""
    return end if parallel else now + max(0.0, end - now) / chains_left


_STATS = ("accept", "sites_changed")
"""The sampler stats the summary reads (each the mean over the step methods that have it)."""


@dataclass
class _Chain:
    tuning: int = 0
    states: list[np.ndarray] = field(default_factory=list)
    stats: dict[str, list[float]] = field(default_factory=dict)
    deadline: float | None = None
    last: float | None = None
    slowest: float = 0.0


class BudgetRecorder:
    """A ``pm.sample`` callback that records the draws and stops the chains on time.

    Parameters
    ----------
    info : UAIModelInfo
        The model's map (:func:`~pymc_lbp.models.uai.uai_variable_map`).
    end : float
        ``time.perf_counter()`` by which sampling has to stop.
    chains : int
        Number of chains.
    parallel : bool
        Whether PyMC runs the chains in parallel processes (all share ``end``) or one after
        the other (each gets an equal share of the time left when it starts).
    rao_blackwellize : bool
        The estimate: averaged full conditionals, or counts.
    """

    def __init__(
        self, info: Any, end: float, chains: int, parallel: bool, rao_blackwellize: bool
    ) -> None:
        from pymc_lbp.models.uai.model import target_network
        from pymc_lbp.models.uai.rao_blackwell import FullConditionals

        self.info = info
        self.end = end
        self.parallel = parallel
        self.chains = [_Chain() for _ in range(chains)]
        self.network, self.fixed = target_network(info)
        self.plan = FullConditionals.from_network(self.network, self.fixed)
        self.rao_blackwellize = rao_blackwellize
        self.base = np.maximum(info.fixed_values, 0).astype(np.int64)
        self.slots = [(name, info.members[name]) for name in info.free_names]
        self.estimate = (np.zeros((self.plan.kmax, self.plan.free.size)), 0)  # (sum, draws)
        self.pending: list[np.ndarray] = []
        self.in_callback = False

    # ------------------------------------------------------------------ the callback
    def __call__(self, trace: Any = None, draw: Any = None) -> None:
        """Record ``draw`` (PyMC's ``Draw``: chain, tuning, stats, point) and raise
        ``KeyboardInterrupt`` when the chain's time is up."""
        self.in_callback = True
        try:
            self._record(draw)
        finally:
            self.in_callback = False

    def _record(self, draw: Any) -> None:
        now = time.perf_counter()
        chain = self.chains[draw.chain]
        if chain.deadline is None:  # the chain's first draw
            left = len(self.chains) - draw.chain
            chain.deadline = chain_deadline(now, self.end, left, self.parallel)
        elif chain.last is not None:
            chain.slowest = max(0.8 * chain.slowest, now - chain.last)
        chain.last = now
        if draw.stats[-1].get(_TUNING_STAT, draw.tuning):  # TimedTuning's, else PyMC's count
            chain.tuning += 1
        else:
            state = self.base.copy()
            for name, members in self.slots:
                state[members] = draw.point[name]
            chain.states.append(state)
            self.pending.append(state)
            for key in _STATS:
                found = [float(d[key]) for d in draw.stats if key in d]
                if found:
                    chain.stats.setdefault(key, []).append(float(np.mean(found)))
            if len(self.pending) >= _BATCH:
                self._add_pending()
        if time.perf_counter() + 1.5 * chain.slowest >= chain.deadline:
            raise KeyboardInterrupt

    def _add_pending(self) -> None:
        """Add the pending draws to the estimate. An interrupt anywhere in here loses at most
        these draws from the estimate, never leaves it biased: the sum and its count are
        stored together, in one assignment."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        states = np.stack(batch)
        if self.rao_blackwellize:
            added = np.moveaxis(self.plan.probabilities(states), -1, 0).sum(axis=1)
        else:
            values = states[:, self.plan.free]  # counts by (value, variable), no loop over values
            n_free = values.shape[1]
            cells = (values * n_free + np.arange(n_free)).ravel()
            added = np.bincount(cells, minlength=self.plan.kmax * n_free)
            added = added.reshape(self.plan.kmax, n_free)
        total, n_added = self.estimate
        self.estimate = (total + added, n_added + states.shape[0])

    # ------------------------------------------------------------------ results
    @property
    def draws(self) -> list[int]:
        """Post-tuning draws of every chain."""
        return [len(c.states) for c in self.chains]

    @property
    def tuning(self) -> list[int]:
        """Tuning draws of every chain."""
        return [c.tuning for c in self.chains]

    def marginals(self) -> list[np.ndarray]:
        """The marginals from every recorded draw (fixed variables: deltas)."""
        self._add_pending()
        total, n_added = self.estimate
        if n_added == 0:
            raise ValueError("no draws")
        out = [np.zeros(int(k)) for k in self.network.cards]
        for v, x in self.fixed.items():
            out[v][x] = 1.0
        mean = total / n_added
        for i, v in enumerate(self.plan.free.tolist()):
            out[v] = mean[: self.plan.free_cards[i], i]
        return out

    def inference_data(self) -> tuple[Any, int]:
        """The draws as ``InferenceData`` for the diagnostics, and its draws per chain.

        ArviZ needs chains of one length: the chains with draws, each cut to the shortest of
        them (chains without draws are left out).
        """
        import arviz as az

        kept = [c for c in self.chains if c.states]
        length = min(len(c.states) for c in kept)
        states = np.stack([np.stack(c.states[:length]) for c in kept])  # (chain, draw, n)
        posterior = {name: states[..., members] for name, members in self.slots}
        dims = {name: [f"{name}_var"] for name, _ in self.slots}
        coords = {f"{name}_var": members.tolist() for name, members in self.slots}
        stats = {}
        for key in _STATS:
            series = [c.stats.get(key, []) for c in kept]
            if all(len(s) == len(c.states) for s, c in zip(series, kept, strict=True)):
                stats[key] = np.array([s[:length] for s in series])
        idata = az.from_dict(
            posterior=posterior, sample_stats=stats or None, dims=dims, coords=coords
        )
        return idata, length


# --------------------------------------------------------------------------- the run
class _Watchdog:
    """Interrupts a draw that is still running when the time is up.

    The callback can only stop a chain between draws; a draw that takes long (a sampler that
    compiles during tuning, a huge block) would run past the deadline. From ``end`` on, a
    thread interrupts the main thread (:func:`~pymc_lbp.cli.interrupts.interrupt_main`: a
    ``KeyboardInterrupt`` within :func:`~pymc_lbp.cli.interrupts.own_interrupts_end_chains`,
    where a user's Ctrl-C is an ``Interrupted``) every 0.25 s until :meth:`stop`, unless the
    callback is running (it stops the chain itself when it returns). PyMC ends the chain on it
    (one after the other: the next chain starts, and is interrupted in turn; parallel: PyMC
    terminates the chains' processes, waiting up to 2 s). Only where sampling runs in the main
    thread (a ``mar-batch`` task on a Dask worker thread: none, the callback alone stops it).
    """

    def __init__(self, end: float, recorder: BudgetRecorder) -> None:
        self.end = end
        self.recorder = recorder
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        wait = self.end - time.perf_counter()
        while not self.done.wait(max(0.0, wait)):
            if not self.recorder.in_callback:
                interrupt_main()
            wait = 0.25

    def stop(self) -> None:
        """Stop interrupting (and deliver an interrupt already asked for, if any)."""
        self.done.set()
        self.thread.join()
        for _ in range(3):
            time.sleep(0)


@dataclass
class TimedRun:
    """A finished ``--time-limit`` run: its recorder and its times; ``length`` is the chains'
    length in :meth:`inference_data` (cut to one, :meth:`BudgetRecorder.inference_data`)."""

    recorder: BudgetRecorder
    seconds: float
    time_limit: float
    cap: int
    cap_given: bool
    sampling_end: float
    margin: float
    tune: int
    length: int = 0

    def inference_data(self) -> Any:
        """The diagnostics' ``InferenceData`` (built after the MAR file is written)."""
        idata, self.length = self.recorder.inference_data()
        return idata

    def report(self, written: float) -> list[str]:
        """The lines that say what the budget bought: for stdout, then one for stderr."""
        rec = self.recorder
        cap = f"--draws {self.cap}" if self.cap_given else f"default {self.cap}"
        per_chain = ", ".join(
            f"chain {c}: {t} tuning{' (time)' if t < self.tune else ''} + {d} draws "
            f"({'cap' if d >= self.cap else 'time'})"
            for c, (t, d) in enumerate(zip(rec.tuning, rec.draws, strict=True))
        )
        empty = [c for c, d in enumerate(rec.draws) if d == 0]
        left_out = ""
        if empty:
            left_out = f" (chain(s) {', '.join(map(str, empty))} without draws left out)"
        return [
            f"time limit {self.time_limit:g} s: sampling stopped {self.sampling_end:.2f} s after "
            f"the start ({self.margin:.2f} s kept for writing), MAR written at {written:.2f} s; "
            f"each chain stops on time or at {cap} draws; tuning ends after --tune {self.tune} "
            f"draws or {TUNING_SHARE:.0%} of a chain's time ('tuning (time)')",
            f"draws in the time limit: {per_chain}",
            f"marginals from all {rec.estimate[1]} draws; the diagnostics below use each "
            f"chain's first {self.length}{left_out}",
            f"pymc_lbp mar: --time-limit {self.time_limit:g} s: "
            f"{', '.join(map(str, rec.draws))} draws per chain after tuning, MAR written "
            f"{written:.2f} s after the start",
        ]


class NoDrawsError(CLIError):
    """No chain made a draw after tuning within ``--time-limit`` (or the time was up before
    sampling could start), exit code :data:`EXIT_SAMPLING`: the message says why, how long
    the build took and which limit would leave time to sample (:data:`_MIN_DRAWS` draws per
    chain after as many tuning draws, at the draw time measured).

    Parameters
    ----------
    why : str
        What happened (kept as ``why``).
    time_limit, build, margin : float
        The limit, the seconds from the start to sampling, the seconds kept for writing.
    draw_seconds : float or None
        A draw's seconds as measured, if any was.
    chains_in_turn : int
        Chains that run one after the other (1 when they run in parallel).
    """

    def __init__(
        self,
        why: str,
        time_limit: float,
        build: float,
        margin: float,
        draw_seconds: float | None,
        chains_in_turn: int,
    ) -> None:
        took = f"building the model and the sampler took {build:.2f} s"
        if draw_seconds is None:
            would_do = f"the build alone needs a --time-limit of {_limit(build):g} s, sampling more"
        else:
            took += f", a draw {draw_seconds:.3g} s"
            sampling = chains_in_turn * 2 * _MIN_DRAWS * draw_seconds  # tuning: at most half
            would_do = (
                f"a --time-limit of {_limit(build + sampling):g} s would leave time for "
                f"{_MIN_DRAWS} draws per chain after tuning"
            )
        super().__init__(
            f"--time-limit {time_limit:g} s: {why} ({took}, {margin:.2f} s are kept for "
            f"writing): no marginals written; {would_do}",
            EXIT_SAMPLING,
        )
        self.why = why


class TimedTuning(CompoundStep):
    """The steps of a chain, one after the other, whose tuning ends on time.

    PyMC ends tuning after ``tune`` draws (``stop_tuning``); this ends it earlier, before the
    first draw that starts when :data:`TUNING_SHARE` of the chain's time
    (:func:`chain_deadline`, from the chain's first draw) is spent, in the chain's own process
    (the clock, ``time.perf_counter``, is the machine's, so parallel chains keep time too).
    Each draw's stats end with a group of its own, ``{"timed_tuning": bool}``: whether the draw
    was made while tuning, which :class:`BudgetRecorder` counts by instead of PyMC's ``tune``.

    Parameters
    ----------
    methods : list of step methods
    end : float
        ``time.perf_counter()`` by which sampling has to stop.
    chains : int
    parallel : bool
        As for :class:`BudgetRecorder`.
    """

    def __init__(self, methods: list, end: float, chains: int, parallel: bool) -> None:
        super().__init__(methods)
        self.end, self.chains, self.parallel = end, chains, parallel
        self.started = 0  # chains started with this object (one after the other)
        self.tune_until: float | None = None
        n = len(self.methods)
        self.stats_dtypes = [*self.stats_dtypes, {_TUNING_STAT: bool}]
        self.stats_dtypes_shapes = {
            **self.stats_dtypes_shapes,
            f"sampler_{n}__{_TUNING_STAT}": (bool, []),
        }

    def reset_tuning(self) -> None:
        """PyMC: a chain starts (run one after the other: this object again)."""
        super().reset_tuning()
        self.tune, self.tune_until = True, None

    def stop_tuning(self) -> None:
        super().stop_tuning()
        self.tune = False

    def _make_progressbar_update_functions(self) -> list:
        """PyMC's progress bar takes one function per stats group; this group shows nothing."""
        return [*super()._make_progressbar_update_functions(), lambda step_stats: {}]

    def step(self, point: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        now = time.perf_counter()
        if self.tune_until is None:  # the chain's first draw
            left = max(1, self.chains - self.started)
            deadline = chain_deadline(now, self.end, left, self.parallel)
            self.tune_until = now + TUNING_SHARE * (deadline - now)
            self.started += 1
        if self.tune and now >= self.tune_until:
            self.stop_tuning()
        tuning = bool(self.tune)
        point, stats = super().step(point)
        return point, [*stats, {_TUNING_STAT: tuning}]


def sample_until(
    pm: Any,
    info: Any,
    kwargs: dict[str, Any],
    args: Any,
    started: float,
    time_limit: float,
    rao_blackwellize: bool,
) -> TimedRun:
    """Run ``pm.sample(**kwargs)`` with a :class:`BudgetRecorder` until ``time_limit`` seconds
    after ``started`` (less the margin for writing, :func:`sampling_deadline`), the steps'
    tuning ended on time (:class:`TimedTuning`).

    Raises
    ------
    NoDrawsError
        The time is up before sampling starts or before any chain makes a draw after tuning
        (no marginals are written).
    CLIError
        With :data:`EXIT_SAMPLING` when PyMC raises a ``SamplingError``.
    """
    n_free = int(sum(info.members[n].size for n in info.free_names))
    cap = args.draws or default_draws_cap(n_free)
    margin = writing_margin(time_limit)
    end = sampling_deadline(started, time_limit)
    chains = kwargs["chains"]
    parallel = kwargs["cores"] > 1 and chains > 1
    in_turn = 1 if parallel else chains
    recorder = BudgetRecorder(info, end, chains, parallel, rao_blackwellize)
    t0 = time.perf_counter()
    tune = kwargs["tune"]
    if t0 >= end:
        why = "the time was up before sampling could start"
        raise NoDrawsError(why, time_limit, t0 - started, margin, None, in_turn)
    in_main_thread = threading.current_thread() is threading.main_thread()
    watchdog = _Watchdog(end, recorder) if in_main_thread else None
    try:
        try:
            step = TimedTuning(kwargs["step"], end, chains, parallel)
            with warnings.catch_warnings():  # PyMC's trace is not used: tuning draws are kept
                warnings.filterwarnings("ignore", "Tuning samples will be included")
                pm.sample(
                    draws=cap,
                    callback=recorder,
                    return_inferencedata=False,
                    discard_tuned_samples=False,  # PyMC's count of tuning draws is not ours
                    **{**kwargs, "step": step},
                )
        finally:
            if watchdog is not None:
                watchdog.stop()  # an interrupt it asked for lands here at the latest
    except KeyboardInterrupt:  # the watchdog's, outside the part of PyMC that catches it
        pass
    except ValueError:  # PyMC: "Not enough samples to build a trace." (no draw at all)
        if sum(recorder.tuning) + sum(recorder.draws):
            raise
    except pm.exceptions.SamplingError as exc:
        raise CLIError(f"sampling failed: {exc}", EXIT_SAMPLING) from exc
    seconds = time.perf_counter() - t0
    if not sum(recorder.draws):
        why = (
            f"no chain made a draw after tuning in the time (tuning draws made per chain: "
            f"{', '.join(map(str, recorder.tuning))} of --tune {tune})"
        )
        draw_seconds = seconds / max(1, sum(recorder.tuning))  # none made: a lower bound
        raise NoDrawsError(why, time_limit, t0 - started, margin, draw_seconds, in_turn)
    return TimedRun(
        recorder=recorder,
        seconds=seconds,
        time_limit=time_limit,
        cap=cap,
        cap_given=args.draws is not None,
        sampling_end=time.perf_counter() - started,
        margin=margin,
        tune=tune,
    )
