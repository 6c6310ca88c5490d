"""Reading and writing UAI evidence (``.evid`` files or ``{variable: value}`` mappings; the
format is in :mod:`pymc_lbp.models.uai.io`)."""

from __future__ import annotations

from collections.abc import Mapping

from pymc_lbp.factor_graph.network import UAINetwork, check_evidence
from pymc_lbp.files import write_text_atomically
from pymc_lbp.models.uai.tokens import PathLike, _Cursor, _Tokens

__all__ = ["read_evidence", "write_evidence"]


def read_evidence(
    source: PathLike | Mapping[int, int] | None, network: UAINetwork
) -> dict[int, int]:
    """Read evidence and check it against a network.

    Parameters
    ----------
    source : path, mapping or None
        An ``.evid`` file (``N v x ..``, or ``1 N v x ..`` with a leading sample count, or the
        single token ``0``; an empty file also means no evidence), a ``{variable: value}``
        mapping, or None (no evidence).
    network : UAINetwork
        Used to check the variable indices and values.

    Returns
    -------
    dict of int to int
        Evidence sorted by variable.

    Raises
    ------
    UAIFormatError
        Malformed file, unknown variable or value outside the variable's range, or a variable
        given twice with different values (file names and positions in the message).
    ValueError
        The same for a mapping.
    """
    if source is None:
        return {}
    if isinstance(source, Mapping):
        return check_evidence(source, network)
    toks = _Tokens.from_file(source)
    if len(toks) == 0:
        return {}
    cur = _Cursor(toks, 0)
    # before the form is guessed from the count of tokens
    toks.check_numbers(cur.values, 0, "the evidence: expected integers")
    if len(toks) % 2 == 0 and cur.values[0] == 1:  # other years: sample count 1, then N v x ..
        cur.pos = 1
    count_pos = cur.pos
    n_ev = cur.int("number of evidence variables", low=0)
    if n_ev > network.n_vars:
        raise toks.error(
            count_pos, f"{n_ev} evidence variables, but the network has {network.n_vars} variables"
        )
    need = 2 * n_ev
    if len(toks) - cur.pos != need:
        raise toks.error(
            count_pos,
            f"{n_ev} evidence variables need {need} numbers after the count, "
            f"found {len(toks) - cur.pos}"
            + (" (a leading evidence-sample count must be 1)" if len(toks) % 2 == 0 else ""),
        )
    evidence: dict[int, int] = {}
    for _ in range(n_ev):
        var_pos = cur.pos
        v = cur.int("evidence variable", low=0, high=network.n_vars)
        x = cur.int(f"value of evidence variable {v}", low=0, high=int(network.cards[v]))
        if evidence.get(v, x) != x:
            raise toks.error(var_pos, f"variable {v} is given twice with different values")
        evidence[v] = x
    return dict(sorted(evidence.items()))


def write_evidence(path: PathLike, evidence: Mapping[int, int]) -> None:
    """Write evidence on one line: ``N``, then each variable and its value."""
    items = sorted((int(v), int(x)) for v, x in evidence.items())
    write_text_atomically(
        path, " ".join(map(str, [len(items), *(t for p in items for t in p)])) + "\n"
    )
