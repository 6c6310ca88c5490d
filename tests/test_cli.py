"""The command line: ``python -m pymc_lbp mar`` (exact, sampled, and every error exit code)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pymc_lbp
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
from tests.helpers.frequencies import marginal_z_scores

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

    seen: dict[str, list] = {"models": [], "idata": [], "kwargs": []}
    real_read_uai, real_sample = uai.read_uai, pm.sample

    def read_uai(*args, **kwargs):
        seen["models"].append(real_read_uai(*args, **kwargs))
        return seen["models"][-1]

    def sample(*args, **kwargs):
        seen["kwargs"].append(kwargs)
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
    code, _, err = run(*argv, *(["--exact"] if exact else ["--method", "sample"]))
    assert code == 5 and "impossible" in err and "Traceback" not in err
    assert err.startswith(f"pymc_lbp: error: impossible evidence: {evid}: ")
    assert "factor 0 on (0, 1) is zero at x0=0, x1=1" in err  # the factor and values named


def test_method_auto_is_exact_where_elimination_fits_and_says_so(uai_dir, tmp_path, monkeypatch):
    """--method auto (the default) writes the exact marginals when the elimination's largest
    table fits --max-table-size, and samples otherwise; stdout's log line and stderr say which
    and why; --exact is --method exact, and contradicting --method sample is a usage error."""
    from pymc_lbp.cli import mar as mar_module

    network = str(uai_dir / SMALL)
    target = tmp_path / "auto.MAR"
    code, out, err = run("mar", network, "-o", str(target))
    assert code == 0, err
    assert out.startswith("method: exact (auto: elimination's largest table ")
    assert "pymc_lbp mar: exact marginals (auto: elimination's largest table" in err
    expected = exact_marginals(read_network(uai_dir / SMALL))
    for got, want in zip(read_mar(target), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9)  # the file's 10 significant digits
    calls = []
    monkeypatch.setattr(mar_module, "_sample", lambda *a: calls.append(a) or 0)
    code, out, err = run("mar", network, "-o", str(target), "--max-table-size", "4")
    assert code == 0 and len(calls) == 1
    assert out.startswith("method: sample (auto: elimination needs a table of ")
    assert "> 4 entries" in out
    code, out, _ = run("mar", network, "-o", str(target), "--method", "exact")
    assert out.startswith("method: exact (--method exact given)")
    code, out, _ = run("mar", network, "-o", str(target), "--exact", "--quiet")
    assert out.startswith("method: exact (--exact given)")
    code, _, err = run("mar", network, "-o", str(target), "--exact", "--method", "sample")
    assert code == 2 and "--exact is --method exact" in err
    assert len(calls) == 1  # --method exact never samples


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
    # a str keeps the separator a Path would drop (a file "newdir" used to be written)
    "trailing separator": (lambda tmp: f"{tmp / 'newdir'}{os.sep}", "ends with a path separator"),
    "trailing separator, missing parent": (
        lambda tmp: f"{tmp / 'no' / 'newdir'}{os.sep}",
        "ends with a path separator",
    ),
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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]  # nothing written


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
    for extra in (["--exact"], ["--method", "sample"]):
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
    "path_auxiliary_lbp",
    "self_balancing",
    "pymc_gibbs",
]


def test_cli_offers_every_sampler_that_applies_to_uai_networks():
    """Issue #11.7: the CLI offered 3 of the samplers."""
    assert set(SAMPLERS) == {*SINGLE_SITE, "neural_block", "block_gibbs"}


@pytest.mark.parametrize("sampler", SINGLE_SITE)
def test_every_sampler_matches_exact_on_a_small_network(uai_dir, tmp_path, sample_spy, sampler):
    target = tmp_path / "out.MAR"
    argv = [
        "mar",
        str(uai_dir / SMALL),
        "-o",
        str(target),
        "--sampler",
        sampler,
        "--method",
        "sample",
    ]
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
    # 2,000 draws: the slowest marginal's ESS was 89 at 600 (the helper's floor is 200)
    argv += ["--sampler", "neural_block", "--draws", "2000", "--tune", "50", "--seed", "3"]
    argv += ["--method", "sample"]
    code, out, err = run(*argv, "--quiet")
    assert code == 0, err
    assert "neural_block, steps_per_draw=4," in out  # one sweep: 4 overlapping 3 x 3 blocks
    (model,), (idata,) = sample_spy["models"], sample_spy["idata"]
    _check_against_exact(target, idata, model, exact)


def test_neural_block_refuses_networks_that_are_not_grid_bns(uai_dir, tmp_path, no_sampling):
    target = str(tmp_path / "x.MAR")
    code, out, err = run(
        "mar", str(uai_dir / SMALL), "--sampler", "neural_block", "-o", target, "--method", "sample"
    )
    assert code == 2 and out == ""
    assert err.startswith("pymc_lbp: error: --sampler neural_block: the shipped grid-bn proposal")
    assert "DBN_11.small.uai: not a grid Bayesian network" in err and err.count("\n") == 1


# ------------------------------------------------- zero factors that split the state space
XOR_ARGS = ("--method", "sample", "--chains", "4", "--draws", "300", "--tune", "50", "--seed", "5")
XOR_ARGS += ("--quiet",)


def _xor_network(wall: float) -> UAINetwork:
    """x0 != x1 (table wall 1 1 wall) and a factor on (x0, x2) with a wall entry."""
    return UAINetwork(
        "MARKOV",
        [2, 2, 2],
        [(0, 1), (0, 2)],
        [np.array([[wall, 1.0], [1.0, wall]]), np.array([[1.5, 0.65], [wall, 1.0]])],
    )


@pytest.fixture
def xor_uai(tmp_path):
    """x0 != x1 (table 0 1 1 0) and a factor on (x0, x2) with a zero entry: single-site moves
    never leave the region {x0=0, x1=1} (probability 2.15/3.15 = 0.683) or {x0=1, x1=0} (0.317)
    they start in. Returns the file and the exact marginals."""
    network = _xor_network(0.0)
    path = tmp_path / "xor.uai"
    write_network(path, network)
    exact = exact_marginals(network)
    np.testing.assert_allclose(exact[0], [2.15 / 3.15, 1 / 3.15])
    return path, exact


@pytest.fixture
def walled_uai(tmp_path):
    """The xor network with walls of 1e-12 instead of zeros: every state is possible, so the
    single-site samplers are not refused (``check_sampler``), but their chains never cross a
    wall in a short run. Returns the file."""
    path = tmp_path / "walled.uai"
    write_network(path, _xor_network(1e-12))
    return path


def _chain_values(idata, variable: int) -> np.ndarray:
    """Per chain, the fraction of draws with ``x_variable = 1`` (the network is all binary)."""
    return np.asarray(idata.posterior["x_card2"])[..., variable].mean(axis=1)


def test_default_sampler_crosses_zero_factors_and_matches_exact(tmp_path, xor_uai, sample_spy):
    """Regression: every sampler wrote 0/1 marginals for x0 and x1 (exact 0.683/0.317) with
    R-hat 1.00. The default, block_gibbs, resamples the one cluster {x0, x1, x2} exactly."""
    path, exact = xor_uai
    target = tmp_path / "out.MAR"
    code, out, err = run("mar", str(path), "-o", str(target), *XOR_ARGS)
    assert code == 0, err
    # one block holds every variable, so every draw is an independent exact sample: the
    # frequencies are proportions of n = 4 x 300 draws, within 5 standard errors
    n = 4 * 300
    for got, want in zip(read_mar(target), exact, strict=True):
        tol = 5 * np.sqrt(want * (1 - want) / n)
        assert np.all(np.abs(got - want) <= tol), (got, want, tol)
    (idata,) = sample_spy["idata"]
    assert (_chain_values(idata, 0) > 0).all() and (_chain_values(idata, 0) < 1).all()
    assert "xor.uai: block_gibbs, steps_per_draw=1," in out and err == ""  # one block, no warning


@pytest.mark.parametrize("sampler", ["locally_balanced", "path_auxiliary_lbp", "pymc_gibbs"])
def test_chains_that_never_leave_their_region_warn(tmp_path, walled_uai, sample_spy, sampler):
    """Regression: the chains start in different regions (random feasible starts), a single-site
    sampler keeps each in its own (walls of 1e-12: zero walls refuse the sampler), and the
    comparison of the chains says so on stderr."""
    path = walled_uai
    target = tmp_path / "out.MAR"
    code, out, err = run("mar", str(path), "-o", str(target), "--sampler", sampler, *XOR_ARGS)
    assert code == 0, err
    (idata,) = sample_spy["idata"]
    assert set(_chain_values(idata, 0).tolist()) == {0.0, 1.0}  # stuck, in both regions
    assert err.startswith("warning: the 4 chains disagree on ") and err.count("\n") == 1
    assert "x0=1: every chain stays at one value" in err and "x1=1: " in err
    assert "did not mix between the regions they started in" in err
    assert "MAR file may be wrong; try --sampler block_gibbs or more draws" in err
    assert target.exists() and "marginals ->" in out


def test_sampler_names_are_the_step_classes_names():
    """Issue #26.4: a --sampler that is one step class is named as the class's ``name``."""
    from pymc_lbp.samplers.block.step import NeuralBlock

    classes = [
        pymc_lbp.GibbsWithGradients,
        pymc_lbp.LocallyBalanced,
        pymc_lbp.PathAuxiliaryLBP,
        pymc_lbp.SelfBalancing,
        NeuralBlock,
        pymc_lbp.BlockGibbs,
    ]
    assert {cls.name for cls in classes} == set(SAMPLERS) - {"pymc_gibbs"}


def test_chain_disagreement_compares_the_chains_not_trends_within_them(xor_uai):
    import arviz as az

    from pymc_lbp.cli import chain_disagreement

    model = uai.read_uai(read_network(xor_uai[0]))

    def check(values, **kwargs):
        return chain_disagreement(az.from_dict(posterior={"x_card2": values}), model, **kwargs)

    rng = np.random.default_rng(0)
    assert check((rng.random((4, 400, 3)) < 0.4).astype(np.int64)) == {}  # independent draws
    trend = np.zeros((4, 400, 3), dtype=np.int64)
    trend[:, 200:] = 1  # every chain the same: 0 then 1 (split R-hat would see the trend)
    assert check(trend) == {}
    stuck = np.zeros((4, 400, 3), dtype=np.int64)
    stuck[2:, :, 0] = 1  # chains 2 and 3 at x0 = 1, the others at x0 = 0
    stuck[..., 2] = rng.random((4, 400)) < 0.5
    found = check(stuck)
    assert list(found) == [0] and found[0].startswith("x0=1: every chain stays at one value")
    never = (rng.random((4, 400, 3)) < 0.6).astype(np.int64)
    never[0, :, 2] = 0  # chain 0 never visits x2 = 1, the others spend 60 % there
    found = check(never, rhat_threshold=np.inf)  # the share rule alone
    assert list(found) == [2] and "chain frequencies 0.00-0.6" in found[2]
    assert check(never[:1]) == {}  # one chain: nothing to compare


def test_strict_makes_disagreeing_chains_exit_7(tmp_path, walled_uai):
    path = walled_uai
    target = tmp_path / "out.MAR"
    argv = ["mar", str(path), "-o", str(target), "--sampler", "locally_balanced", "--strict"]
    code, _, err = run(*argv, *XOR_ARGS)
    assert code == 7 and EXIT_CODES[7].startswith("chains disagree")
    warning, error = err.splitlines()
    assert warning.startswith("warning: the 4 chains disagree")
    assert error.startswith("pymc_lbp: error: --strict: the chains disagree on 3 variable(s)")
    assert "not certified" in error and target.exists()
    code, _, err = run(*argv[:-3], "--strict", *XOR_ARGS)  # the default sampler: certified
    assert code == 0 and err == ""


def test_strict_needs_two_chains(uai_dir, tmp_path, no_sampling):
    argv = [
        "mar",
        str(uai_dir / SMALL),
        "-o",
        str(tmp_path / "o.MAR"),
        "--strict",
        "--method",
        "sample",
    ]
    code, out, err = run(*argv, "--chains", "1")
    assert code == 2 and out == "" and "--strict compares chains" in err


def test_chains_start_from_distinct_random_feasible_states(tmp_path, xor_uai, sample_spy):
    """Regression: every chain started from the one state read_uai found."""
    path, _ = xor_uai
    code, out, _ = run("mar", str(path), "-o", str(tmp_path / "o.MAR"), *XOR_ARGS)
    assert code == 0
    assert "start: exact posterior sample per chain (3 distinct of 4)" in out
    (kwargs,), (model,) = sample_spy["kwargs"], sample_spy["models"]
    starts = [uai.uai_state_from_point(point, model) for point in kwargs["initvals"]]
    assert len(starts) == 4 and len({tuple(s) for s in starts}) == 3  # all the feasible states
    assert np.isfinite(model.uai_info.network.log_factor_product(np.array(starts))).all()
    # another seed, other starts (the three states in another order)
    sample_spy["kwargs"].clear()
    argv = ["mar", str(path), "-o", str(tmp_path / "o.MAR"), *XOR_ARGS[:-3], "--seed", "6"]
    assert run(*argv, "--quiet")[0] == 0
    again = [uai.uai_state_from_point(p, model) for p in sample_spy["kwargs"][0]["initvals"]]
    assert [tuple(s) for s in again] != [tuple(s) for s in starts]


def test_block_gibbs_matches_exact_without_determinism(uai_dir, tmp_path, sample_spy):
    target = tmp_path / "out.MAR"
    argv = ["mar", str(uai_dir / SMALL), "-o", str(target), "--sampler", "block_gibbs"]
    argv += ["--method", "sample"]
    code, out, err = run(*argv, "--draws", "300", "--tune", "20", "--seed", "2", "--quiet")
    assert code == 0 and err == "", err
    assert "block_gibbs, steps_per_draw=1," in out  # DBN_11.small: one cluster of 4 variables
    (model,), (idata,) = sample_spy["models"], sample_spy["idata"]
    _check_against_exact(target, idata, model, exact_marginals(read_network(uai_dir / SMALL)))


HEAVY_PACKAGES = ("pymc", "pytensor", "arviz", "scipy")
HEAVY_MODULES = ("pymc_lbp.step_methods", "pymc_lbp.models")


def run_reporting_heavy_modules(code: str) -> subprocess.CompletedProcess:
    """``code`` run in a new Python process that then prints ``LOADED [...]`` on stderr: the
    heavy modules (:data:`HEAVY_PACKAGES`, :data:`HEAVY_MODULES`) it imported."""
    code += (
        f"packages, modules = {HEAVY_PACKAGES!r}, {HEAVY_MODULES!r}\n"
        "loaded = sorted(m for m in sys.modules\n"
        "                if m.split('.')[0] in packages or m.startswith(modules))\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_help_imports_no_heavy_module():
    """`python -m pymc_lbp mar --help` must not import PyMC (it took 8 s; issue #11.7)."""
    code = (
        "import runpy, sys\n"
        "sys.argv = ['pymc_lbp', 'mar', '--help']\n"
        "try:\n"
        "    runpy.run_module('pymc_lbp', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
    )
    proc = run_reporting_heavy_modules(code)
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


# ------------------------------------------------- --time-limit, --estimator and --mcse
def _mcse_file(path: Path) -> list[np.ndarray]:
    """Read the MCSE file: the MAR layout under the header MCSE."""
    tokens = path.read_text().split()
    assert tokens[0] == "MCSE"
    n, pos, out = int(tokens[1]), 2, []
    for _ in range(n):
        card = int(tokens[pos])
        out.append(np.array([float(t) for t in tokens[pos + 1 : pos + 1 + card]]))
        pos += 1 + card
    assert pos == len(tokens)
    return out


def _budget_report(out: str, err: str) -> tuple[float, list[int]]:
    """(seconds after the start when the MAR file was written, draws per chain)."""
    import re

    written = float(re.search(r"MAR written at ([0-9.]+) s", out).group(1))
    per_chain = re.search(r"--time-limit [0-9.]+ s: ([0-9, ]+) draws per chain", err).group(1)
    return written, [int(d) for d in per_chain.split(", ")]


def test_time_limit_samples_until_the_budget_and_matches_exact(uai_dir, tmp_path):
    """DBN_11.small is one block_gibbs cluster, so every draw is an independent exact sample
    and each Rao-Blackwellised entry has a variance <= p (1 - p): within 5 standard errors of
    the exact marginal for the N draws made. The MAR file is written within the budget; the
    run stops on time, far below the --draws cap."""
    import time

    network = uai_dir / SMALL
    target, mcse = tmp_path / "out.MAR", tmp_path / "out.MCSE"
    warm = ["mar", str(network), "-o", str(target), "--method", "sample", "--quiet"]
    assert run(*warm, "--draws", "5", "--tune", "0", "--seed", "1")[0] == 0  # compile once
    budget, cap = 3.0, 10**6
    t0 = time.perf_counter()
    code, out, err = run(
        *warm,
        "--time-limit",
        str(budget),
        "--draws",
        str(cap),
        "--tune",
        "20",
        "--seed",
        "4",
        "--mcse",
        str(mcse),
    )
    wall = time.perf_counter() - t0
    assert code == 0, err
    written, draws = _budget_report(out, err)
    assert written <= budget and wall <= budget + 15  # summary and MCSE come after the MAR
    assert len(draws) == 2 and all(0 < d < cap for d in draws), draws
    assert f"each chain stops on time or at --draws {cap} draws" in out
    assert "(estimator: rao-blackwell)" in out
    n = sum(draws)
    exact = exact_marginals(read_network(network))
    for got, p in zip(read_mar(target), exact, strict=True):
        assert np.all(np.abs(got - p) <= 5 * np.sqrt(p * (1 - p) / n)), (got, p, n)
    errors = _mcse_file(mcse)
    assert [e.size for e in errors] == [2, 2, 2, 2]
    for e, p in zip(errors, exact, strict=True):
        assert np.all(np.isfinite(e) & (e > 0)) and e[0] == pytest.approx(e[1], rel=1e-5)
        # the diagnostics' draws are at least half of all: their MCSE is at most that of
        # independent indicators of n / 2 draws (with room for ArviZ's ESS estimate)
        assert np.all(e <= 1.5 * np.sqrt(p * (1 - p) / (n / 2))), (e, p, n)


def test_time_limit_without_a_draw_after_tuning_exits_1(uai_dir, tmp_path, monkeypatch):
    """No silent degradation: a budget spent before any post-tuning draw (or before sampling
    starts), where the exact marginals do not fit (--max-table-size 1), is an error, exit code
    1, that says how long the build took and which limit would do; no MAR file is written.
    (Tuning gets at most half of a chain's time: here twice the chain's time, so no draw
    follows it.)"""
    import re

    import pymc_lbp.cli.timed as timed

    monkeypatch.setattr(timed, "TUNING_SHARE", 2.0)
    target = tmp_path / "out.MAR"
    argv = ["mar", str(uai_dir / SMALL), "-o", str(target), "--method", "sample", "--quiet"]
    argv += ["--max-table-size", "1"]
    code, out, err = run(*argv, "--time-limit", "1.5", "--tune", "1000000", "--seed", "1")
    assert code == 1 and not target.exists(), err
    assert "pymc_lbp: error: --time-limit 1.5 s: no chain made a draw after tuning" in err
    assert "no marginals written" in err and err.count("\n") == 1
    assert re.search(r"\(building the model and the sampler took [0-9.]+ s, a draw ", err)
    assert re.search(r"a --time-limit of \d+ s would leave time for 10 draws per chain", err)
    code, out, err = run(*argv, "--time-limit", "0.001", "--seed", "1")
    assert code == 1 and not target.exists(), err
    assert "--time-limit 0.001 s: the time was up before sampling could start" in err
    assert re.search(r"the build alone needs a --time-limit of \d+ s, sampling more$", err)


@pytest.mark.parametrize("value", ["0", "-2", "abc", "nan", "inf", ""])
def test_bad_time_limits_are_usage_errors(uai_dir, tmp_path, value, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["mar", str(uai_dir / SMALL), "-o", str(tmp_path / "o.MAR"), "--time-limit", value])
    assert exc.value.code == 2
    assert "--time-limit: expected a" in capsys.readouterr().err


def test_time_limit_needs_sampling_and_all_parallel_chains_at_once(uai_dir, tmp_path, no_work):
    base = ["mar", str(uai_dir / SMALL), "-o", str(tmp_path / "o.MAR"), "--time-limit", "9"]
    code, out, err = run(*base, "--method", "exact")
    assert code == 2 and "--time-limit budgets sampling: not with --method exact" in err
    code, out, err = run(*base, "--chains", "4", "--cores", "2")
    assert code == 2 and "--cores 2 < --chains 4 would leave chains that never start" in err
    assert not (tmp_path / "o.MAR").exists()


def test_counts_estimator_and_mcse_of_a_fixed_length_run(uai_dir, tmp_path, sample_spy):
    """--estimator counts writes the frequencies; --mcse writes ArviZ's mcse of the per-draw
    values of the estimator used (here the indicators), in the MAR layout."""
    target, mcse = tmp_path / "out.MAR", tmp_path / "out.MCSE"
    argv = ["mar", str(uai_dir / SMALL), "-o", str(target), "--method", "sample", "--quiet"]
    argv += ["--draws", "200", "--tune", "10", "--seed", "2", "--estimator", "counts"]
    code, out, err = run(*argv, "--mcse", str(mcse))
    assert code == 0, err
    assert "(estimator: counts)" in out and f"-> {mcse}" in out
    (model,), (idata,) = sample_spy["models"], sample_spy["idata"]
    for w, f in zip(
        read_mar(target), uai_marginals(idata, model, rao_blackwellize=False), strict=True
    ):
        np.testing.assert_allclose(w, f, atol=1e-9)
    want = uai.uai_marginal_mcse(idata, model, rao_blackwellize=False)
    for got, w in zip(_mcse_file(mcse), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-5)
    assert not np.allclose(
        np.concatenate(want), np.concatenate(uai.uai_marginal_mcse(idata, model))
    )  # the Rao-Blackwellised errors differ


def test_time_limit_stops_parallel_chains_together(uai_dir, tmp_path):
    """--cores 2: the chains run at once in two processes and stop together on time."""
    target = tmp_path / "out.MAR"
    argv = ["mar", str(uai_dir / SMALL), "-o", str(target), "--method", "sample", "--quiet"]
    assert run(*argv, "--draws", "5", "--tune", "0", "--seed", "1")[0] == 0  # compile once
    argv += ["--time-limit", "2.5", "--tune", "10", "--seed", "6", "--cores", "2"]
    code, out, err = run(*argv)
    assert code == 0, err
    written, draws = _budget_report(out, err)
    assert written <= 2.5 and len(draws) == 2 and min(draws) > 0, (written, draws)
    assert f"default {10**6} draws" in out and "(time)" in out
    assert all(np.isclose(m.sum(), 1.0) for m in read_mar(target))


# --------------------------------------------------------------------------- issue #55
TWO = "MARKOV\n2\n2 2\n1\n2 0 1\n4\n1 2 3 4\n"  # two binary variables, one factor
PREVIOUS = "MAR\n1 2 0.5 0.5\n"  # an earlier run's result


@pytest.fixture
def two(tmp_path):
    path = tmp_path / "two.uai"
    path.write_text(TWO)
    return path


def test_an_interrupt_anywhere_exits_130_in_one_line(tmp_path, two, monkeypatch):
    """Issue #55.4: Ctrl-C while the network was read or the sampler compiled was a
    ``KeyboardInterrupt`` traceback."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(uai, "read_network", interrupted)
    target = tmp_path / "o.MAR"
    target.write_text(PREVIOUS)
    code, out, err = run("mar", str(two), "-o", str(target))
    assert (code, err) == (130, "pymc_lbp: error: interrupted\n")
    assert target.read_text() == PREVIOUS and EXIT_CODES[130].startswith("interrupted")


@pytest.mark.parametrize("how", ["sigint", "truncated"])
def test_interrupted_sampling_writes_nothing_and_exits_130(tmp_path, two, monkeypatch, how):
    """Issue #55.4: PyMC ends a chain on Ctrl-C and returns the draws made so far (65 of
    3000): the run exited 0 and wrote their marginals over the MAR file. ``sigint``: Ctrl-C
    reaches this process (PyMC's catch of ``KeyboardInterrupt`` mimicked); ``truncated``: PyMC
    returns fewer draws than asked without it (an interrupt only a chain's process saw)."""
    import signal
    import time

    import pymc as pm

    real_sample = pm.sample

    def sample(*args, draws, **kwargs):
        if how == "sigint":
            try:  # as PyMC's loop over a chain's draws
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            except KeyboardInterrupt:
                pass
        return real_sample(*args, draws=3, **kwargs)

    monkeypatch.setattr(pm, "sample", sample)
    target, mcse = tmp_path / "o.MAR", tmp_path / "o.MCSE"
    for path in (target, mcse):
        path.write_text(PREVIOUS)
    argv = ["mar", str(two), "-o", str(target), "--mcse", str(mcse), "--method", "sample"]
    argv += ["--sampler", "pymc_gibbs", "--draws", "20", "--tune", "0", "--chains", "1"]
    code, out, err = run(*argv, "--quiet")
    assert code == 130 and err.startswith("pymc_lbp: error: interrupted") and err.count("\n") == 1
    if how == "truncated":
        assert "sampling stopped after 3 of 20 draws (1 of 1 chains): no marginals written" in err
    assert target.read_text() == mcse.read_text() == PREVIOUS


@pytest.mark.parametrize("case", ["network", "evidence", "mcse", "a link"])
def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path, two, no_work, case):
    """Issue #55.6: ``mar net.uai -o net.uai`` replaced the network by its MAR file, and
    ``-o X --mcse X`` wrote one over the other."""
    evidence = tmp_path / "two.evid"
    evidence.write_text("1 0 1\n")
    (tmp_path / "link.MAR").symlink_to(two)
    target = str(tmp_path / "o.MAR")
    outputs = {
        "network": ["-o", str(two)],
        "evidence": ["-o", str(evidence)],
        "mcse": ["-o", target, "--mcse", os.path.join(tmp_path, ".", "o.MAR")],
        "a link": ["-o", str(tmp_path / "link.MAR")],
    }[case]
    code, out, err = run("mar", str(two), "--evidence", str(evidence), *outputs)
    assert code == 2 and out == "" and err.count("\n") == 1
    known = {"network": two, "evidence": evidence, "mcse": target, "a link": two}[case]
    assert f"is the same file as {'-o' if case == 'mcse' else 'the'}" in err and str(known) in err
    assert two.read_text() == TWO and evidence.read_text() == "1 0 1\n"


def test_a_negative_seed_is_a_usage_error(tmp_path, two, no_work, capsys):
    """Issue #55.7: ``mar --seed -1`` was numpy's traceback after the work, exit 1."""
    with pytest.raises(SystemExit) as exc:
        main(["mar", str(two), "-o", str(tmp_path / "o.MAR"), "--seed", "-1"])
    assert exc.value.code == 2
    assert "--seed: expected an integer >= 0, got -1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "table", ["0\n", "1\n1 0\n1000000000000\n0.5\n"], ids=["no factor", "a table not listed"]
)
def test_a_network_too_large_for_memory_is_refused_from_its_header(tmp_path, no_sampling, table):
    """Issue #55.12: one variable of 10^8 states passed every check and ran for minutes; one of
    10^12 states needs ~93 TiB. Refused at once, from the header (the table is not even read),
    naming the variable, its states and the memory."""
    from pymc_lbp.cli.mar import BYTES_PER_STATE

    path = tmp_path / "huge.uai"
    path.write_text("MARKOV\n1\n1000000000000\n" + table)
    code, out, err = run("mar", str(path), "-o", str(tmp_path / "o.MAR"))
    assert code == 9 and out == "" and err.count("\n") == 1
    assert err.startswith(
        f"pymc_lbp: error: network too large for this machine: {path}: variable 0 has "
        "1000000000000 states; the marginals of all 1000000000000 states need about "
        f"{10**12 * BYTES_PER_STATE / 2**30:.1f} GiB of memory ({BYTES_PER_STATE} bytes per "
        "state), "
    )
    assert err.endswith(" GiB available\n") and EXIT_CODES[9].startswith("the network needs")


@pytest.mark.parametrize("option", ["network", "-o", "--evidence", "--mcse"])
def test_an_empty_path_is_a_usage_error(tmp_path, two, no_work, capsys, option):
    """Issue #55.13: ``-o ""`` said 'is a directory' (the current one)."""
    argv = ["mar", str(two), "-o", str(tmp_path / "o.MAR")]
    if option == "network":
        argv[1] = ""
    elif option == "-o":
        argv[3] = ""
    else:
        argv += [option, ""]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and ": the path is empty" in capsys.readouterr().err


def test_evidence_that_appears_impossible_says_what_the_user_can_do(tmp_path, two, monkeypatch):
    """Issue #55.13: the advice was the library's 'Pass a feasible start state to proceed.',
    which the command line has no option for."""
    from pymc_lbp.models.uai import ImpossibleEvidenceError

    def no_state(*args, **kwargs):
        raise ImpossibleEvidenceError(
            "two.uai: no state with non-zero probability was found (...). Pass a feasible "
            "start state to proceed.",
            definitive=False,
        )

    monkeypatch.setattr(uai, "random_feasible_states", no_state)
    evidence = tmp_path / "two.evid"
    evidence.write_text("1 1 0\n")
    argv = ["mar", str(two), "--evidence", str(evidence), "-o", str(tmp_path / "o.MAR")]
    code, out, err = run(*argv, "--method", "sample")
    assert code == 5 and err.count("\n") == 1 and "start state" not in err
    assert err.startswith(
        f"pymc_lbp: error: the evidence appears impossible: {evidence}: no state of non-zero "
        "probability agrees with the evidence x1=0 ("
    )
    assert "check the evidence for a value the others rule out" in err
    assert f"write a feasible state of every variable to {two}.MAP (UAI MAP format)" in err


# ------------------------------------------------------------ issue #55 review
def test_block_gibbs_table_budget_fits_the_largest_free_variable():
    from pymc_lbp.cli.samplers import BLOCK_GIBBS_MAX_STATES, block_gibbs_max_states

    assert block_gibbs_max_states([2, 3]) == BLOCK_GIBBS_MAX_STATES
    assert block_gibbs_max_states([]) == BLOCK_GIBBS_MAX_STATES
    assert block_gibbs_max_states([2, 70_000, 3]) == 70_000


@pytest.fixture
def wide_variable(tmp_path):
    """x0 of 70,000 states (more than block_gibbs' 2^16 table entries) and a binary x1."""
    rng = np.random.default_rng(5)
    weights = rng.random(70_000) + 0.05
    path = tmp_path / "wide.uai"
    path.write_text(
        "MARKOV\n2\n70000 2\n2\n1 0\n1 1\n\n70000\n"
        + " ".join(f"{w:.6f}" for w in weights)
        + "\n\n2\n1 3\n"
    )
    return path


@pytest.mark.parametrize("how", ["draws", "time limit"])
def test_the_default_sampler_samples_a_variable_of_more_than_65536_states(
    tmp_path, wide_variable, how
):
    """Issue #55 review: block_gibbs (the default) crashed with a traceback ("max_table_size=
    65536 is below the largest cardinality 70000") on any variable of more than 2^16 states;
    its table budget now fits the variable, which is drawn exactly from its 70,000-entry
    conditional. Each draw's full conditional of x0 is its marginal (x0 and x1 share no factor),
    so the Rao-Blackwellised MAR is exact; --time-limit's counts are whole numbers of draws."""
    target = tmp_path / "o.MAR"
    argv = ["mar", str(wide_variable), "-o", str(target), "--method", "sample", "--quiet"]
    argv += ["--chains", "2", "--tune", "5", "--draws", "30", "--seed", "3"]
    if how == "time limit":
        argv += ["--time-limit", "60", "--estimator", "counts"]
    code, out, err = run(*argv)
    assert code == 0, err
    assert "block_gibbs, steps_per_draw=1," in out
    got = read_mar(target)
    if how == "draws":
        for g, want in zip(got, exact_marginals(read_network(wide_variable)), strict=True):
            np.testing.assert_allclose(g, want, rtol=1e-5)
    else:
        assert "chain 0: 5 tuning + 30 draws (cap), chain 1: 5 tuning + 30 draws (cap)" in out
        for g in got:
            np.testing.assert_allclose(g * 60, np.round(g * 60), atol=1e-4)
            assert np.isclose(g.sum(), 1.0)


def test_writing_the_batch_summary_imports_no_heavy_module(tmp_path):
    """Issue #55 review: mar-batch's parent process imported PyMC (2.6 s) to write the summary
    and the logs, through the atomic writer's home in pymc_lbp.models.uai.tokens; the writer
    is now pymc_lbp.files, which imports only the standard library."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pymc_lbp.cli import batch\n"
        f"out = Path({str(tmp_path)!r})\n"
        "staging = out / 'staging'\n"
        "staging.mkdir()\n"
        "(staging / 'net.MAR').write_text('MAR\\n1 2 0.5 0.5\\n')\n"
        "row = dict.fromkeys(batch.COLUMNS, '') | {'network': 'net', 'exit_code': 0, 'log': 'x'}\n"
        "batch._commit([row], {'net'}, staging, out)\n"
    )
    proc = run_reporting_heavy_modules(code)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stderr, proc.stderr[:400]
    assert (tmp_path / "net.MAR").read_text() == "MAR\n1 2 0.5 0.5\n"
    assert (tmp_path / "net.log").read_text() == "x"
    assert (tmp_path / "summary.csv").read_text().startswith("network,method,")
