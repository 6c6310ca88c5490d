"""The command line: ``python -m pymc_lbp mar`` (exact, sampled, and every error exit code)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pymc_lbp.models.uai as uai
from pymc_lbp.cli import EXIT_CODES, SAMPLERS, main
from pymc_lbp.models.uai import (
    UAINetwork,
    exact_marginals,
    grid_bn,
    read_mar,
    read_network,
    uai_marginals,
    write_evidence,
    write_network,
)
from tests.frequencies import marginal_z_scores

SMALL = "uai2014_mar/DBN_11.small.uai"


def _forbidden(*args, **kwargs):
    raise AssertionError("work started before the arguments were checked")


@pytest.fixture
def no_sampling(monkeypatch):
    """Make exact elimination and sampling fail the test if they start."""
    import pymc as pm

    monkeypatch.setattr(uai, "exact_marginals", _forbidden)
    monkeypatch.setattr(pm, "sample", _forbidden)


@pytest.fixture
def no_work(monkeypatch, no_sampling):
    """As ``no_sampling``, and reading the network fails the test too."""
    monkeypatch.setattr(uai, "read_network", _forbidden)


@pytest.fixture
def sample_spy(monkeypatch):
    """Record the models built and the InferenceData returned inside the command line."""
    import pymc as pm

    seen: dict[str, list] = {"models": [], "idata": []}
    real_read_uai, real_sample = uai.read_uai, pm.sample

    def read_uai(*args, **kwargs):
        seen["models"].append(real_read_uai(*args, **kwargs))
        return seen["models"][-1]

    def sample(*args, **kwargs):
        seen["idata"].append(real_sample(*args, **kwargs))
        return seen["idata"][-1]

    monkeypatch.setattr(uai, "read_uai", read_uai)
    monkeypatch.setattr(pm, "sample", sample)
    return seen


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
    assert err.startswith(f"pymc_lbp: error: impossible evidence: {evid}: ")
    assert "factor 0 on (0, 1) is zero at x0=0, x1=1" in err  # the factor and values named


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


# --------------------------------------------------------------------------- issue #14.7
UNUSABLE_OUTPUTS = {
    "existing directory": (lambda tmp: tmp, "is a directory"),
    "missing directory": (lambda tmp: tmp / "no" / "o.MAR", "does not exist"),
    "parent is a file": (lambda tmp: tmp / "file.txt" / "o.MAR", "is not a directory"),
    "name too long": (lambda tmp: tmp / ("x" * 300 + ".MAR"), "cannot be written"),
}


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "sampled"])
@pytest.mark.parametrize("case", list(UNUSABLE_OUTPUTS))
def test_unusable_output_is_refused_before_any_work(uai_dir, tmp_path, no_work, case, exact):
    """Issue #14.7: an unusable -o was found only after sampling (or elimination)."""
    (tmp_path / "file.txt").write_text("not a directory")
    make, reason = UNUSABLE_OUTPUTS[case]
    target = make(tmp_path)
    code, out, err = run("mar", str(uai_dir / SMALL), "-o", str(target), *(["--exact"] * exact))
    assert code == 3, err
    assert err.startswith(f"pymc_lbp: error: output {target}: ") and reason in err
    assert err.count("\n") == 1 and out == ""


def test_output_probe_leaves_no_file_and_keeps_an_existing_one(tmp_path):
    bad = tmp_path / "bad.uai"
    bad.write_text("MARKOV\n1\n2\n1\n1 0\n2\n0.5 x\n")
    fresh = tmp_path / "fresh.MAR"
    code, _, _ = run("mar", str(bad), "--exact", "-o", str(fresh))
    assert code == 4 and not fresh.exists()
    kept = tmp_path / "kept.MAR"
    kept.write_text("MAR\n1 2 0.5 0.5\n")
    code, _, _ = run("mar", str(bad), "--exact", "-o", str(kept))
    assert code == 4 and kept.read_text() == "MAR\n1 2 0.5 0.5\n"


@pytest.fixture
def unnormalised_bn(tmp_path, tiny_bayes):
    """tiny_bayes with the CPT row of P(x3) summing to 1.1 (BAYES declared)."""
    path = tmp_path / "bad_bn.uai"
    path.write_text(tiny_bayes.text().replace("0.25 0.25\n0.5", "0.25 0.25\n0.6"))
    return path


@pytest.mark.parametrize("kind", ["BAYES", "file"])
def test_bayes_cpt_rows_are_checked_for_exact_and_sampling_alike(
    tmp_path, unnormalised_bn, no_sampling, kind
):
    """Issue #14.7: --exact --kind BAYES accepted CPT rows that do not sum to 1."""
    results = []
    for extra in (["--exact"], []):
        argv = ["mar", str(unnormalised_bn), "--kind", kind, "-o", str(tmp_path / "o.MAR")]
        code, out, err = run(*argv, *extra)
        results.append((code, err))
    assert results[0] == results[1]  # one check, one message for both paths
    code, err = results[0]
    assert code == 2
    assert f"--kind {kind}: bad_bn.uai: factor 4 is not a conditional distribution" in err
    assert "sums to 1.1" in err and not (tmp_path / "o.MAR").exists()


def test_exact_bayes_uses_the_same_rescaled_cpts_as_the_model(tmp_path, tiny_bayes):
    """Rows within cpt_atol of 1 are rescaled for --exact as read_uai rescales them."""
    tables = [np.array(t, dtype=float) for t in tiny_bayes.tables]
    tables[3][5] = 0.40005  # P(x1 = 2 | x0 = 1): that row sums to 1.00005 (cpt_atol 1e-4)
    shapes = [tuple(tiny_bayes.cards[v] for v in scope) for scope in tiny_bayes.scopes]
    tables = [t.reshape(shape) for t, shape in zip(tables, shapes, strict=True)]
    path = tmp_path / "near_bn.uai"
    write_network(path, UAINetwork("BAYES", tiny_bayes.cards, tiny_bayes.scopes, tables))
    network = read_network(path)
    code, _, err = run("mar", str(path), "--exact", "--kind", "BAYES", "-o", str(tmp_path / "b"))
    assert code == 0, err
    got = read_mar(tmp_path / "b")
    want = exact_marginals(network.normalised_cpts())
    raw = exact_marginals(network)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-8)
    # and the rescaling matters: the raw tables give other marginals (a row of a non-root CPT)
    assert max(float(np.abs(g - r).max()) for g, r in zip(got, raw, strict=True)) > 1e-6


# --------------------------------------------------------------------------- issue #11.7
def _per_variable_draws(idata, model) -> dict[int, np.ndarray]:
    info = model.uai_info
    draws = {}
    for name in info.free_names:
        values = np.asarray(idata.posterior[name])
        for i, v in enumerate(info.members[name].tolist()):
            draws[v] = values[..., i]
    return draws


def _check_against_exact(target, idata, model, exact):
    """The MAR file holds the run's frequencies, and they agree with the exact marginals
    (ESS-based z-scores, Bonferroni bound at family-wise level 1e-3; 0/1 entries exact)."""
    written = read_mar(target)
    for w, f in zip(written, uai_marginals(idata, model), strict=True):
        np.testing.assert_allclose(w, f, atol=1e-9)
    zs, crit, violations = marginal_z_scores(_per_variable_draws(idata, model), exact)
    assert not violations
    assert zs.size > 0 and zs.max() < crit, (zs, crit)


SINGLE_SITE = [
    "gibbs_with_gradients",
    "locally_balanced",
    "path_auxiliary",
    "self_balancing",
    "pymc_gibbs",
]


def test_cli_offers_every_sampler_that_applies_to_uai_networks():
    """Issue #11.7: the CLI offered 3 of the samplers."""
    assert set(SAMPLERS) == {*SINGLE_SITE, "neural_block"}


@pytest.mark.parametrize("sampler", SINGLE_SITE)
def test_every_sampler_matches_exact_on_a_small_network(uai_dir, tmp_path, sample_spy, sampler):
    target = tmp_path / "out.MAR"
    argv = ["mar", str(uai_dir / SMALL), "-o", str(target), "--sampler", sampler]
    argv += ["--draws", "1000", "--tune", "200", "--chains", "2", "--seed", "7", "--quiet"]
    code, out, err = run(*argv)
    assert code == 0, err
    spd = "one sweep" if sampler == "pymc_gibbs" else "2"  # default: half the 4 free variables
    assert f"{sampler}, steps_per_draw={spd}," in out and "ESS of the Hamming statistic" in out
    assert ("mean acceptance probability: n/a" in out) == (sampler == "pymc_gibbs")
    (model,), (idata,) = sample_spy["models"], sample_spy["idata"]
    _check_against_exact(target, idata, model, exact_marginals(read_network(uai_dir / SMALL)))


@pytest.fixture
def small_grid_bn(tmp_path):
    """A 4 x 4 grid BN of the UAI'08 family (25 % deterministic nodes), sink = 1: the shipped
    grids have 144 and 256 variables, too many for an exact comparison in a quick test."""
    network, evidence = grid_bn(4, 0.25, seed=1)
    path = tmp_path / "grid4.uai"
    write_network(path, network)
    write_evidence(tmp_path / "grid4.uai.evid", evidence)
    return path, tmp_path / "grid4.uai.evid", exact_marginals(network, evidence)


def test_neural_block_matches_exact_on_a_grid_bn(tmp_path, small_grid_bn, sample_spy):
    path, evid, exact = small_grid_bn
    target = tmp_path / "out.MAR"
    argv = ["mar", str(path), "--evidence", str(evid), "-o", str(target)]
    argv += ["--sampler", "neural_block", "--draws", "600", "--tune", "50", "--seed", "3"]
    code, out, err = run(*argv, "--quiet")
    assert code == 0, err
    assert "neural_block, steps_per_draw=4," in out  # one sweep: 4 overlapping 3 x 3 blocks
    (model,), (idata,) = sample_spy["models"], sample_spy["idata"]
    _check_against_exact(target, idata, model, exact)


def test_neural_block_refuses_networks_that_are_not_grid_bns(uai_dir, tmp_path, no_sampling):
    target = str(tmp_path / "x.MAR")
    code, out, err = run("mar", str(uai_dir / SMALL), "--sampler", "neural_block", "-o", target)
    assert code == 2 and out == ""
    assert err.startswith("pymc_lbp: error: --sampler neural_block: the shipped grid-bn proposal")
    assert "DBN_11.small.uai: not a grid Bayesian network" in err and err.count("\n") == 1


HEAVY_PACKAGES = ("pymc", "pytensor", "arviz", "scipy")
HEAVY_MODULES = ("pymc_lbp.step_methods", "pymc_lbp.models")


def test_help_imports_no_heavy_module():
    """`python -m pymc_lbp mar --help` must not import PyMC (it took 8 s; issue #11.7)."""
    code = (
        "import runpy, sys\n"
        "sys.argv = ['pymc_lbp', 'mar', '--help']\n"
        "try:\n"
        "    runpy.run_module('pymc_lbp', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        f"packages, modules = {HEAVY_PACKAGES!r}, {HEAVY_MODULES!r}\n"
        "loaded = sorted(m for m in sys.modules\n"
        "                if m.split('.')[0] in packages or m.startswith(modules))\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "exit codes:" in proc.stdout
    assert "LOADED []" in proc.stderr, proc.stderr


def test_package_names_still_resolve():
    """The package imports its public names on first use; each one is still there."""
    import pymc_lbp

    for name in pymc_lbp.__all__:
        assert getattr(pymc_lbp, name) is not None
    assert set(pymc_lbp.__all__) <= set(dir(pymc_lbp))
    assert pymc_lbp.models.uai is uai
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pymc_lbp.nope  # noqa: B018
