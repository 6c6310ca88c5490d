"""The command line: ``python -m pymc_lbp mar`` (exact, sampled, and every error exit code)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pymc_lbp.cli import EXIT_CODES, SAMPLERS, main
from pymc_lbp.models.uai import read_mar

SMALL = "uai2014_mar/DBN_11.small.uai"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_exact_writes_the_shipped_marginals(uai_dir, tmp_path):
    target = tmp_path / "out.MAR"
    code, out, err = run("mar", str(uai_dir / SMALL), "--exact", "-o", str(target))
    assert code == 0, err
    assert "exact marginals" in out
    got, ref = read_mar(target), read_mar(uai_dir / f"{SMALL}.MAR")
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r, atol=1e-6)  # the reference has 6 significant digits


def test_sampling_writes_marginals_close_to_exact(uai_dir, tmp_path):
    target = tmp_path / "out.MAR"
    code, out, err = run(
        "mar",
        str(uai_dir / SMALL),
        "-o",
        str(target),
        "--draws",
        "1000",
        "--tune",
        "100",
        "--chains",
        "2",
        "--steps-per-draw",
        "8",
        "--seed",
        "3",
        "--quiet",
    )
    assert code == 0, err
    assert "ESS of the Hamming statistic" in out and "mean acceptance" in out
    got, ref = read_mar(target), read_mar(uai_dir / f"{SMALL}.MAR")
    assert [g.size for g in got] == [r.size for r in ref]
    assert all(g.sum() == pytest.approx(1.0) for g in got)
    # 2000 draws with 8 single-site steps each are close to independent on 4 binary sites
    # (ESS ~ 2000, sd <= 0.5 / sqrt(2000) = 0.011); 0.06 is about 5 sd.
    err_max = max(float(np.abs(g - r).max()) for g, r in zip(got, ref, strict=True))
    assert err_max < 0.06


def test_missing_files_exit_3(uai_dir, tmp_path):
    code, _, err = run("mar", str(tmp_path / "nope.uai"), "-o", str(tmp_path / "o.MAR"))
    assert code == 3 and "nope.uai" in err and "no such file" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    net = str(uai_dir / SMALL)
    code, _, err = run("mar", net, "--evidence", str(tmp_path / "x.evid"), "-o", "o.MAR")
    assert code == 3 and "x.evid" in err
    code, _, err = run("mar", net, "--exact", "-o", str(tmp_path / "no" / "dir" / "o.MAR"))
    assert code == 3 and "does not exist" in err


def test_malformed_network_exits_4(tmp_path):
    bad = tmp_path / "bad.uai"
    bad.write_text("MARKOV\n2\n2 2\n1\n2 0 1\n\n4\n0.5 0.25\n0.x 1.0\n")
    code, _, err = run("mar", str(bad), "--exact", "-o", str(tmp_path / "o.MAR"))
    assert code == 4
    assert "bad.uai" in err and "line 9" in err and "'0.x'" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_evidence_out_of_range_exits_4(uai_dir, tmp_path):
    evid = tmp_path / "ev.evid"
    evid.write_text("1 2 5\n")  # variable 2 is binary
    code, _, err = run("mar", str(uai_dir / SMALL), "--evidence", str(evid), "-o", "o.MAR")
    assert code == 4 and "ev.evid" in err and "out of range" in err
    evid.write_text("1 9 0\n")  # the network has 4 variables
    code, _, err = run("mar", str(uai_dir / SMALL), "--evidence", str(evid), "-o", "o.MAR")
    assert code == 4 and "ev.evid" in err


@pytest.mark.parametrize("exact", [False, True])
def test_impossible_evidence_exits_5(tmp_path, exact):
    net = tmp_path / "eq.uai"  # x0 == x1 enforced by a zero table entry pattern
    net.write_text("MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 0 0 1\n")
    evid = tmp_path / "eq.evid"
    evid.write_text("2 0 0 1 1\n")
    argv = ["mar", str(net), "--evidence", str(evid), "-o", str(tmp_path / "o.MAR")]
    code, _, err = run(*argv, *(["--exact"] if exact else []))
    assert code == 5 and "impossible" in err and "Traceback" not in err


def test_exact_too_large_exits_6(uai_dir, tmp_path):
    argv = ["mar", str(uai_dir / SMALL), "--exact", "--max-table-size", "4", "-o", "o.MAR"]
    code, _, err = run(*argv)
    assert code == 6 and "max_table_size=4" in err


def test_usage_errors_exit_2(uai_dir):
    with pytest.raises(SystemExit) as exc:
        main(["mar", str(uai_dir / SMALL)])  # no -o
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["mar", str(uai_dir / SMALL), "-o", "x.MAR", "--sampler", "nope"])
    assert exc.value.code == 2
    # a layout the file does not support is a usage error too (reported, not raised)
    code, _, err = run("mar", str(uai_dir / SMALL), "-o", "x.MAR", "--kind", "BAYES")
    assert code == 2 and "--kind BAYES" in err and "not a Bayesian network" in err


def test_help_in_a_subprocess_lists_exit_codes_and_samplers():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.run(
        [sys.executable, "-m", "pymc_lbp", "mar", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for code, text in EXIT_CODES.items():
        assert f"{code}  {text}" in proc.stdout
    for name in SAMPLERS:
        assert name in proc.stdout
