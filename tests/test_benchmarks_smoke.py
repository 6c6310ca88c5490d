"""Smoke runs of the benchmarks (the package ``benchmarks``, run as ``python -m benchmarks.NAME``).

benchmarks.vs_numpyro: the PyMC side without numpyro, NumPyro when present. NumPyro and jax are
an optional, benchmark-only backend (``pip install .[bench]``): the tests that need them skip
cleanly when they are absent; everything else runs without them. Also: every module of the
package imports, none edits the import path, and a script runs as a module from the
repository root.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import benchmarks

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
MODULES = sorted(m.name for m in pkgutil.iter_modules([str(BENCH)]))


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.vs_numpyro")


def test_benchmarks_is_the_repository_package():
    """``import benchmarks`` is this checkout's folder (run from the repository root)."""
    assert Path(benchmarks.__file__).resolve().parent == BENCH
    assert {"common", "pas_common", "vs_numpyro", "ising_vs_gibbs"} <= set(MODULES)


def test_no_import_path_edits():
    """No file in benchmarks/ mentions ``sys.path``: scripts import ``benchmarks.common`` and
    run as modules from the repository root, with no edits of the import path."""
    files = [p for p in sorted(BENCH.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    assert files
    offenders = [p.name for p in files if "sys.path" in p.read_text(errors="replace")]
    assert offenders == []


@pytest.mark.parametrize("name", MODULES)
def test_every_module_imports(name):
    """Each ``benchmarks.*`` module imports (its ``main`` does not run on import)."""
    module = importlib.import_module(f"benchmarks.{name}")
    if name not in ("common", "pas_common"):
        assert callable(module.main)


def test_help_runs_as_a_module():
    """``python -m benchmarks.NAME --help`` from the repository root, with no path set up."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [sys.executable, "-m", "benchmarks.ising_vs_gibbs", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "python -m benchmarks.ising_vs_gibbs" in res.stdout and "--quick" in res.stdout


def test_one_markdown_table():
    """One markdown table for all: default cells (2 decimals, "-" for None) or compact ones."""
    from benchmarks.common import compact_cell, markdown_table

    rows = [{"a": 1.23456, "b": None, "c": 12}, {"a": 1234.5, "b": "x", "c": True}]
    cols = [("a", "A"), ("b", "B"), ("c", "C")]
    assert markdown_table(rows, cols) == (
        "| A | B | C |\n|---|---|---|\n| 1.23 | - | 12 |\n| 1234.50 | x | True |"
    )
    assert markdown_table(rows, cols, cell=compact_cell) == (
        "| A | B | C |\n|---|---|---|\n| 1.23 | None | 12 |\n| 1.23e+03 | x | True |"
    )


def test_pymc_side_quick_without_numpyro(bench, tmp_path):
    """--quick on the 4x4 lattice, PyMC samplers only: every run measured, files written."""
    args = ["--quick", "--no-numpyro", "--targets", "tiny", "--tune", "5", "--draws", "15"]
    payload = bench.main([*args, "--out", str(tmp_path)])
    rows = {r["sampler"]: r for r in payload["rows"]}
    assert set(rows) == set(bench.PYMC_SAMPLERS)
    for row in rows.values():
        assert row["ess"] > 0 and row["wall"] > 0 and row["cpu"] > 0
        assert row["construct_first"] > 0
    assert rows["PathAuxiliaryLBP"]["mh_steps_per_draw"] == 10
    assert rows["GibbsWithGradients"]["mh_steps_per_draw"] == 100
    assert rows["PyMC-BinaryGibbs"]["mh_steps_per_draw"] == 16  # one sweep of the 16 sites
    assert rows["LocallyBalanced-defaults"]["mh_steps_per_draw"] == 16  # its default sweep
    saved = json.loads((tmp_path / "vs_numpyro.json").read_text())
    assert saved["protocol"]["chains"] == 2
    runs = saved["runs"]
    assert len(runs) == len(bench.PYMC_SAMPLERS) and {r["draws"] for r in runs} == {15}
    assert (tmp_path / "vs_numpyro.png").exists()
    assert "PathAuxiliaryLBP" in (tmp_path / "vs_numpyro.md").read_text()


def test_every_pymc_lbp_option_is_explicit(bench):
    """The benchmark passes steps_per_draw (and PAS's other options), never relies on defaults."""
    for table in (bench.PYMC_LBP_OPTIONS, bench.PYMC_LBP_OPTIONS_MIXED):
        assert table["GibbsWithGradients"]["steps_per_draw"] >= 1
        pas = table["PathAuxiliaryLBP"]
        for key in (
            "path_scale",
            "single_site_share",
            "target_accept",
            "balancing",
            "differences",
            "initial_path_scale",
            "steps_per_draw",
        ):
            assert key in pas


def test_hamming_ess_matches_pymc_reference(bench):
    """common.hamming_ess uses the reference state of pymc_lbp.diagnostics.hamming_trace."""
    import arviz as az

    from pymc_lbp.diagnostics import ess, hamming_trace

    draws = np.random.default_rng(1).integers(0, 2, size=(2, 50, 4, 4))
    idata = az.from_dict(posterior={"x": draws})
    expected = ess(hamming_trace(idata, ["x"], seed=bench.HAMMING_SEED))
    assert bench.efficiency(bench.make_target("tiny"), {"x": draws}) == pytest.approx(expected)


def test_same_target_check_detects_a_different_model(bench):
    """The PyMC model equals the numpy Ising energy up to a constant; a wrong coupling fails."""
    target = bench.make_target("tiny")
    assert bench.check_same_target(target, numpyro=False)["pymc_vs_numpy_energy"] < 1e-9
    wrong = bench.make_target("tiny")
    wrong.coupling = target.coupling + 0.1  # the PyMC model keeps the old coupling
    wrong._model = target.pymc_model()
    with pytest.raises(AssertionError, match="pymc_vs_numpy_energy"):
        bench.check_same_target(wrong, numpyro=False)


@pytest.mark.parametrize(
    "name",
    [
        "tiny",
        "spike_slab",
        pytest.param("lsb3", marks=pytest.mark.slow),
        pytest.param("ising50", marks=pytest.mark.slow),
    ],
)
def test_numpyro_models_are_the_same_targets(bench, name):
    """NumPyro's log densities equal PyMC's up to a constant at random states (when installed)."""
    pytest.importorskip("numpyro", reason="needs numpyro: pip install -e '.[bench]'")
    checks = bench.check_same_target(bench.make_target(name), numpyro=True)
    assert "pymc_vs_numpyro" in checks


@pytest.mark.slow
def test_numpyro_side_quick(bench, tmp_path):
    """DiscreteHMCGibbs on the 4x4 lattice: sampling and JIT timed apart. The plain kernel only:
    ``modified`` is passed through to NumPyro on the same code path here, and NumPyro's modified
    DiscreteHMCGibbs runs in test_compiled_mixed_quick."""
    pytest.importorskip("numpyro", reason="needs numpyro: pip install -e '.[bench]'")
    target = bench.make_target("tiny")
    res = bench.run_numpyro(target, False, tune=5, draws=20, seed=0)
    assert res["ess"] > 0 and res["wall"] > 0
    assert res["compile_warmup"] > 0 and res["compile_sampling"] > 0
    assert res["mh_steps_per_draw"] == 16
    assert res["options"]["modified"] is False


def test_user_ising_quick(tmp_path):
    """benchmarks.user_ising --quick: every sampler measured with defaults, files written."""
    module = importlib.import_module("benchmarks.user_ising")
    payload = module.main(["--quick", "--out", str(tmp_path)])
    rows = {r["sampler"]: r for r in payload["rows"]}
    assert set(rows) == set(module.SAMPLERS)
    assert all(r["ess"] > 0 and r["construct_seconds"] > 0 for r in rows.values())
    # written the way users write it, the lattice is found pairwise: auto takes its couplings
    assert rows["PathAuxiliaryLBP"]["differences"] == "exact (pairwise couplings)"
    assert json.loads((tmp_path / "user_ising_quick.json").read_text())["rows"]
    assert (tmp_path / "user_ising_quick.png").stat().st_size > 0


def test_batched_gradient_quick(tmp_path):
    """benchmarks.batched_gradient --quick: one model's gradient timed for one chain and for
    vectorised chains, the ratio of the two, files written."""
    pytest.importorskip("jax", reason="needs jax: pip install -e '.[jax]'")
    module = importlib.import_module("benchmarks.batched_gradient")
    argv = ["--quick", "--repeats", "2", "--chains", "4", "--out", str(tmp_path)]
    (row,) = module.main(argv)["rows"]
    assert row["chains"] == 4 and row["one_chain_us"] > 0 and row["chains_us"] > 0
    assert row["ratio"] == pytest.approx(row["chains_us"] / row["one_chain_us"])
    assert (tmp_path / "batched_gradient_quick.md").read_text().count("|") > 10


def test_integer_models_quick(tmp_path):
    """benchmarks.integer_models --quick on one model: both samplers measured, files written."""
    module = importlib.import_module("benchmarks.integer_models")
    payload = module.main(["--quick", "--models", "poisson_counts", "--out", str(tmp_path)])
    assert {r["sampler"] for r in payload["rows"]} == {"pymc_lbp LocallyBalanced", "PyMC default"}
    assert all(r["sample_s"] > 0 for r in payload["rows"])
    assert (tmp_path / "integer_models_quick.png").stat().st_size > 0


def test_uai_marginals_runs_for_their_budget_and_merge(tmp_path):
    """benchmarks.uai_marginals on the smallest shipped network: a run with thinned steps and
    PyMC's Gibbs each use their whole budget (they stop on time, not on a draw count), and
    --merge combines their JSON into one table, a later tag replacing an earlier run."""
    module = importlib.import_module("benchmarks.uai_marginals")
    common = ["--networks", "DBN_11.small", "--budget", "1", "--out", str(tmp_path)]
    first = module.main([*common, "--samplers", "gibbs_with_gradients", "--tag", "_a"])
    second = module.main(
        [*common, "--samplers", "gibbs_with_gradients", "pymc_gibbs", "--tag", "_b"]
    )
    for run in first["runs"] + second["runs"]:
        assert run["seconds"][-1] >= 1.0 * (1 - module.MARK_SLACK), run["sampler"]
    merged = module.main(["--merge", "_a", "_b", "--tag", "_ab", "--out", str(tmp_path)])
    assert [(r["network"], r["sampler"]) for r in merged["runs"]] == [
        ("DBN_11.small", "gibbs_with_gradients"),
        ("DBN_11.small", "pymc_gibbs"),
    ]
    assert merged["runs"][0]["seconds"] == second["runs"][0]["seconds"]  # the later tag's
    assert "pymc_gibbs" in (tmp_path / "uai_marginals_ab.md").read_text()
    assert (tmp_path / "uai_marginals_ab.png").stat().st_size > 0


def test_gmm_active_components_quick(tmp_path):
    """benchmarks.gmm_active_components --quick: every sampler runs from one active
    component, the log-likelihood and counts are recorded, files written."""
    module = importlib.import_module("benchmarks.gmm_active_components")
    payload = module.main(["--quick", "--out", str(tmp_path)])
    rows = {r["sampler"]: r for r in payload["rows"]}
    assert set(rows) == set(module.SAMPLERS)
    assert all(np.isfinite(r["mean_loglik"]) and r["draws_per_second"] > 0 for r in rows.values())
    assert 0 < rows["neural-mixed"]["accept"] <= 1
    assert 0 < rows["neural-mixed-compiled"]["accept"] <= 1  # pymc_lbp.sample's pair updates
    assert (tmp_path / "gmm_active_components_quick.png").stat().st_size > 0


def test_chain_crf_quick(tmp_path):
    """benchmarks.chain_crf --quick: every sampler measured against exact marginals, files
    written; NeuralBlock with defaults found the chain and its shipped proposal."""
    module = importlib.import_module("benchmarks.chain_crf")
    payload = module.main(["--quick", "--out", str(tmp_path)])
    rows = {r["sampler"]: r for r in payload["rows"]}
    assert set(rows) == set(module.SAMPLERS)
    assert all(0 < r["final_error"] < 1 and r["draws"] >= 20 for r in rows.values())
    assert "chain-k3-b3" in rows["neural"]["blocks_reason"]
    assert (tmp_path / "chain_crf_quick.png").stat().st_size > 0


def test_first_run_table_pairs_ours_with_pymc_per_cache():
    """benchmarks.first_run: one row per model and cache state, our step and pymc_lbp.sample
    beside PyMC's defaults, the ratios of first-run seconds (build + first sample); an
    incomplete set of runs makes no row."""
    from benchmarks.first_run import table

    def run(model, sampler, cache, build, sample):
        return {"model": model, "sampler": sampler, "cache": cache, "construction_s": build,
                "sample_s": sample, "first_run_s": build + sample}  # fmt: skip

    rows = [
        run("m", "ours", "cold", 2.0, 4.0),
        run("m", "pymc", "cold", 1.0, 2.0),
        run("m", "lbp_sample", "cold", 3.0, 1.5),
        run("m", "ours", "warm", 0.5, 0.5),
        run("m", "pymc", "warm", 1.0, 1.0),
        run("m", "lbp_sample", "warm", 1.0, 0.5),
        run("other", "ours", "warm", 1.0, 1.0),
        run("other", "pymc", "warm", 1.0, 1.0),
    ]
    out = table(rows)
    assert [(r["model"], r["cache"]) for r in out] == [("m", "cold"), ("m", "warm")]
    assert out[0]["ratio"] == pytest.approx(2.0) and out[1]["ratio"] == pytest.approx(0.5)
    assert out[0]["ours_build"] == 2.0 and out[0]["pymc_total"] == 3.0
    assert out[0]["lbp_build"] == 3.0 and out[0]["lbp_ratio"] == pytest.approx(1.5)
    assert out[1]["lbp_ratio"] == pytest.approx(0.75)


def test_compiled_mixed_quick(tmp_path):
    """benchmarks.compiled_mixed --quick --no-cold, one sampler of each kind (the suite's time):
    coal mining sampled by PyMC's default steps, pymc_lbp.sample with 4 chains and, when numpyro
    is installed, NumPyro's modified DiscreteHMCGibbs; min ESS/s, ratios, files written."""
    module = importlib.import_module("benchmarks.compiled_mixed")
    samplers = ["pymc_default", "lbp_sample_4", "numpyro_dhmcg_modified"]
    args = ["--quick", "--no-cold", "--out", str(tmp_path), "--samplers", *samplers]
    payload = module.main(args)
    expected = {"pymc_default", "lbp_sample_4"}
    if module.numpyro_available():  # the NumPyro samplers run when numpyro is installed
        expected.add("numpyro_dhmcg_modified")
        assert payload["same_target_checks"]["coal_mining"] >= 0
    saved = json.loads((tmp_path / "compiled_mixed.json").read_text())
    rows = {r["sampler"]: r for r in saved["rows"]}
    assert set(rows) == expected and {r["model"] for r in rows.values()} == {"coal_mining"}
    for row in rows.values():
        assert row["min_ess_per_s"] > 0 and row["seconds"] > 0 and row["build_s"] > 0
        assert row["ess_per_grad"] > 0
    assert rows["lbp_sample_4"]["chains"] == 4 and rows["pymc_default"]["chains"] == 2
    assert rows["lbp_sample_4"]["vs_pymc_default"] > 0
    ours = rows["lbp_sample_4"]
    assert ours["chain_method"] == "vectorized" and ours["nuts_steps_mean"] >= 1
    assert ours["nuts_longest_vs_mean"] >= 1
    assert saved["machine"]["platform"] and saved["protocol"]["draws"] == 20
    assert (tmp_path / "compiled_mixed.png").stat().st_size > 0
    assert "lbp_sample_4" in (tmp_path / "compiled_mixed.md").read_text()


def test_compiled_mixed_nuts_steps_and_sampler_names():
    """The longest chain's NUTS steps per draw (what vectorised chains all run) against the
    mean, from stats with known values; lbp_sample_seq_N names sequential chains."""
    import arviz as az

    module = importlib.import_module("benchmarks.compiled_mixed")
    warm = {"n_steps": np.array([[1, 7], [3, 1]])}
    kept = {"n_steps": np.array([[1, 2, 3], [3, 2, 1]])}
    idata = az.from_dict(
        posterior={"x": np.zeros((2, 3))}, sample_stats=kept, warmup_sample_stats=warm,
        save_warmup=True,
    )  # fmt: skip
    got = module.nuts_steps(idata)
    assert got["nuts_steps_mean"] == pytest.approx(24 / 10)  # both chains, warmup too
    assert got["nuts_steps_longest_chain"] == pytest.approx((3 + 7 + 3 + 2 + 3) / 5)
    no_nuts = az.from_dict(
        posterior={"x": np.zeros((2, 3))}, sample_stats={"accept": kept["n_steps"]}
    )
    assert module.nuts_steps(no_nuts) == {}
    assert module.sampler_name("lbp_sample_seq_32") == "lbp_sample_seq_32"
    for bad in ("lbp_sample_seq_0", "lbp_sample_par_4"):
        with pytest.raises(argparse.ArgumentTypeError):
            module.sampler_name(bad)


def test_vs_alternatives_models_and_what_pymc_extras_marginalizes():
    """benchmarks.vs_alternatives' held-out models (no sampling, the suite's time): each NumPyro
    twin has the PyMC model's density, pymc-extras marginalizes the prior-form spike-and-slab
    and the mixture (their initial values passed to the samplers instead) and refuses the
    product form, which the benchmark then records as skipped."""
    pytest.importorskip("pymc_extras", reason="the bench extra: pip install -e '.[bench]'")
    module = importlib.import_module("benchmarks.vs_alternatives")
    for spec in module.HELD_OUT.values():
        assert module.check_same_density(spec) >= 0
    model, initvals = module.marginal_model(module.HELD_OUT["spike_slab_prior"])
    assert sorted(v.name for v in model.free_RVs) == ["b", "s"] and initvals == {}
    model, initvals = module.marginal_model(module.HELD_OUT["gmm_400"])
    assert "z" not in [v.name for v in model.free_RVs]
    np.testing.assert_array_equal(initvals["mu"], [-1.0, 0.0, 1.0])
    spec = module.HELD_OUT["spike_slab_product"]
    res = module.run_marginal(spec, "nutpie", tune=1, draws=1, seed=0)
    assert res["skipped"].startswith("pymc-extras: NotImplementedError")
