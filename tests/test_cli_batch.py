"""``python -m pymc_lbp mar-batch``: many networks on a Dask cluster (issue #27 item 4).

One 2-worker LocalCluster for the module (made by the command's own
:func:`pymc_lbp.cli.batch.start_local_cluster`); the batches reach it through ``--scheduler``, or
through ``--workers`` with that function replaced by one that hands the same cluster out.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="the dask extra: pip install 'pymc_lbp[dask]'")

from pymc_lbp.cli import batch, main  # noqa: E402

COLUMNS = [
    "network",
    "method",
    "seconds",
    "chains",
    "draws",
    "seed",
    "mean_error",
    "max_error",
    "exit_code",
    "error",
]

# x0 -- x1 -- x2, binary; the evidence fixes x2 = 1
CHAIN = "MARKOV\n3\n2 2 2\n3\n1 0\n2 0 1\n2 1 2\n2\n0.3 0.7\n4\n2 1 1 3\n4\n1 4 2 1\n"
# a ternary and a binary variable, one factor
PLAIN = "MARKOV\n2\n3 2\n1\n2 0 1\n6\n1 2 3 4 5 6\n"
# x0 == x1 (zero off the diagonal) and evidence x0=0, x1=1: impossible
EQUAL = "MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 0 0 1\n"
BAD = "MARKOV\n2\n2 2\n1\n2 0 1\n\n4\n0.5 0.25\n0.x 1.0\n"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, one thread each; OPENBLAS_NUM_THREADS=2 in the parent while they
    start, so that the workers' value shows it came from the parent (Dask's default is 1)."""
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "2"
    try:
        before = dict(os.environ)
        local = batch.start_local_cluster(2)
        assert dict(os.environ) == before  # the nanny's pre-spawn variables stay out of ours
    finally:
        if saved is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = saved
    with local:
        yield local


def _read_mar(path: Path) -> list[list[float]]:
    """A MAR file's marginals (``MAR``, the number of variables, then per variable its
    cardinality and probabilities)."""
    tokens = path.read_text().split()
    assert tokens[0] == "MAR"
    values, pos = [], 2
    for _ in range(int(tokens[1])):
        k = int(tokens[pos])
        values.append([float(t) for t in tokens[pos + 1 : pos + 1 + k]])
        pos += 1 + k
    assert pos == len(tokens)
    return values


@pytest.fixture
def networks(tmp_path, cluster):
    """The four networks of a batch and ``mar --method exact`` run alone on the good ones (on a
    worker: its imports are paid there once), with a reference ``chain.uai.MAR`` whose free
    variable x0 is off by 0.1 in both entries and whose evidence variable x2 is off by 0.5."""
    from distributed import Client

    data = tmp_path / "data"
    data.mkdir()
    (data / "chain.uai").write_text(CHAIN)
    (data / "chain.uai.evid").write_text("1 2 1\n")
    (data / "plain.uai").write_text(PLAIN)
    (data / "bad.uai").write_text(BAD)
    (data / "eq.uai").write_text(EQUAL)
    (data / "eq.uai.evid").write_text("2 0 0 1 1\n")
    alone = tmp_path / "alone"
    alone.mkdir()
    chain = ["mar", str(data / "chain.uai"), "--evidence", str(data / "chain.uai.evid")]
    runs = [
        [*chain, "--method", "exact", "-o", str(alone / "chain.MAR")],
        ["mar", str(data / "plain.uai"), "--exact", "-o", str(alone / "plain.MAR")],
    ]
    with Client(cluster) as client:
        futures = [client.submit(main, argv, stdout=io.StringIO(), pure=False) for argv in runs]
        assert client.gather(futures) == [0, 0]
    reference = _read_mar(alone / "chain.MAR")
    assert reference[2] == [0.0, 1.0]  # the evidence, as a delta
    reference[0] = [reference[0][0] + 0.1, reference[0][1] - 0.1]
    reference[2] = [0.5, 0.5]
    lines = [f"{len(p)} " + " ".join(map(repr, p)) for p in reference]
    (data / "chain.uai.MAR").write_text(f"MAR\n{len(reference)}\n" + "\n".join(lines) + "\n")
    names = ["chain", "plain", "bad", "eq"]
    return [str(data / f"{n}.uai") for n in names], alone


def _rows(out_dir: Path) -> list[dict[str, str]]:
    with open(out_dir / "summary.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_batch_writes_mar_files_summary_and_failing_rows(cluster, networks, tmp_path):
    files, alone = networks
    out_dir = tmp_path / "out"
    address = cluster.scheduler_address
    code, out, err = run(
        "mar-batch", *files, "--out", str(out_dir), "--scheduler", address,
        "--method", "exact", "--seed", "11", "--quiet",
    )  # fmt: skip
    assert code == 8, out + err
    assert err == ""  # --quiet: no progress bar
    for name in ("chain", "plain"):  # exact is deterministic: the very same file as mar alone
        assert (out_dir / f"{name}.MAR").read_bytes() == (alone / f"{name}.MAR").read_bytes()
    assert not (out_dir / "bad.MAR").exists() and not (out_dir / "eq.MAR").exists()

    rows = _rows(out_dir)
    assert [r["network"] for r in rows] == ["chain", "plain", "bad", "eq"]
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(11).spawn(4)]
    assert [int(r["seed"]) for r in rows] == seeds and len(set(seeds)) == 4
    chain, plain, bad, eq = rows
    assert chain["method"] == plain["method"] == "exact"
    assert [r["exit_code"] for r in rows] == ["0", "0", "4", "5"]
    assert chain["error"] == plain["error"] == ""
    assert chain["chains"] == chain["draws"] == ""  # nothing sampled
    # x0's two entries are off by 0.1, x1 not at all; the evidence variable x2 does not count
    assert float(chain["mean_error"]) == pytest.approx(0.2 / 4, abs=1e-6)
    assert float(chain["max_error"]) == pytest.approx(0.1, abs=1e-6)
    assert plain["mean_error"] == plain["max_error"] == ""  # no plain.uai.MAR
    assert bad["error"].startswith("malformed file: ") and "bad.uai" in bad["error"]
    assert "line 9" in bad["error"] and "'0.x'" in bad["error"]
    assert eq["error"].startswith("impossible evidence: ") and "eq.uai.evid" in eq["error"]
    assert all(float(r["seconds"]) >= 0 for r in rows)
    assert "pymc_lbp: error: malformed file" in (out_dir / "bad.log").read_text()
    assert "method: exact" in (out_dir / "chain.log").read_text()

    md = (out_dir / "summary.md").read_text().splitlines()
    assert md[0] == "| " + " | ".join(COLUMNS) + " |" and len(md) == 2 + 4
    assert [line.split(" | ")[0] for line in md[2:]] == ["| chain", "| plain", "| bad", "| eq"]
    assert [line.split(" | ")[8] for line in md[2:]] == ["0", "0", "4", "5"]
    assert "\n".join(md) + "\n" in out  # the table on stdout too
    last = out.splitlines()[-1]
    assert last.startswith("mar-batch: 2 of 4 networks succeeded (failed: bad: exit 4, eq: exit 5")
    assert "exit code 8" in last and address in last


def test_workers_option_starts_a_local_cluster_and_shows_progress(
    cluster, networks, tmp_path, monkeypatch
):
    """--workers N asks start_local_cluster for N workers (here it hands out the module's
    cluster); all networks fine is exit 0; without --quiet a progress bar is on stderr."""
    files, alone = networks
    asked = []

    def start(n, dashboard=False):
        asked.append(n)
        return contextlib.nullcontext(cluster)

    monkeypatch.setattr(batch, "start_local_cluster", start)
    out_dir = tmp_path / "new" / "out"  # created, parents too
    code, out, err = run(
        "mar-batch", *files[:2], "--out", str(out_dir), "--workers", "2", "--exact"
    )
    assert code == 0, out + err
    assert asked == [2]
    assert (out_dir / "plain.MAR").read_bytes() == (alone / "plain.MAR").read_bytes()
    assert [r["exit_code"] for r in _rows(out_dir)] == ["0", "0"]
    assert [r["seed"] for r in _rows(out_dir)] == ["", ""]  # no --seed: each run draws its own
    assert "mar-batch" in err and "2/2" in err
    assert out.splitlines()[-1].startswith("mar-batch: 2 of 2 networks succeeded in ")
    assert "on 2 local worker(s)" in out


def test_workers_get_the_parents_environment(cluster):
    from distributed import Client

    with Client(cluster) as client:
        seen = client.run(lambda: {k: os.environ.get(k) for k in batch.ENV_FOR_WORKERS})
    assert len(seen) == 2
    for env in seen.values():
        assert env == {
            "PYTENSOR_FLAGS": os.environ.get("PYTENSOR_FLAGS"),
            "OPENBLAS_NUM_THREADS": "2",
        }


SAMPLED = (  # what mar prints on stdout for a sampled run (pymc_lbp/cli/mar.py)
    "method: sample (--method sample given)\n"
    "plain.uai: pymc_gibbs, steps_per_draw=one sweep, seed={seed}, start: exact sample\n"
    "sampled 3 chain(s) x 30 draws of 2 free variables in 0.1 s\n"
)


def test_a_run_forwards_evidence_and_seed_and_reads_mar_output(tmp_path, monkeypatch):
    """run_network (one task) on this process, with mar replaced: the argv it gets, the row
    it makes of a sampled run's output, and a crash as a row with exit code 1."""
    seen = []

    def fake_run_mar(args, stdout, stderr):
        seen.append(args)
        if "crash" in args.network:
            raise RuntimeError("boom")
        print(SAMPLED.format(seed=args.seed), file=stdout, end="")
        print("warning: something", file=stderr)
        return 0

    monkeypatch.setattr(batch, "_import_mar", lambda: None)
    monkeypatch.setattr(batch, "run_mar", fake_run_mar)
    net = tmp_path / "plain.uai"
    (tmp_path / "plain.uai.evid").write_text("0\n")
    row = batch.run_network(str(net), str(tmp_path / "plain.MAR"), ["--draws", "30"], seed=17)
    args = seen[-1]
    assert (args.command, args.network, args.output, args.draws, args.evidence, args.seed) == (
        "mar", str(net), str(tmp_path / "plain.MAR"), 30, f"{net}.evid", 17,
    )  # fmt: skip
    assert (row["network"], row["method"], row["chains"], row["draws"], row["seed"]) == (
        "plain", "sample", 3, 30, 17,
    )  # fmt: skip
    assert row["exit_code"] == 0 and row["error"] == "" and row["mean_error"] == ""
    assert row["log"] == SAMPLED.format(seed=17) + "warning: something\n"
    mcse = str(tmp_path / "crash.MCSE")  # mar-batch --mcse: one file per network
    row = batch.run_network(str(tmp_path / "crash.uai"), str(tmp_path / "crash.MAR"), [], mcse=mcse)
    args = seen[-1]
    assert (args.network, args.output, args.mcse, args.evidence, args.seed) == (
        str(tmp_path / "crash.uai"), str(tmp_path / "crash.MAR"), mcse, None, None,
    )  # fmt: skip
    assert (row["exit_code"], row["error"]) == (1, "crashed: RuntimeError: boom")
    assert row["method"] == row["draws"] == row["seed"] == ""


def _forbidden(*args, **kwargs):
    raise AssertionError("a cluster was started before the arguments were checked")


@pytest.mark.parametrize(
    "options",
    [
        ["--draws", "0"],
        ["--method", "nope"],
        ["--seed", "-1"],
        ["--workers", "0"],
        ["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
    ],
    ids=["draws", "method", "seed", "workers", "workers-and-scheduler"],
)
def test_option_errors_exit_2_before_any_cluster(tmp_path, monkeypatch, options):
    import distributed

    monkeypatch.setattr(batch, "start_local_cluster", _forbidden)
    monkeypatch.setattr(distributed, "Client", _forbidden)
    with pytest.raises(SystemExit) as exc:
        main(["mar-batch", "a.uai", "--out", str(tmp_path / "o"), *options])
    assert exc.value.code == 2
    assert not (tmp_path / "o").exists()


def test_batch_refusals_before_any_cluster(tmp_path, monkeypatch):
    import distributed

    monkeypatch.setattr(batch, "start_local_cluster", _forbidden)
    monkeypatch.setattr(distributed, "Client", _forbidden)
    code, out, err = run("mar-batch", "a/n.uai", "b/n.uai", "--out", str(tmp_path / "o"))
    assert code == 2 and "two networks named n" in err and out == ""
    (tmp_path / "file").write_text("")
    code, _, err = run("mar-batch", "n.uai", "--out", str(tmp_path / "file"))
    assert code == 3 and "not a directory" in err
    monkeypatch.setitem(sys.modules, "distributed", None)  # the extra is not installed
    code, _, err = run("mar-batch", "n.uai", "--out", str(tmp_path / "o"))
    assert code == 3 and "pip install 'pymc_lbp[dask]'" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_every_mar_option_is_forwarded_and_parses_back():
    """mar-batch shares every mar option but those it sets per network, and forwards exactly
    the ones given (an option added to mar later is forwarded too)."""
    from pymc_lbp.cli.parser import BATCH_OWN, build_parser

    parser = build_parser()
    mar = parser.parse_args(["mar", "x.uai", "-o", "x.MAR"])
    args = parser.parse_args(
        ["mar-batch", "x.uai", "--out", "d", "--sampler", "gibbs_with_gradients",
         "--draws", "7", "--chains", "3", "--kind", "BAYES", "--exact", "--strict", "--quiet"]
    )  # fmt: skip
    assert {a.dest for a in args.forward_actions} == set(vars(mar)) - BATCH_OWN - {"command"}
    assert batch.mar_argv(args) == [
        "--sampler", "gibbs_with_gradients", "--draws", "7", "--chains", "3", "--kind", "BAYES",
        "--exact", "--strict", "--quiet",
    ]  # fmt: skip
    plain = parser.parse_args(["mar-batch", "x.uai", "--out", "d"])
    assert batch.mar_argv(plain) == ["--quiet"]


def test_network_names_and_seeds():
    assert batch.network_name("/a/DBN_11.small.uai") == "DBN_11.small"
    assert batch.network_name("net.UAI") == "net" and batch.network_name("net.txt") == "net.txt"
    assert batch.network_seeds(None, 3) == [None, None, None]
    seeds = batch.network_seeds(7, 5)
    assert seeds == batch.network_seeds(7, 5) and len(set(seeds)) == 5
    assert seeds[:2] == batch.network_seeds(7, 2)  # a network's seed does not depend on n


# --------------------------------------------------------------------------- issue #55
def test_an_interrupted_batch_writes_the_finished_runs_and_exits_130(
    cluster, networks, tmp_path, monkeypatch
):
    """Issue #55.4: Ctrl-C left the previous summary.csv beside this batch's MAR files, and a
    traceback. Now the runs that finished are in DIR with their rows, the others have a row
    that says so (and no MAR file of an earlier batch), one line on stderr, exit code 130."""
    files, alone = networks
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for name in ("chain", "plain"):
        (out_dir / f"{name}.MAR").write_text("MAR\n0\n")  # an earlier batch's
    (out_dir / "summary.csv").write_text("an earlier batch's summary\n")
    real = batch._finished

    def finished(futures, err, quiet):
        for future in real(futures, err, quiet):
            yield future
            raise KeyboardInterrupt  # Ctrl-C while the other network runs

    monkeypatch.setattr(batch, "_finished", finished)
    code, out, err = run(
        "mar-batch", *files[:2], "--out", str(out_dir), "--scheduler", cluster.scheduler_address,
        "--method", "exact", "--quiet",
    )  # fmt: skip
    assert code == 130 and err.count("\n") == 1, err
    assert err.startswith("pymc_lbp: error: interrupted: 1 of 2 networks finished; ")
    done, cut = sorted(_rows(out_dir), key=lambda row: len(row["exit_code"]))
    assert (done["exit_code"], cut["exit_code"]) == ("0", "130")
    assert cut["error"] == "interrupted before it finished"
    result = f"{done['network']}.MAR"
    assert (out_dir / result).read_bytes() == (alone / result).read_bytes()
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(
        [result, "chain.log", "plain.log", "summary.csv", "summary.md"]
    )  # the other's earlier MAR file is gone, and so are the runs' own folder


def test_results_that_are_inputs_are_refused_before_any_cluster(tmp_path, monkeypatch):
    """Issue #55.6: a result of the batch may not be one of its inputs (here the network
    DIR/summary.md, which the summary would replace)."""
    import distributed

    monkeypatch.setattr(batch, "start_local_cluster", _forbidden)
    monkeypatch.setattr(distributed, "Client", _forbidden)
    network = tmp_path / "summary.md"
    network.write_text(PLAIN)
    code, out, err = run("mar-batch", str(network), "--out", str(tmp_path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"the summary {network} is the same file as the network file {network}" in err
    assert network.read_text() == PLAIN


def test_the_local_cluster_listens_on_loopback_only_without_a_dashboard(cluster):
    """Issue #55.11: the dashboard listened on every interface (``dashboard_address=":0"``),
    unauthenticated. Now the scheduler's HTTP server is on 127.0.0.1 and serves no dashboard."""
    import urllib.error
    import urllib.request

    import psutil

    port = cluster.scheduler_info["services"]["dashboard"]
    listening = {
        c.laddr.ip
        for c in psutil.Process().net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }
    assert listening == {"127.0.0.1"}
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10)
    assert err.value.code == 404


def test_dashboard_option(cluster, tmp_path, monkeypatch):
    """``--dashboard``: the local cluster's, opened on demand, its address printed on stderr;
    it needs bokeh, and is not for --scheduler (both refused before any cluster)."""
    import types

    net = tmp_path / "plain.uai"
    net.write_text(PLAIN)
    argv = ["mar-batch", str(net), "--out", str(tmp_path / "o"), "--dashboard"]
    code, _, err = run(*argv, "--scheduler", "tcp://127.0.0.1:1")
    assert code == 2 and "the cluster at --scheduler has its own" in err
    monkeypatch.setitem(sys.modules, "distributed.dashboard.scheduler", None)  # no bokeh
    code, _, err = run(*argv)
    assert code == 3 and "--dashboard needs bokeh: pip install 'bokeh" in err
    assert not (tmp_path / "o").exists()
    monkeypatch.setitem(sys.modules, "distributed.dashboard.scheduler", types.ModuleType("d"))
    asked = []

    def start(n, dashboard=False):
        asked.append(dashboard)
        return contextlib.nullcontext(cluster)

    monkeypatch.setattr(batch, "start_local_cluster", start)
    code, out, err = run(*argv, "--exact", "--quiet")
    assert code == 0 and asked == [True], out + err
    assert err == f"mar-batch: Dask dashboard at {cluster.dashboard_link}\n"
