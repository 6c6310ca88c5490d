"""The one stats registry (pymc_lbp.step_methods.stats) and the docstring tables made from it."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_lbp
from pymc_lbp.step_methods.stats import (
    PLACEHOLDER,
    STATS,
    document_stats,
    dtypes_shapes,
    stat_names,
    stats_table,
)

SAMPLERS = {
    "LocallyBalanced": pymc_lbp.LocallyBalanced,
    "GibbsWithGradients": pymc_lbp.GibbsWithGradients,
    "PathAuxiliaryLBP": pymc_lbp.PathAuxiliaryLBP,
    "SelfBalancing": pymc_lbp.SelfBalancing,
    "NeuralBlock": pymc_lbp.NeuralBlock,
    "NeuralMixedBlock": pymc_lbp.NeuralMixedBlock,
    "BlockGibbs": pymc_lbp.BlockGibbs,
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_docstring_table_is_the_stats(name):
    cls = SAMPLERS[name]
    assert PLACEHOLDER not in cls.__doc__
    assert documented_stats(cls.__doc__) == stat_names(cls)
    # the conditional ones are declared as such in the registry, except model_logp's
    # class-level entry (dropped at construction where the step does not sample every variable)
    for stat in getattr(cls, "conditional_stats", ()):
        assert STATS[stat].only_when, stat
        assert f"only when {STATS[stat].only_when.split()[0]}" in " ".join(cls.__doc__.split())


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_every_stat_has_a_registry_entry(name):
    cls = SAMPLERS[name]
    for stat in stat_names(cls):
        assert stat in STATS, f"{name} records {stat!r}, which has no entry in STATS"
    # PyMC reads the registry's dtypes: the class's entries are made from it, not written out
    assert cls.stats_dtypes_shapes == dtypes_shapes(*cls.stats_dtypes_shapes)


def documented_stats(doc: str | None) -> list[str]:
    """The stat names of the first stats table in a docstring, read as a user reads it."""
    raw = (doc or "").splitlines()
    header = next((i for i, line in enumerate(raw) if line.split()[:2] == ["stat", "dtype"]), None)
    if header is None or header < 1:
        return []
    indent = len(raw[header]) - len(raw[header].lstrip())
    rule = raw[header + 1].strip()
    first = len(rule.split()[0])
    names = []
    for line in raw[header + 2 :]:
        if line.strip() == rule:
            break
        name = line[indent : indent + first].strip()
        if name:
            names.append(name)
    return names


def test_every_registry_entry_is_some_samplers_stat():
    """Every entry is a step class's stat or one of pymc_lbp.sample's pair updates'."""
    from pymc_lbp.samplers.laplace_pairs.jax_steps import STAT_NAMES

    used = {s for cls in SAMPLERS.values() for s in stat_names(cls)}
    assert set(STATS) == used | set(STAT_NAMES)


def test_instances_record_only_documented_stats():
    """The stats an instance adds or drops at construction are its class's conditional ones."""
    with pm.Model():
        x = pm.Bernoulli("x", 0.5, shape=3)
        k = pm.Binomial("k", n=4, p=0.3)
        y = pm.Categorical("y", p=[0.2, 0.3, 0.5])
        steps = [
            pymc_lbp.LocallyBalanced([x, k]),  # integer sites, not every variable
            pymc_lbp.PathAuxiliaryLBP([x, k, y]),
            pymc_lbp.SelfBalancing([x, k]),  # LSB1 weights
            pymc_lbp.NeuralBlock([x, y], blocks=None),
        ]
    for step in steps:
        cls = type(step)
        names = set(step.stats_dtypes_shapes)
        assert names <= set(stat_names(cls)), (cls.__name__, names - set(stat_names(cls)))
        assert step.stats_dtypes_shapes == dtypes_shapes(*names), cls.__name__
        extra = names ^ set(cls.stats_dtypes_shapes)
        assert extra <= set(cls.conditional_stats), (cls.__name__, extra)
    assert "model_logp" not in steps[0].stats_dtypes_shapes
    assert {"integer_accept", "integer_jump_size"} <= set(steps[0].stats_dtypes_shapes)
    assert "model_logp" in steps[1].stats_dtypes_shapes
    assert "lsb_weight_sqrt" in steps[2].stats_dtypes_shapes


def test_table_refuses_an_unregistered_stat_and_a_missing_placeholder():
    with pytest.raises(KeyError):
        stats_table(["accept", "no_such_stat"])
    with pytest.raises(KeyError):
        dtypes_shapes("accept", "no_such_stat")

    class NoTable:
        """Nothing here."""

        stats_dtypes_shapes = {"accept": (np.float64, [])}  # noqa: RUF012

    with pytest.raises(ValueError, match="stats_table"):
        document_stats(NoTable)


def test_table_round_trips():
    names = ["tune", "accept", "model_logp", "integer_accept"]
    assert documented_stats("Notes\n-----\n" + stats_table(names, "    ")) == names
