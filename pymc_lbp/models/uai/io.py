"""Readers and writers for the UAI file family.

* ``.uai`` network: ``MARKOV``/``BAYES``, n, n cardinalities, m, m scopes ``k v1 .. vk``, then m
  tables ``K t_1 .. t_K`` (last scope variable fastest). Line breaks are not significant; the
  file is read as one stream of whitespace-separated tokens.
* ``.evid`` evidence: ``N v1 x1 .. vN xN``; or, in other competition years, a leading sample count
  ``1 N v1 x1 ..`` (the two forms differ in the parity of the token count). ``0`` = no evidence.
* ``.MAR`` marginals: ``MAR`` then ``N card_1 p .. card_2 p ..``.
* ``.PR``: ``PR`` then log10 of Z (or of P(evidence)).
* ``.MAP``: ``MAP`` then ``N x_0 .. x_{N-1}``.

Every reader raises :class:`UAIFormatError` naming the file and the line and 1-based token
number of the offending field, and skips a leading UTF-8 byte-order mark; every writer writes
its file whole or not at all (:func:`~pymc_lbp.files.write_text_atomically`).

This module reads and writes networks (evidence in :mod:`~pymc_lbp.models.uai.evidence_io`,
the result files in :mod:`~pymc_lbp.models.uai.results_io`); every reader and writer of the
family is importable from here.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pymc_lbp.factor_graph.network import NETWORK_KINDS, UAINetwork
from pymc_lbp.files import write_text_atomically
from pymc_lbp.models.uai.errors import NetworkTooLargeError, UAIFormatError
from pymc_lbp.models.uai.evidence_io import read_evidence, write_evidence
from pymc_lbp.models.uai.results_io import (
    read_map,
    read_mar,
    read_pr,
    write_map,
    write_mar,
    write_pr,
)
from pymc_lbp.models.uai.tokens import (
    _MAX_INT,
    PathLike,
    _Cursor,
    _fmt,
    _read_text,
    _Tokens,
)

__all__ = [
    "parse_network",
    "read_evidence",
    "read_map",
    "read_mar",
    "read_network",
    "read_pr",
    "write_evidence",
    "write_map",
    "write_mar",
    "write_network",
    "write_pr",
]


# --------------------------------------------------------------------------- networks
def read_network(path: PathLike, *, max_states: int | None = None) -> UAINetwork:
    """Read a ``.uai`` network file (MARKOV or BAYES; a leading UTF-8 byte-order mark is
    skipped).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    max_states : int, optional
        Refuse a network whose cardinalities sum to more (:class:`NetworkTooLargeError`),
        judged from the header before the factor tables are read. Default: no limit.

    Returns
    -------
    UAINetwork

    Raises
    ------
    UAIFormatError
        On any format error, with the file, line and token position in the message.
    NetworkTooLargeError
        More than ``max_states`` states.
    """
    path = Path(path)
    return parse_network(_read_text(path), source=str(path), path=path, max_states=max_states)


def parse_network(
    text: str,
    source: str = "<string>",
    path: PathLike | None = None,
    *,
    max_states: int | None = None,
) -> UAINetwork:
    """Parse the text of a ``.uai`` network; see :func:`read_network`.

    Parameters
    ----------
    text : str
        File contents.
    source : str
        Name used in error messages.
    path : str or os.PathLike, optional
        Stored as ``UAINetwork.path``.
    max_states : int, optional
        As for :func:`read_network`.
    """
    if max_states is not None:
        _check_states(text, source, max_states)
    toks = _Tokens(text, source)
    if len(toks) == 0:
        raise toks.error(0, "empty file: expected MARKOV or BAYES")
    kind = toks.tokens[0].upper()
    if kind not in NETWORK_KINDS:
        raise toks.error(0, "unknown network type: expected MARKOV or BAYES")
    try:
        cards, scopes, tables = _parse_body(toks)
    except UAIFormatError as exc:
        better = _diagnose_counts(toks)
        if better is None:
            raise
        raise better from exc
    network = UAINetwork(kind, cards, scopes, tables, path=Path(path) if path else None)
    if kind == "BAYES":
        try:
            network.cpt_children()
        except ValueError as exc:  # its message names the network: the file, once
            reason = str(exc).removeprefix(f"{network.name}: ")
            raise UAIFormatError(f"{source}: {reason}") from None
    return network


def _check_states(text: str, source: str, max_states: int) -> None:
    """Raise :class:`NetworkTooLargeError` when the header declares more than ``max_states``
    states (the sum of the cardinalities), read from its first tokens alone (the rest of the
    text is not split); a malformed header is left to the full parse to report."""
    head = text.split(None, 2)
    try:
        n = float(head[1])
    except (IndexError, ValueError):
        return
    if not (1 <= n <= _MAX_INT and n == int(n)):
        return
    try:
        cards = np.array(text.split(None, int(n) + 2)[2 : int(n) + 2], dtype=np.float64)
    except ValueError:
        return
    if cards.size != n or not np.all(
        (cards >= 1) & (cards <= _MAX_INT) & (cards == np.round(cards))
    ):
        return
    cards = cards.astype(np.int64)
    states = int(cards.sum(dtype=object))
    if states <= max_states:
        return
    v = int(np.argmax(cards))
    raise NetworkTooLargeError(
        f"{source}: variable {v} has {cards[v]} states ({states} states in all variables, more "
        f"than {max_states})",
        variable=v,
        cardinality=int(cards[v]),
        states=states,
    )


def _parse_body(
    toks: _Tokens, *, n_vars: int | None = None, n_factors: int | None = None
) -> tuple[np.ndarray, list[tuple[int, ...]], list[np.ndarray]]:
    """Cardinalities, scopes and tables after the network type.

    ``n_vars`` / ``n_factors`` override the counts written in the header (used to test whether a
    file is consistent with another count; see :func:`_diagnose_counts`).
    """
    cur = _Cursor(toks, 1)
    n = cur.int("number of variables", low=1)
    n = n if n_vars is None else n_vars
    cards = cur.ints(n, "variable cardinalities", low=1)
    m = cur.int("number of factors", low=0)
    m = m if n_factors is None else n_factors
    parsed = _factors_fast(cur, m, cards.tolist())
    if parsed is None:  # something is wrong: the careful walk finds and reports it
        parsed = _factors_checked(cur, m, cards)
    return cards, *parsed


def _line_starts(toks: _Tokens, index: int) -> bool:
    """Whether token ``index`` is the first token of its line."""
    return index == 0 or toks.line_of(index - 1) != toks.line_of(index)


def _tokens_on_line(toks: _Tokens, index: int) -> list[int]:
    """Indices of the tokens on the line of token ``index``, from ``index`` on."""
    line = toks.line_of(index)
    out = []
    while index < len(toks) and toks.line_of(index) == line:
        out.append(index)
        index += 1
    return out


def _parses(toks: _Tokens, **counts: int) -> bool:
    try:
        _parse_body(toks, **counts)
    except UAIFormatError:
        return False
    return True


def _diagnose_counts(toks: _Tokens) -> UAIFormatError | None:
    """Find a header count that disagrees with the file's layout, once parsing has failed.

    Line breaks carry no meaning in the format, so a header that declares 5 variables but lists
    4 cardinalities makes the stream parser fail somewhere later, with a misleading message.
    When the cardinalities (or the scopes, one per line) are laid out one line as usual, this
    counts them; if the whole file parses with the counted number, the header count is the
    error and is reported at its own position with both numbers. Returns None otherwise.
    """
    values = toks.floats(0)

    def count_at(i: int) -> int | None:
        if i >= len(toks) or not np.isfinite(values[i]) or values[i] != int(values[i]):
            return None
        return int(values[i])

    n = count_at(1)
    if n is None or n < 1 or len(toks) < 3 or not _line_starts(toks, 2):
        return None
    listed = len(_tokens_on_line(toks, 2))
    if listed != n:
        if _parses(toks, n_vars=listed):
            return toks.error(
                1,
                f"the header declares {n} variables, but line {toks.line_of(2)} lists {listed} "
                f"cardinalities (the rest of the file fits {listed} variables)",
            )
        return None
    m_pos = 2 + n
    m = count_at(m_pos)
    if m is None or m_pos + 1 >= len(toks) or not _line_starts(toks, m_pos + 1):
        return None
    scopes, i = 0, m_pos + 1  # count the lines that look like a scope: "k v1 .. vk"
    while i < len(toks):
        line = _tokens_on_line(toks, i)
        k = count_at(i)
        if k is None or len(line) != k + 1 or any(count_at(j) is None for j in line):
            break
        scopes += 1
        i = line[-1] + 1
    if scopes != m and _parses(toks, n_factors=scopes):
        first = toks.line_of(m_pos + 1)
        return toks.error(
            m_pos,
            f"the header declares {m} factors, but lines {first}..{first + scopes - 1} list "
            f"{scopes} scopes (the rest of the file fits {scopes} factors)",
        )
    return None


def _factors_fast(
    cur: _Cursor, m: int, cards: list[int]
) -> tuple[list[tuple[int, ...]], list[np.ndarray]] | None:
    """Scopes and tables with bulk checks; None if any check fails (no error message)."""
    values = cur.values
    vl = values.tolist()
    size = len(vl)
    n = len(cards)
    p = cur.pos - cur.start
    first = p
    raw_scopes = []
    for _ in range(m):
        k = vl[p] if p < size else -1.0
        if not (k >= 0 and k == int(k)):
            return None
        k = int(k)
        raw_scopes.append(vl[p + 1 : p + 1 + k])
        p += 1 + k
    if p > size:
        return None
    region = values[first:p]
    if not (np.all(region >= 0) and np.all(region == np.floor(region))):
        return None
    scopes = []
    for sc in raw_scopes:
        scope = tuple(int(v) for v in sc)
        if scope and (max(scope) >= n or len(set(scope)) != len(scope)):
            return None
        scopes.append(scope)
    first = p
    spans = []
    for scope in scopes:
        shape = tuple(cards[v] for v in scope)
        count = math.prod(shape)
        if p >= size or vl[p] != count:
            return None
        spans.append((p + 1, shape, count))
        p += 1 + count
    if p != size:
        return None
    region = values[first:p]
    if not (np.all(region >= 0) and np.all(np.isfinite(region))):
        return None
    tables = [values[a : a + count].reshape(shape) for a, shape, count in spans]
    cur.pos = cur.start + p
    return scopes, tables


def _factors_checked(
    cur: _Cursor, m: int, cards: np.ndarray
) -> tuple[list[tuple[int, ...]], list[np.ndarray]]:
    """Scopes and tables, one field at a time, raising a positioned error at the first fault."""
    toks = cur.toks
    n = cards.size
    scopes: list[tuple[int, ...]] = []
    for f in range(m):
        scope_pos = cur.pos
        k = cur.int(f"scope size of factor {f}", low=0, high=n + 1)
        scope = cur.ints(k, f"scope of factor {f}", low=0, high=n)
        if np.unique(scope).size != k:
            raise toks.error(scope_pos, f"scope of factor {f} repeats a variable: {scope}")
        scopes.append(tuple(int(v) for v in scope))
    tables: list[np.ndarray] = []
    for f, scope in enumerate(scopes):
        shape = tuple(int(c) for c in cards[list(scope)])
        expected = math.prod(shape)
        size_pos = cur.pos
        size = cur.int(f"table size of factor {f}", low=0)
        if size != expected:
            raise toks.error(
                size_pos,
                f"table size of factor {f} is {size}, but its scope {scope} with cardinalities "
                f"{shape} needs {expected} entries",
            )
        tables.append(cur.reals(size, f"table of factor {f}").reshape(shape))
    cur.at_end(f"the last table (factor {m - 1})" if m else "the scopes")
    return scopes, tables


def write_network(path: PathLike, network: UAINetwork, *, digits: int = 17) -> None:
    """Write a network in UAI format (one scope per line, one table per line).

    Parameters
    ----------
    path : str or os.PathLike
    network : UAINetwork
    digits : int
        Significant digits of the table entries (17 round-trips float64 exactly).
    """
    lines = [network.kind, str(network.n_vars), " ".join(map(str, network.cards))]
    lines.append(str(network.n_factors))
    lines += [" ".join(map(str, (len(s), *s))) for s in network.scopes]
    lines.append("")
    for table in network.tables:
        lines.append(str(table.size))
        lines.append(" ".join(_fmt(x, digits) for x in table.ravel()))
    write_text_atomically(path, "\n".join(lines) + "\n")
