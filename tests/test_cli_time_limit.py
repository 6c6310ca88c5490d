"""Issue #55.14: ``--time-limit`` divides the time left after the build.

The build of two held-out networks took longer than the limits tried, and with warm caches a
20 s run failed with "no chain made a draw after tuning in the time (tuning draws made per
chain: 110, 143 of --tune 200)". Now a chain's tuning ends after ``--tune`` draws or half of
the chain's time (:class:`~pymc_lbp.cli.timed.TimedTuning`), a run without a draw after tuning
writes the exact marginals where elimination fits, and only when nothing can be made the error
says how long the build took and which limit would do (``tests/test_cli.py``).
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

import pymc_lbp.cli.timed as timed
import pymc_lbp.models.uai as uai
from pymc_lbp.cli import main
from pymc_lbp.models.uai import exact_marginals, read_mar, read_network

SMALL = "uai2014_mar/DBN_11.small.uai"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


class _Clock:
    """A ``time.perf_counter`` that reads what the test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Step:
    """The least a ``CompoundStep`` method needs: it counts its tuning draws."""

    stats_dtypes = [{}]
    stats_dtypes_shapes: dict = {}
    name = "counting"

    def __init__(self) -> None:
        self.tune, self.tuned = True, 0

    def step(self, point):
        self.tuned += self.tune
        return point, [{}]

    def stop_tuning(self):
        self.tune = False

    def reset_tuning(self):
        self.tune = True


@pytest.mark.parametrize("parallel", [False, True])
def test_tuning_ends_when_half_of_the_chains_time_is_spent(monkeypatch, parallel):
    """End at 10 s, two chains: one after the other, chain 0 starting at 0 has until 5 s and
    tunes until 2.5 s, chain 1 starting at 5 s until 10 s and tunes until 7.5 s; in parallel
    each chain (its own copy of the step) has until 10 s and tunes until 5 s."""
    clock = _Clock()
    monkeypatch.setattr(timed.time, "perf_counter", clock)
    inner = _Step()
    step = timed.TimedTuning([inner], end=10.0, chains=2, parallel=parallel)
    assert step.stats_dtypes[-1] == {"timed_tuning": bool}

    def draws(times: list[float]) -> list[bool]:
        made = []
        for t in times:
            clock.now = t
            _, stats = step.step({})
            made.append(stats[-1]["timed_tuning"])
        return made

    if parallel:
        assert draws([0.0, 4.9, 5.0, 9.0]) == [True, True, False, False]
    else:
        assert draws([0.0, 2.4, 2.5, 4.0]) == [True, True, False, False]
        step.reset_tuning()  # PyMC: the next chain starts
        assert draws([5.0, 7.4, 7.5]) == [True, True, False]
    assert not inner.tune and not step.tune
    step.stop_tuning()  # PyMC's own end of tuning (after --tune draws) changes nothing
    assert not inner.tune


def _slow_build(monkeypatch, seconds: float) -> None:
    """Make building the model take ``seconds`` longer (a held-out network's long build)."""
    import time

    real = uai.read_uai

    def read_uai(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(uai, "read_uai", read_uai)


@pytest.mark.parametrize("cores, quiet", [("1", ()), ("2", ("--quiet",))])
def test_a_long_build_leaves_time_to_tune_and_sample(uai_dir, tmp_path, monkeypatch, cores, quiet):
    """Regression: a build of 1.5 s and 1.5 s left for --tune 10**6 draws exited 1 ("no chain
    made a draw after tuning"). Now every chain tunes for at most half of its time and then
    samples (one after the other, with PyMC's progress bar, and in parallel processes): the
    MAR file holds the exact marginals within 5 standard errors (DBN_11.small is one
    block_gibbs block: independent exact draws) and is written within the limit."""
    network = uai_dir / SMALL
    target = tmp_path / "out.MAR"
    argv = ["mar", str(network), "-o", str(target), "--method", "sample"]
    assert run(*argv, "--draws", "5", "--tune", "0", "--seed", "1", "--quiet")[0] == 0
    _slow_build(monkeypatch, 1.5)
    limit = 3.0
    argv += ["--tune", str(10**6), "--time-limit", str(limit), "--seed", "2", "--cores", cores]
    argv += quiet
    code, out, err = run(*argv)
    assert code == 0, err
    written = float(re.search(r"MAR written at ([0-9.]+) s", out).group(1))
    assert 1.5 < written <= limit
    per_chain = re.findall(r"chain \d: (\d+) tuning \(time\) \+ (\d+) draws \(time\)", out)
    assert len(per_chain) == 2, out
    assert all(int(t) > 0 and int(d) > 0 for t, d in per_chain), per_chain
    assert "tuning ends after --tune 1000000 draws or 50% of a chain's time" in out
    n = sum(int(d) for _, d in per_chain)
    for got, p in zip(read_mar(target), exact_marginals(read_network(network)), strict=True):
        assert np.all(np.abs(got - p) <= 5 * np.sqrt(p * (1 - p) / n)), (got, p, n)


def test_no_draw_in_time_writes_the_exact_marginals_where_elimination_fits(uai_dir, tmp_path):
    """A limit spent before sampling could start: exit 0 with the exact marginals (they fit
    --max-table-size) and a line on stderr that says so, MCSE 0."""
    network = uai_dir / SMALL
    target, mcse = tmp_path / "out.MAR", tmp_path / "out.MCSE"
    argv = ["mar", str(network), "-o", str(target), "--method", "sample", "--quiet"]
    code, out, err = run(*argv, "--time-limit", "0.001", "--mcse", str(mcse))
    assert code == 0, err
    assert err.startswith(
        "pymc_lbp mar: --time-limit 0.001 s: the time was up before sampling could start: "
        "exact marginals instead (auto: elimination's largest table 8 <= "
    )
    assert "exact marginals of DBN_11.small.uai" in out and err.count("\n") == 1
    for got, want in zip(read_mar(target), exact_marginals(read_network(network)), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-9)
    assert mcse.read_text().split()[0] == "MCSE"


def test_ctrl_c_ends_a_time_limit_run_of_chains_in_turn_at_once(tmp_path, monkeypatch):
    """Issue #55 review: with --cores 1 and several chains, Ctrl-C ended only the chain it fell
    in, PyMC started the next one, and the run went on until the limit before it exited 130.
    Now the user's Ctrl-C ends the run at once (the watchdog's interrupts still end chains):
    no other chain starts, one line, exit 130, the MAR file left as it was."""
    import os
    import signal
    import time

    path = tmp_path / "two.uai"
    path.write_text("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 3 4\n")
    target = tmp_path / "o.MAR"
    target.write_text("MAR\n1 2 0.5 0.5\n")
    chains: list[int] = []
    real = timed.BudgetRecorder._record

    def record(self, draw):
        chains.append(draw.chain)
        if len(chains) == 3:  # the user presses Ctrl-C during chain 0
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, draw)

    monkeypatch.setattr(timed.BudgetRecorder, "_record", record)
    argv = ["mar", str(path), "-o", str(target), "--method", "sample", "--sampler", "pymc_gibbs"]
    argv += ["--chains", "3", "--cores", "1", "--tune", "0", "--time-limit", "60", "--quiet"]
    t0 = time.perf_counter()
    code, out, err = run(*argv)
    assert (code, err) == (130, "pymc_lbp: error: interrupted: no marginals written\n"), err
    assert set(chains) == {0} and time.perf_counter() - t0 < 30, chains
    assert target.read_text() == "MAR\n1 2 0.5 0.5\n"


def test_the_writing_margin_is_one_formula():
    """The deadline of sampling, the margin the report gives and the limit a NoDrawsError
    proposes come from one formula (mar.py repeated it)."""
    assert timed.writing_margin(10.0) == pytest.approx(0.45)
    assert timed.sampling_deadline(100.0, 10.0) == 100.0 + 10.0 - timed.writing_margin(10.0)
    for seconds in (0.0, 1.0, 9.3, 100.0):
        limit = timed._limit(seconds)
        assert limit - timed.writing_margin(limit) >= seconds
        assert (limit - 1) - timed.writing_margin(limit - 1) < seconds


def test_a_time_limit_run_outside_the_main_thread_interrupts_no_other_thread(tmp_path, monkeypatch):
    """A ``mar-batch`` task samples on a Dask worker thread: the watchdog's interrupt of the
    main thread would land in the worker's own loop (a ``dask worker`` shuts down on SIGINT),
    so there is none; the callback alone stops the chains, between draws."""
    import threading

    def no_watchdog(*args, **kwargs):
        raise AssertionError("a watchdog outside the main thread")

    monkeypatch.setattr(timed, "_Watchdog", no_watchdog)
    path = tmp_path / "two.uai"
    path.write_text("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 3 4\n")
    argv = ["mar", str(path), "-o", str(tmp_path / "o.MAR"), "--method", "sample", "--quiet"]
    argv += ["--sampler", "pymc_gibbs", "--time-limit", "5", "--tune", "0", "--draws", "20"]
    result: list = []
    thread = threading.Thread(target=lambda: result.append(run(*argv)))
    thread.start()
    thread.join(60)
    ((code, out, err),) = result
    assert code == 0, err
    assert "chain 0: 0 tuning + 20 draws (cap), chain 1: 0 tuning + 20 draws (cap)" in out
