"""The one registry of the step methods' sampler statistics, and the docstring tables made from it.

Every stat a pymc_lbp step method records has one entry in :data:`STATS`: its dtype, a one-line
meaning and, for a stat that only some steps of a class record, the condition under which they
do. A step class lists its stats in ``stats_dtypes_shapes`` (the names and dtypes PyMC reads, made
from this registry by :func:`dtypes_shapes`) and the ones its instances add or drop at
construction in ``conditional_stats``; its docstring holds
the line :data:`PLACEHOLDER` where :func:`document_stats` puts the table generated from this
registry. A table therefore cannot disagree with the stats (``tests/step_methods/
test_stats_registry.py`` checks every sampler).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

PLACEHOLDER = "{stats_table}"
"""The docstring line replaced by the generated stats table."""


@dataclass(frozen=True)
class Stat:
    """One sampler statistic: its dtype, what it holds and, if not always recorded, when."""

    dtype: type
    meaning: str
    only_when: str | None = None


STATS: dict[str, Stat] = {
    "tune": Stat(
        bool,
        "whether the draw was made while tuning (ArviZ puts tuning draws in the ``warmup_*`` "
        "groups and drops this stat)",
    ),
    "accept": Stat(
        np.float64,
        "mean MH acceptance probability over the draw's steps (1 for exact and Gibbs updates; a "
        "draw without steps, integer sites only: over its jumps)",
    ),
    "n_accepted": Stat(np.int64, "accepted MH steps in the draw"),
    "mh_steps": Stat(np.int64, "MH steps (unit or pair updates) made for the draw"),
    "sites_changed": Stat(
        np.int64,
        "sites (entries of the step's variables) that differ between the previous and the new draw",
    ),
    "model_logp": Stat(
        np.float64,
        "model logp at the new draw, as the step evaluated it (ArviZ: ``lp``)",
        "the step samples every free variable of the model (next to other steps PyMC keeps the "
        "last step's, e.g. NUTS's)",
    ),
    "logp_evals": Stat(
        np.int64,
        "model (or factor-local) logp evaluations made for the draw: one per draw, plus those of "
        "the steps (exact differences: one per neighbour and step; pairwise couplings: none per "
        "step, plus an extraction's when other variables moved; learning particles included)",
    ),
    "grad_evals": Stat(
        np.int64,
        "relaxed-logp gradient evaluations made for the draw (learning included; 0 for the "
        "block samplers)",
    ),
    "exact_differences": Stat(
        bool,
        "exact neighbour differences (False: first-order ones); why: ``step.differences_choice``",
    ),
    "integer_accept": Stat(
        np.float64,
        "mean acceptance of the draw's own moves of its integer sites (or conditionally "
        "independent sites), one per site (informed jumps, "
        ":mod:`pymc_lbp.samplers.integer.reference`; 1 for full-conditional draws)",
        "the block has integer sites, or conditionally independent sites drawn at once",
    ),
    "integer_jump_size": Stat(
        np.float64,
        "mean absolute accepted jump of the draw's moves of its integer (or conditionally "
        "independent) sites",
        "the block has integer sites, or conditionally independent sites drawn at once",
    ),
    "mean_path_length": Stat(
        np.float64,
        "mean number ``R`` of sites a step of the draw proposed to change, single-site steps "
        "included; expectation ``s + (1 - s) U``, ``s`` the ``single_site_share`` and ``U`` the "
        "scale (the option and the stat ``path_scale``)",
    ),
    "path_scale": Stat(
        np.float64,
        "the scale ``U`` after the draw (mean ``R`` of the path steps): moves while tuning, "
        "constant after",
    ),
    "sites_moved_per_step": Stat(
        np.float64,
        "mean number of sites changed per MH step of the draw (``R`` if accepted, else 0): the "
        "per-step jump distance of the optimal-scaling theory",
    ),
    "lsb_loss": Stat(
        np.float64,
        "mean batch estimate of the LSB objective over the draw's learning updates; NaN after "
        "tuning",
    ),
    "learning_steps": Stat(np.int64, "Adam updates of the balancing function made in the draw"),
    **{
        f"lsb_weight_{k}": Stat(
            np.float64,
            f"the current mixture weight of the {k} balancing function",
            'the learned family is "lsb1"',
        )
        for k in ("sqrt", "barker", "min", "max")
    },
    "block": Stat(
        np.int64, "index into ``step.units`` of the unit updated by the draw's last step"
    ),
    "flags_on": Stat(np.int64, "flags equal to 1 after the draw (active components)"),
    "pair_accept": Stat(
        np.float64,
        "mean acceptance probability of the draw's joint flag-value updates "
        "(``pymc_lbp.sample``'s pair updates, :mod:`pymc_lbp.samplers.laplace_pairs`)",
    ),
    "pairs_switched": Stat(np.int64, "flags the draw's joint flag-value updates changed"),
}
"""Every sampler stat of pymc_lbp's step methods, by name."""


def dtypes_shapes(*names: str) -> dict[str, tuple[type, list]]:
    """The ``stats_dtypes_shapes`` entries PyMC reads for the stats ``names``, in their order:
    ``{name: (registered dtype, [])}`` (``[]``: a scalar stat); a ``KeyError`` for a name
    without an entry in :data:`STATS`."""
    return {name: (STATS[name].dtype, []) for name in names}


def stat_names(cls) -> list[str]:
    """The stats a step class may record: its ``stats_dtypes_shapes`` keys, then its
    ``conditional_stats`` (those its instances add at construction)."""
    names = list(cls.stats_dtypes_shapes)
    names += [n for n in getattr(cls, "conditional_stats", ()) if n not in names]
    return names


def stats_table(names: Iterable[str], indent: str = "", width: int = 66) -> str:
    """The reStructuredText table of the stats ``names`` from :data:`STATS` (a ``KeyError`` for
    one without an entry); a stat with a condition gets an "only when ..." in its meaning."""
    names = list(names)
    rows = []
    for name in names:
        stat = STATS[name]
        meaning = stat.meaning
        if stat.only_when:
            meaning += f"; only when {stat.only_when}"
        rows.append((name, np.dtype(stat.dtype).name, meaning))
    w0 = max(len("stat"), *(len(r[0]) for r in rows))
    w1 = max(len("dtype"), *(len(r[1]) for r in rows))
    rule = f"{'=' * w0} {'=' * w1} {'=' * width}"
    lines = [rule, f"{'stat':<{w0}} {'dtype':<{w1}} meaning", rule]
    for name, dtype, meaning in rows:
        wrapped = textwrap.wrap(meaning, width, break_on_hyphens=False) or [""]
        lines.append(f"{name:<{w0}} {dtype:<{w1}} {wrapped[0]}")
        lines += [f"{'':<{w0}} {'':<{w1}} {more}" for more in wrapped[1:]]
    lines.append(rule)
    return textwrap.indent("\n".join(lines), indent)


def fill_placeholder(doc: str, placeholder: str, text: str) -> str | None:
    """``doc`` with its line ``placeholder`` replaced by ``text``, indented as that line was;
    None where ``doc`` has no such line."""
    for line in doc.splitlines():
        if line.strip() == placeholder:
            indent = line[: len(line) - len(line.lstrip())]
            return doc.replace(line, textwrap.indent(text, indent), 1)
    return None


def document_stats(cls):
    """Class decorator: put the table of ``cls``'s stats (:func:`stat_names`) where its
    docstring has the line :data:`PLACEHOLDER`. Returns ``cls``."""
    if not cls.__doc__:  # python -OO strips docstrings
        return cls
    doc = fill_placeholder(cls.__doc__, PLACEHOLDER, stats_table(stat_names(cls)))
    if doc is None:
        raise ValueError(f"{cls.__name__}'s docstring has no {PLACEHOLDER} line")
    cls.__doc__ = doc
    return cls
