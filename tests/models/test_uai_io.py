"""Reading and writing UAI network, evidence, MAR, PR and MAP files."""

from __future__ import annotations

import contextlib
import resource
import signal
import time

import numpy as np
import pytest

from pymc_lbp.cli.mar import _write_mcse
from pymc_lbp.models.uai import (
    UAIFormatError,
    UAINetwork,
    parse_network,
    read_evidence,
    read_map,
    read_mar,
    read_network,
    read_pr,
    write_evidence,
    write_map,
    write_mar,
    write_network,
    write_pr,
)

SHIPPED = [
    "uai2014_mar/DBN_11.small.uai",
    "uai2014_mar/Grids_12.uai",
    "uai2014_mar/CSP_12.uai",
    "uai2014_mar/Pedigree_11.uai",
    "uai2014_mar/Promedus_11.uai",
    "uai2014_mar/Alchemy_11.uai",
    "uai2006_bn/BN_0.uai",
    "uai2006_bn/BN_1.uai",
    "uai2008_grid_bn/50-12-5.uai",
    "uai2008_grid_bn/75-16-5.uai",
]


def test_tiny_markov_tables_follow_file_order(tmp_path, tiny_markov):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    assert net.kind == "MARKOV"
    assert net.cards.tolist() == tiny_markov.cards
    assert net.scopes == tiny_markov.scopes
    for f, table in enumerate(net.tables):
        assert table.shape == tuple(tiny_markov.cards[v] for v in tiny_markov.scopes[f])
    # every entry agrees with the explicit row-major lookup (last scope variable fastest)
    for state in tiny_markov.states():
        for f, scope in enumerate(net.scopes):
            assert net.tables[f][tuple(state[v] for v in scope)] == tiny_markov.entry(f, state)
    assert net.path.name == "tiny.uai"


def test_tiny_bayes_structure(tmp_path, tiny_bayes):
    net = read_network(tiny_bayes.write(tmp_path, "tiny_bn.uai"))
    assert net.kind == "BAYES"
    assert net.cpt_children().tolist() == [4, 2, 0, 1, 3]
    assert net.parents()[4] == (3, 1)
    assert net.topological_layers().tolist() == [0, 1, 2, 0, 2]


def test_log_factor_product_matches_brute_force(tmp_path, tiny_markov):
    net = read_network(tiny_markov.write(tmp_path, "tiny.uai"))
    states = np.array(list(tiny_markov.states()))
    with np.errstate(divide="ignore"):
        expected = np.log([tiny_markov.weight(tuple(s)) for s in states])
    np.testing.assert_allclose(net.log_factor_product(states), expected, rtol=1e-12, atol=1e-12)


def test_write_network_round_trips(tmp_path, tiny_bayes):
    net = read_network(tiny_bayes.write(tmp_path, "a.uai"))
    write_network(tmp_path / "b.uai", net)
    again = read_network(tmp_path / "b.uai")
    assert again.kind == net.kind and again.scopes == net.scopes
    for a, b in zip(net.tables, again.tables, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", SHIPPED)
def test_reads_every_shipped_network(uai_dir, name):
    path = uai_dir / name
    net = read_network(path)
    assert net.n_vars == net.cards.size and net.n_factors == len(net.tables)
    for scope, table in zip(net.scopes, net.tables, strict=True):
        assert table.shape == tuple(net.cards[list(scope)])
    evid = path.with_name(path.name + ".evid")
    if evid.exists():
        read_evidence(evid, net)
    mar = read_mar(path.with_name(path.name + ".MAR"))
    assert [m.size for m in mar] == net.cards.tolist()
    map_path = path.with_name(path.name + ".MAP")
    if map_path.exists():
        state = read_map(map_path, net)
        assert np.isfinite(net.log_factor_product(state))


def test_grid_bn_is_child_last(uai_dir):
    """In BAYES files each run of card(child) numbers is a distribution (rows sum to 1)."""
    net = read_network(uai_dir / "uai2008_grid_bn" / "50-12-5.uai")
    for table in net.tables:
        np.testing.assert_allclose(table.sum(axis=-1), 1.0, atol=1e-5)


def test_parse_is_fast_for_thousands_of_variables():
    n = 5000
    rng = np.random.default_rng(0)
    edges = [(i, i + 1) for i in range(n - 1)]
    parts = ["MARKOV", str(n), " ".join(["2"] * n), str(n + len(edges))]
    parts += [f"1 {i}" for i in range(n)] + [f"2 {a} {b}" for a, b in edges]
    for _ in range(n):
        parts.append("2 " + " ".join(f"{x:.6g}" for x in rng.random(2)))
    for _ in edges:
        parts.append("4 " + " ".join(f"{x:.6e}" for x in rng.random(4)))
    text = "\n".join(parts)
    t0 = time.perf_counter()
    net = parse_network(text)
    elapsed = time.perf_counter() - t0
    assert net.n_vars == n and net.n_factors == 2 * n - 1
    assert elapsed < 5.0  # generous: shared CI machines; typically ~0.2 s


# --------------------------------------------------------------------------- malformed input
GOOD = "MARKOV\n3\n2 2 3\n2\n2 0 1\n1 2\n\n4\n1 2 3 4\n3\n0.5 0.5 1e-3\n"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("", "empty file"),
        ("MARKOVV\n1\n2\n0\n", r"line 1, token 1 \('MARKOVV'\): unknown network type"),
        (GOOD.replace("0.5 0.5 1e-3", "0.5 0.5"), "file ends inside table of factor 1"),
        (
            GOOD.replace("\n4\n1 2 3 4", "\n5\n1 2 3 4"),
            r"line 8, token 12.*table size of factor 0 is 5",
        ),
        (GOOD.replace("2 2 3", "2 3 3"), r"needs 6 entries"),
        (GOOD.replace("2 2 3", "2 0 3"), r"line 3, token 4.*cardinalities.*>= 1, got 0"),
        (
            GOOD.replace("1 2\n", "1 7\n"),
            r"line 6, token 11.*scope of factor 1: 7 is out of range 0\.\.2",
        ),
        (GOOD.replace("0.5 0.5", "0.5 -0.5"), r"line 11, token 19.*negative entry"),
        (
            GOOD.replace("1 2 3 4", "1 2 x3 4"),
            r"line 9, token 15 \('x3'\): non-numeric token in table of factor 0",
        ),
        (GOOD.replace("\n2\n2 0 1", "\n2.5\n2 0 1"), r"number of factors: expected an integer"),
        (GOOD + "7\n", r"line 12, token 21.*extra tokens after the last table"),
        (GOOD.replace("2 0 1", "2 1 1"), "repeats a variable"),
        (GOOD.replace("1e-3", "nan"), "NaN in table of factor 1"),
        (GOOD.replace("1e-3", "inf"), r"line 11, token 20 \('inf'\).*non-finite entry \(inf\)"),
        (GOOD.replace("2 2 3", "2 -2 3"), r"line 3, token 4.*cardinalities.*>= 1, got -2"),
        (
            GOOD.replace("2 2 3", "2 100000000000000000000 3"),
            r"line 3, token 4 .*cardinalities: 100000000000000000000 is too large",
        ),
        (GOOD.replace("MARKOV\n3", "MARKOV\nthree"), r"line 2, token 2.*non-numeric.*variables"),
        # truncated at every level of the header and the scopes
        ("MARKOV\n", r"end of file.*inside number of variables: expected 1 number, found 0"),
        ("MARKOV\n3\n2 2", r"end of file.*inside variable cardinalities: expected 3 numbers"),
        ("MARKOV\n3\n2 2 3\n", r"end of file.*inside number of factors"),
        ("MARKOV\n3\n2 2 3\n2\n2 0 1\n1", r"end of file.*inside scope of factor 1"),
        (GOOD.split("\n\n")[0], r"end of file.*inside table size of factor 0"),
        # a scope longer than the network (it cannot list distinct variables)
        (GOOD.replace("2 0 1", "99 0 1"), r"line 5, token 7.*scope size of factor 0: 99 is out"),
        (GOOD.replace("2 0 1", "2 0 -1"), r"line 5, token 9.*scope of factor 0: -1 is out of"),
    ],
)
def test_malformed_network(tmp_path, text, pattern):
    path = tmp_path / "bad.uai"
    path.write_text(text)
    with pytest.raises(UAIFormatError, match=pattern) as err:
        read_network(path)
    assert "bad.uai" in str(err.value)


@pytest.mark.parametrize(
    ("header", "pattern"),
    [
        # issue #14.6: 5 variables declared, 4 cardinalities listed (was "extra tokens after
        # the last table" or a table size complaint far from the cause)
        (
            "MARKOV\n4\n2 2 3\n",
            r"line 2, token 2 \('4'\): the header declares 4 variables, "
            r"but line 3 lists 3 cardinalities",
        ),
        (
            "MARKOV\n2\n2 2 3\n",
            r"line 2, token 2 \('2'\): the header declares 2 variables, "
            r"but line 3 lists 3 cardinalities",
        ),
    ],
)
def test_header_variable_count_mismatch(tmp_path, header, pattern):
    path = tmp_path / "bad.uai"
    path.write_text(GOOD.replace("MARKOV\n3\n2 2 3\n", header))
    with pytest.raises(UAIFormatError, match=pattern) as err:
        read_network(path)
    assert "bad.uai" in str(err.value)


def test_header_five_variables_four_cardinalities(tmp_path):
    """The case of issue #14.6 as reported: the rest of the file is a valid 4-variable net."""
    path = tmp_path / "five.uai"
    path.write_text("MARKOV\n5\n2 2 2 2\n2\n1 0\n2 1 2\n\n2\n0.5 0.5\n4\n1 1 1 1\n")
    with pytest.raises(UAIFormatError) as err:
        read_network(path)
    assert str(err.value) == (
        f"{path}: line 2, token 2 ('5'): the header declares 5 variables, but line 3 lists 4 "
        "cardinalities (the rest of the file fits 4 variables)"
    )


@pytest.mark.parametrize(("declared", "listed"), [(3, 2), (1, 2)])
def test_header_factor_count_mismatch(tmp_path, declared, listed):
    path = tmp_path / "bad.uai"
    path.write_text(GOOD.replace("\n2\n2 0 1", f"\n{declared}\n2 0 1"))
    with pytest.raises(UAIFormatError) as err:
        read_network(path)
    assert str(err.value) == (
        f"{path}: line 4, token 6 ('{declared}'): the header declares {declared} factors, but "
        f"lines 5..6 list {listed} scopes (the rest of the file fits {listed} factors)"
    )


def test_count_diagnosis_keeps_the_first_error_when_no_count_fits(tmp_path):
    """A wrong count AND another fault: the positioned error of the stream parse stands."""
    path = tmp_path / "bad.uai"
    path.write_text(GOOD.replace("MARKOV\n3\n2 2 3", "MARKOV\n4\n2 2 3").replace("1e-3", "x"))
    with pytest.raises(UAIFormatError, match=r"bad.uai: line \d+, token \d+") as err:
        read_network(path)
    assert "header declares" not in str(err.value)


def test_cardinalities_over_several_lines_are_fine(tmp_path):
    """Line breaks are not significant: wrapped cardinality lists still parse."""
    path = tmp_path / "wrapped.uai"
    path.write_text(GOOD.replace("2 2 3", "2 2\n3"))
    assert read_network(path).cards.tolist() == [2, 2, 3]


def test_bayes_with_two_cpts_for_one_child(tmp_path):
    path = tmp_path / "bad_bn.uai"
    path.write_text("BAYES\n2\n2 2\n2\n1 0\n1 0\n2\n0.5 0.5\n2\n0.1 0.9\n")
    with pytest.raises(UAIFormatError, match=r"bad_bn.uai.*variable 0 is the last .* of 2"):
        read_network(path)


def test_bayes_with_cycle(tmp_path):
    path = tmp_path / "cyc.uai"
    path.write_text("BAYES\n2\n2 2\n2\n2 1 0\n2 0 1\n4\n.5 .5 .5 .5\n4\n.5 .5 .5 .5\n")
    with pytest.raises(UAIFormatError, match="cycle"):
        read_network(path)


def test_network_constructor_validates():
    with pytest.raises(ValueError, match="table shape"):
        UAINetwork("MARKOV", [2, 2], [(0, 1)], [np.ones(3)])
    with pytest.raises(ValueError, match="unknown network kind"):
        UAINetwork("FOO", [2], [], [])


# --------------------------------------------------------------------------- evidence
@pytest.fixture
def net3(tmp_path):
    path = tmp_path / "net3.uai"
    path.write_text(GOOD)
    return read_network(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", {}),  # single byte, no newline (UAI 2014 files)
        ("", {}),
        ("1\n2\t1\n", {2: 1}),  # UAI 2008 grid form with tabs
        ("2 2 2 0 1", {0: 1, 2: 2}),
        ("1 2 2 2 0 1", {0: 1, 2: 2}),  # leading sample count
        ("1 0", {}),
    ],
)
def test_evidence_forms(tmp_path, net3, text, expected):
    path = tmp_path / "e.evid"
    path.write_text(text)
    assert read_evidence(path, net3) == expected


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("1 3 0", r"line 1, token 2.*evidence variable: 3 is out of range 0\.\.2"),
        ("1 1 2", r"token 3.*value of evidence variable 1: 2 is out of range 0\.\.1"),
        ("2 0 1", r"2 evidence variables need 4 numbers after the count, found 2"),
        ("2 0 1 1 1 1", r"leading evidence-sample count must be 1"),
        ("2 0 1 0 0", "variable 0 is given twice"),
        ("1 a 1", "non-numeric token"),
        ("1 -1 0", r"line 1, token 2.*evidence variable: -1 is out of range 0\.\.2"),
        ("1 2 1.5", r"token 3.*value of evidence variable 2: expected an integer"),
        ("3 0 1 1 0", r"3 evidence variables need 6 numbers after the count, found 4"),
        ("4 0 1 1 0 2 0 0 1", r"token 1.*4 evidence variables, but the network has 3"),
    ],
)
def test_malformed_evidence(tmp_path, net3, text, pattern):
    path = tmp_path / "bad.evid"
    path.write_text(text)
    with pytest.raises(UAIFormatError, match=pattern) as err:
        read_evidence(path, net3)
    assert "bad.evid" in str(err.value)


def test_evidence_mapping(net3):
    assert read_evidence({2: 2, 0: 1}, net3) == {0: 1, 2: 2}
    assert read_evidence(None, net3) == {}
    with pytest.raises(ValueError, match="evidence variable 5"):
        read_evidence({5: 0}, net3)
    with pytest.raises(ValueError, match="value 2 of variable 0"):
        read_evidence({0: 2}, net3)


def test_write_evidence_round_trips(tmp_path, net3):
    write_evidence(tmp_path / "e.evid", {2: 1, 0: 0})
    assert read_evidence(tmp_path / "e.evid", net3) == {0: 0, 2: 1}


# --------------------------------------------------------------------------- MAR, PR, MAP
def test_mar_round_trip(tmp_path):
    marginals = [np.array([0.25, 0.75]), np.array([1 / 3, 1 / 6, 0.5]), np.array([1.0])]
    write_mar(tmp_path / "x.MAR", marginals)
    text = (tmp_path / "x.MAR").read_text()
    assert text.startswith("MAR\n3 2 0.25 0.75 3 ")
    back = read_mar(tmp_path / "x.MAR")
    for a, b in zip(marginals, back, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9)


def test_mar_errors(tmp_path):
    path = tmp_path / "bad.MAR"
    path.write_text("MAR\n2 2 0.5 0.5 3 0.2 0.8\n")
    with pytest.raises(UAIFormatError, match=r"bad.MAR.*marginal of variable 1"):
        read_mar(path)
    path.write_text("PR\n1.0\n")
    with pytest.raises(UAIFormatError, match="expected the header 'MAR'"):
        read_mar(path)


def test_pr_and_map(tmp_path, net3):
    write_pr(tmp_path / "x.PR", -17.2155)
    assert read_pr(tmp_path / "x.PR") == pytest.approx(-17.2155)
    write_map(tmp_path / "x.MAP", [1, 0, 2])
    assert read_map(tmp_path / "x.MAP", net3).tolist() == [1, 0, 2]
    (tmp_path / "y.MAP").write_text("MAP\n3 1 0 3\n")
    with pytest.raises(UAIFormatError, match=r"token 5.*variable 2 is outside 0\.\.2"):
        read_map(tmp_path / "y.MAP", net3)
    (tmp_path / "z.MAP").write_text("MAP\n2 1 0\n")
    with pytest.raises(UAIFormatError, match="2 values but the network has 3"):
        read_map(tmp_path / "z.MAP", net3)


def test_shipped_pr_is_log10(uai_dir):
    assert read_pr(uai_dir / "uai2014_mar" / "Grids_12.uai.PR") == pytest.approx(303.086)


# --------------------------------------------------------------------------- issue #55
@contextlib.contextmanager
def file_size_limit(n: int):
    """Within the block a write past ``n`` bytes fails (``EFBIG``), as a full disk or a run
    killed while writing would stop it halfway."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def _summary(path):
    from pymc_lbp.cli.batch import COLUMNS, write_summary

    write_summary([dict.fromkeys(COLUMNS, "a cell")] * 50, path.parent)


BIG = UAINetwork("MARKOV", [3] * 200, [(v,) for v in range(200)], [np.ones(3)] * 200)
WRITERS = {  # every file is longer than 1000 bytes
    "net.uai": lambda path: write_network(path, BIG),
    "net.evid": lambda path: write_evidence(path, {v: 1 for v in range(1000)}),
    "net.MAR": lambda path: write_mar(path, [np.full(3, 1 / 3)] * 200),
    "net.MAP": lambda path: write_map(path, [1] * 1000),
    "net.MCSE": lambda path: _write_mcse(path, [[0.01] * 3] * 200),  # mar --mcse
    "summary.csv": _summary,  # mar-batch (then summary.md)
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_writers_replace_a_file_whole_or_not_at_all(tmp_path, name):
    """Issue #55.5: a writer stopped halfway (SIGTERM, a full disk) left a part of the new
    file, the previous one gone. Now the previous file stays, and no temporary file."""
    path = tmp_path / name
    path.write_text("the previous result\n")
    path.chmod(0o640)
    with file_size_limit(1000), pytest.raises(OSError, match="too large"):
        WRITERS[name](path)
    assert path.read_text() == "the previous result\n"
    assert [p.name for p in tmp_path.iterdir()] == [name]
    WRITERS[name](path)
    assert path.read_text() != "the previous result\n"
    assert path.stat().st_mode & 0o777 == 0o640  # its permissions kept


def test_max_states_refuses_a_network_from_its_header(tmp_path):
    """Issue #55.12: the states are judged from the header, before the factor tables are read
    (this file's table, 10^12 entries, is not even there)."""
    from pymc_lbp.models.uai import NetworkTooLargeError

    path = tmp_path / "huge.uai"
    path.write_text("MARKOV\n3\n2 1000000000000 5\n1\n1 1\n1000000000000\n0.5\n")
    with pytest.raises(NetworkTooLargeError) as err:
        read_network(path, max_states=10**9)
    assert (err.value.variable, err.value.cardinality) == (1, 10**12)
    assert err.value.states == 10**12 + 7
    assert str(err.value).startswith(f"{path}: variable 1 has 1000000000000 states")
    (tmp_path / "ok.uai").write_text(GOOD)
    assert read_network(tmp_path / "ok.uai", max_states=7).n_vars == 3  # 2 + 2 + 3 states
    with pytest.raises(NetworkTooLargeError):
        read_network(tmp_path / "ok.uai", max_states=6)


def test_evidence_with_a_non_numeric_token_names_it(tmp_path, net3):
    """Issue #55.13: '1 0 1 extra' was read as the other form (an even count of tokens) and
    reported without the bad token."""
    path = tmp_path / "bad.evid"
    path.write_text("1 0 1 extra")
    with pytest.raises(UAIFormatError, match=r"token 4 \('extra'\): non-numeric token"):
        read_evidence(path, net3)


def test_utf8_byte_order_mark_is_skipped(tmp_path, net3):
    """Issue #55.13: a BOM showed as 'ï»¿MARKOV', an unknown network type."""
    bom = b"\xef\xbb\xbf"
    (tmp_path / "bom.uai").write_bytes(bom + GOOD.encode())
    assert read_network(tmp_path / "bom.uai").cards.tolist() == [2, 2, 3]
    (tmp_path / "bom.evid").write_bytes(bom + b"1 2 1\n")
    assert read_evidence(tmp_path / "bom.evid", net3) == {2: 1}


def test_not_a_bayesian_network_names_the_file_once(tmp_path):
    """Issue #55.13: 'dir/bad_bn.uai: bad_bn.uai: not a Bayesian network: ...'."""
    path = tmp_path / "bad_bn.uai"
    path.write_text("BAYES\n2\n2 2\n2\n1 0\n1 0\n2\n0.5 0.5\n2\n0.1 0.9\n")
    with pytest.raises(UAIFormatError) as err:
        read_network(path)
    assert str(err.value).startswith(f"{path}: not a Bayesian network: variable 0 is ")
