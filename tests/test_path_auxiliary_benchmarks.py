"""Smoke runs of the path auxiliary benchmark scripts (``--quick``: tiny models, few draws)."""

from __future__ import annotations

import importlib
import json

import pytest


def _load(name: str):
    """The benchmark module ``benchmarks.<name>`` (what ``python -m benchmarks.<name>`` runs)."""
    return importlib.import_module(f"benchmarks.{name}")


@pytest.mark.slow
def test_scaling_benchmark_quick(tmp_path):
    bench = _load("path_auxiliary_scaling")
    assert bench.main(["--quick", "--targets", "bernoulli", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "path_auxiliary_scaling_quick.json").read_text())["bernoulli"]
    labels = {r["label"] for r in res["runs"]}
    assert {"LBP-1", "ALBP (0.574)", "PyMC BinaryGibbsMetropolis"} <= labels
    assert res["ratio_albp_lbp1_ejd"] > 1.0
    assert res["independent"] and (tmp_path / "path_auxiliary_fig2_bernoulli_quick.png").exists()
    assert "Table 1" in (tmp_path / "path_auxiliary_scaling_quick.md").read_text()


@pytest.mark.slow
def test_vs_gibbs_benchmark_quick(tmp_path):
    bench = _load("path_auxiliary_vs_gibbs")
    args = ["--quick", "--cases", "LSB case 3", "--profile", "--out", str(tmp_path)]
    assert bench.main(args) == 0
    res = json.loads((tmp_path / "path_auxiliary_vs_gibbs_quick.json").read_text())
    (case,) = res["cases"]
    assert case["pas_ess_per_sec"] > 0 and case["gibbs_ess_per_sec"] > 0
    assert res["profile"]["buckets"]["compiled differences"] > 0
