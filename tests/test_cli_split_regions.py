"""Issue #55.3: a ``--sampler`` whose moves cannot cross the walls of zero factors is refused.

A factor ``x0 != x1`` splits the states into {x0=0, x1=1} and {x0=1, x1=0}; a single-site
sampler keeps every chain in the region it starts in. With regions of mass 0.936 and 0.064,
``--sampler locally_balanced --chains 4 --strict`` started every chain in the large one and
wrote P(x0 = 0) = 1 with exit code 0 and no warning. Now :func:`check_sampler` refuses such a
sampler before any work (exit code 2, the variables named, ``--sampler block_gibbs`` advised).
"""

from __future__ import annotations

import io
import itertools
from collections import deque

import numpy as np
import pytest

import pymc_lbp.models.uai as uai
from pymc_lbp.cli import SAMPLERS, main
from pymc_lbp.cli.samplers import SamplerNotApplicableError, check_sampler, split_regions
from pymc_lbp.models.uai import (
    UAINetwork,
    exact_marginals,
    grid_bn,
    read_evidence,
    read_mar,
    read_network,
    write_network,
)


def _forbidden(*args, **kwargs):
    raise AssertionError("the model was built although the sampler does not apply")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _split_network() -> UAINetwork:
    """The issue's network: x0 != x1 with P(x0 = 0) = 0.936, x2 coupled to x1 (no zero)."""
    return UAINetwork(
        "MARKOV",
        [2, 2, 2],
        [(0, 1), (0,), (1, 2)],
        [np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([0.936, 0.064]), np.array([[1, 2], [3, 1]])],
    )


@pytest.fixture
def split_uai(tmp_path):
    path = tmp_path / "split.uai"
    write_network(path, _split_network())
    return path


SPLIT_ARGS = ("--method", "sample", "--chains", "4", "--strict", "--quiet")
SINGLE_SITE = sorted(set(SAMPLERS) - {"block_gibbs", "neural_block"})


@pytest.mark.parametrize("sampler", SINGLE_SITE)
def test_single_site_samplers_are_refused_where_zero_factors_split_the_states(
    tmp_path, split_uai, monkeypatch, sampler
):
    """Regression: exit 0 and P(x0 = 0) = 1 (every chain in the large region), now exit 2
    before the model is built, naming the variables and the sampler that crosses the wall."""
    monkeypatch.setattr(uai, "read_uai", _forbidden)
    target = tmp_path / "out.MAR"
    code, out, err = run(
        "mar", str(split_uai), "-o", str(target), "--sampler", sampler, *SPLIT_ARGS
    )
    assert code == 2 and not target.exists(), err
    assert err.startswith(
        f"pymc_lbp: error: --sampler {sampler}: zero factors split the states of x0, x1 into 2 "
        "regions that its moves (one site at a time) cannot cross"
    )
    assert err.endswith("--sampler block_gibbs (the default) draws such variables together\n")
    assert err.count("\n") == 1


def test_the_default_sampler_writes_the_right_marginals_there(tmp_path, split_uai):
    """block_gibbs draws {x0, x1, x2} as one block: independent exact draws."""
    target = tmp_path / "out.MAR"
    code, _, err = run("mar", str(split_uai), "-o", str(target), *SPLIT_ARGS, "--seed", "3")
    assert code == 0 and err == "", err
    n = 4 * 1000
    for got, want in zip(read_mar(target), exact_marginals(_split_network()), strict=True):
        assert np.all(np.abs(got - want) <= 5 * np.sqrt(want * (1 - want) / n)), (got, want)
    assert read_mar(target)[0][0] == pytest.approx(0.936, abs=0.02)


def _components(network: UAINetwork, units: list[list[int]]) -> int:
    """Connected components of the positive states of ``network`` (no evidence) under moves that
    change one site or the sites of one unit: breadth-first search over every joint state."""
    cards = network.cards.tolist()
    states = list(itertools.product(*map(range, cards)))
    positive = {s for s in states if network.log_factor_product(np.array([s]))[0] > -np.inf}
    moves = [[v] for v in range(len(cards))] + units
    seen: set[tuple[int, ...]] = set()
    count = 0
    for start in positive - seen:
        if start in seen:
            continue
        count += 1
        seen.add(start)
        queue = deque([start])
        while queue:
            s = queue.popleft()
            for sites in moves:
                for values in itertools.product(*(range(cards[v]) for v in sites)):
                    t = list(s)
                    for v, x in zip(sites, values, strict=True):
                        t[v] = x
                    t = tuple(t)
                    if t in positive and t not in seen:
                        seen.add(t)
                        queue.append(t)
    return count


def _random_network(rng: np.random.Generator) -> UAINetwork:
    """Up to 6 variables of 2 or 3 values, pairwise and triple factors with ~30 % zeros."""
    n = int(rng.integers(3, 7))
    cards = rng.integers(2, 4, size=n).tolist()
    scopes, tables = [], []
    for _ in range(int(rng.integers(2, 6))):
        scope = tuple(rng.choice(n, size=int(rng.integers(1, 4)), replace=False).tolist())
        table = rng.random([cards[v] for v in scope]) + 0.1
        table[rng.random(table.shape) < 0.3] = 0.0
        scopes.append(scope)
        tables.append(table)
    return UAINetwork("MARKOV", cards, scopes, tables)


@pytest.mark.parametrize("with_units", [False, True])
def test_split_regions_agrees_with_a_search_of_the_whole_state_space(with_units):
    """The regions are the product of the groups' regions: their product is the number of
    components a breadth-first search finds among all positive states."""
    rng = np.random.default_rng(55)
    checked = split = 0
    for _ in range(150):
        network = _random_network(rng)
        n = network.n_vars
        units = [sorted(rng.choice(n, size=2, replace=False).tolist())] if with_units else []
        want = _components(network, units)
        if want == 0:  # no state of positive probability
            continue
        found = split_regions(network, units=units)
        assert all(r.regions is not None and r.regions > 1 for r in found)
        assert int(np.prod([r.regions for r in found])) == want, (network, units, found)
        checked, split = checked + 1, split + (want > 1)
    assert checked > 100 and 10 < split < checked  # both outcomes are exercised


def test_walls_that_the_moves_cross_or_the_evidence_removes_are_accepted():
    # a zero that walls nothing in: not (x0 = 1 and x1 = 1); single-site moves go around it
    around = UAINetwork("MARKOV", [2, 2], [(0, 1)], [np.array([[1.0, 1.0], [1.0, 0.0]])])
    assert split_regions(around) == []
    check_sampler("locally_balanced", around)
    # the wall x0 != x1 with x1 observed: x0 is fixed by it, nothing left to cross
    network = _split_network()
    assert split_regions(network, {1: 0}) == []
    check_sampler("pymc_gibbs", network, {1: 0})
    with pytest.raises(SamplerNotApplicableError, match="x0, x1 into 2 regions"):
        check_sampler("pymc_gibbs", network, {2: 0})
    check_sampler("block_gibbs", network)  # draws the variables of every zero factor together


def test_neural_block_is_checked_with_its_blocks():
    """A 4 x 4 grid BN with 25 % deterministic nodes: single-site moves are walled in, the
    3 x 3 blocks of neural_block cross every wall (it matches the exact marginals there,
    tests/test_cli.py)."""
    network, evidence = grid_bn(4, 0.25, seed=1)
    check_sampler("neural_block", network, evidence)
    with pytest.raises(SamplerNotApplicableError, match="into 4 regions that its moves"):
        check_sampler("locally_balanced", network, evidence)


@pytest.mark.parametrize("sampler", ["gibbs_with_gradients", "neural_block"])
def test_groups_too_large_to_check_are_refused(uai_dir, sampler):
    """50-12-5: zero factors couple 47 of its variables (2**47 joint states); a single-site
    sampler's chains stay where they start there (error 0.296 after 60 s, docs/uai.md) and
    the 3 x 3 blocks' too (0.185). The default sampler is not checked."""
    path = uai_dir / "uai2008_grid_bn" / "50-12-5.uai"
    network = read_network(path)
    evidence = read_evidence(f"{path}.evid", network)
    with pytest.raises(SamplerNotApplicableError) as exc:
        check_sampler(sampler, network, evidence)
    assert "(47 variables): 1.41e+14 joint states, too many (> 65536) to check" in str(exc.value)
    # of the 7 smaller groups, 3 are split for single sites but crossed by the 3 x 3 blocks
    more = 4 if sampler == "neural_block" else 7
    assert f"and {more} more such group(s)" in str(exc.value)
    check_sampler("block_gibbs", network, evidence)
