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
number of the offending field.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from pymc_lbp.models.uai.errors import UAIFormatError
from pymc_lbp.models.uai.network import NETWORK_KINDS, UAINetwork

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

PathLike = str | os.PathLike

#: Largest integer accepted in a count, index or cardinality field: float64 (the token parser)
#: holds every integer up to 2^53 exactly.
_MAX_INT = 2**53


class _Tokens:
    """Whitespace-separated tokens of a text with error positions (line, token number)."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.tokens = text.split()
        self._lines: np.ndarray | None = None  # 1-based line of every token

    def __len__(self) -> int:
        return len(self.tokens)

    def line_of(self, index: int) -> int:
        """1-based line of token ``index`` (the last line when ``index`` is past the end)."""
        if self._lines is None:
            starts = np.array([m.start() for m in re.finditer(r"\S+", self.text)], dtype=np.int64)
            newlines = np.array([m.start() for m in re.finditer("\n", self.text)], dtype=np.int64)
            self._lines = np.searchsorted(newlines, starts) + 1
        if index >= len(self._lines):
            return self.text.count("\n") + (0 if self.text.endswith("\n") else 1)
        return int(self._lines[index])

    def error(self, index: int, message: str) -> UAIFormatError:
        """An error located at token ``index`` (0-based; reported 1-based)."""
        if index >= len(self.tokens):
            where = f"end of file (line {self.line_of(index)}, after token {len(self.tokens)})"
        else:
            where = f"line {self.line_of(index)}, token {index + 1} ({self.tokens[index]!r})"
        return UAIFormatError(f"{self.source}: {where}: {message}")

    def floats(self, start: int = 0) -> np.ndarray:
        """Tokens from ``start`` as float64; non-numeric tokens become NaN."""
        part = self.tokens[start:]
        try:
            return np.array(part, dtype=np.float64)
        except ValueError:
            return np.array([_to_float(tok) for tok in part], dtype=np.float64)

    def is_numeric(self, index: int) -> bool:
        """Whether token ``index`` parses as a number."""
        try:
            float(self.tokens[index])
        except ValueError:
            return False
        return True


def _to_float(token: str) -> float:
    try:
        return float(token)
    except ValueError:
        return float("nan")


class _Cursor:
    """Walks a numeric token array, checking counts, integrality and ranges."""

    def __init__(self, toks: _Tokens, start: int) -> None:
        self.toks = toks
        self.start = start
        self.values = toks.floats(start)
        self.pos = start  # absolute token index

    def _slice(self, count: int, field: str) -> np.ndarray:
        lo = self.pos - self.start
        vals = self.values[lo : lo + count]
        if vals.size < count:
            raise self.toks.error(
                len(self.toks),
                f"file ends inside {field}: expected {count} "
                f"{'number' if count == 1 else 'numbers'}, found {vals.size}",
            )
        bad = np.isnan(vals)
        if bad.any():
            i = self.pos + int(np.argmax(bad))
            what = "NaN" if self.toks.is_numeric(i) else "non-numeric token"
            raise self.toks.error(i, f"{what} in {field}")
        return vals

    def ints(self, count: int, field: str, *, low: int | None = None, high: int | None = None):
        """Take ``count`` integers in ``[low, high)``."""
        vals = self._slice(count, field)
        bad = (vals != np.round(vals)) | ~np.isfinite(vals) | (np.abs(vals) > _MAX_INT)
        if low is not None:
            bad |= vals < low
        if high is not None:
            bad |= vals >= high
        if bad.any():
            i = int(np.argmax(bad))
            v = vals[i]
            if not np.isfinite(v) or v != np.round(v):
                msg = f"{field}: expected an integer"
            elif abs(v) > _MAX_INT:
                msg = f"{field}: {self.toks.tokens[self.pos + i]} is too large (above 2^53)"
            elif high is None:
                msg = f"{field}: expected an integer >= {low}, got {int(v)}"
            else:
                msg = f"{field}: {int(v)} is out of range {low}..{high - 1}"
            raise self.toks.error(self.pos + i, msg)
        self.pos += count
        return vals.astype(np.int64)

    def int(self, field: str, *, low: int | None = None, high: int | None = None) -> int:
        """Take one integer in ``[low, high)``."""
        return int(self.ints(1, field, low=low, high=high)[0])

    def reals(self, count: int, field: str, *, nonnegative: bool = True) -> np.ndarray:
        """Take ``count`` finite (optionally non-negative) reals."""
        vals = self._slice(count, field)
        bad = ~np.isfinite(vals)
        if nonnegative:
            bad |= vals < 0
        if bad.any():
            i = int(np.argmax(bad))
            kind = "a negative entry" if np.isfinite(vals[i]) else "a non-finite entry"
            raise self.toks.error(self.pos + i, f"{field} has {kind} ({float(vals[i])!r})")
        self.pos += count
        return vals.copy()

    def at_end(self, what: str) -> None:
        """Raise unless every token was consumed."""
        if self.pos != len(self.toks):
            raise self.toks.error(
                self.pos,
                f"unexpected extra tokens after {what} ({len(self.toks) - self.pos} left over)",
            )


def _read_text(path: PathLike) -> str:
    with open(path, encoding="latin-1") as fh:
        return fh.read()


# --------------------------------------------------------------------------- networks
def read_network(path: PathLike) -> UAINetwork:
    """Read a ``.uai`` network file (MARKOV or BAYES).

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    UAINetwork

    Raises
    ------
    UAIFormatError
        On any format error, with the file, line and token position in the message.
    """
    path = Path(path)
    return parse_network(_read_text(path), source=str(path), path=path)


def parse_network(text: str, source: str = "<string>", path: PathLike | None = None) -> UAINetwork:
    """Parse the text of a ``.uai`` network; see :func:`read_network`.

    Parameters
    ----------
    text : str
        File contents.
    source : str
        Name used in error messages.
    path : str or os.PathLike, optional
        Stored as ``UAINetwork.path``.
    """
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
        except ValueError as exc:
            raise UAIFormatError(f"{source}: {exc}") from None
    return network


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


def _fmt(x: float, digits: int) -> str:
    return format(float(x), f".{digits}g")


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
    Path(path).write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- evidence
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
        return _check_evidence_mapping(source, network)
    path = Path(source)
    toks = _Tokens(_read_text(path), str(path))
    if len(toks) == 0:
        return {}
    cur = _Cursor(toks, 0)
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


def _check_evidence_mapping(source: Mapping[int, int], network: UAINetwork) -> dict[int, int]:
    evidence = {}
    for v, x in source.items():
        if int(v) != v or not 0 <= int(v) < network.n_vars:
            raise ValueError(
                f"{network.name}: evidence variable {v!r} is not in 0..{network.n_vars - 1}"
            )
        card = int(network.cards[int(v)])
        if int(x) != x or not 0 <= int(x) < card:
            raise ValueError(
                f"{network.name}: evidence value {x!r} of variable {v} is outside 0..{card - 1}"
            )
        evidence[int(v)] = int(x)
    return dict(sorted(evidence.items()))


def write_evidence(path: PathLike, evidence: Mapping[int, int]) -> None:
    """Write evidence as ``N v1 x1 .. vN xN`` (one line)."""
    items = sorted((int(v), int(x)) for v, x in evidence.items())
    Path(path).write_text(" ".join(map(str, [len(items), *(t for p in items for t in p)])) + "\n")


# --------------------------------------------------------------------------- MAR, PR, MAP
def _expect_header(toks: _Tokens, header: str) -> None:
    if len(toks) == 0 or toks.tokens[0].upper() != header:
        raise toks.error(0, f"expected the header {header!r}")


def read_mar(path: PathLike) -> list[np.ndarray]:
    """Read a ``.MAR`` file.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    list of numpy.ndarray
        ``marginals[i]`` is the probability vector of variable ``i``.
    """
    path = Path(path)
    toks = _Tokens(_read_text(path), str(path))
    _expect_header(toks, "MAR")
    cur = _Cursor(toks, 1)
    n = cur.int("number of variables", low=0)
    marginals = []
    for i in range(n):
        card = cur.int(f"cardinality of variable {i}", low=1)
        marginals.append(cur.reals(card, f"marginal of variable {i}"))
    cur.at_end(f"the marginal of variable {n - 1}")
    return marginals


def write_mar(path: PathLike, marginals: Sequence[np.ndarray], *, digits: int = 10) -> None:
    """Write marginals in ``.MAR`` form (``MAR`` then ``N card p .. card p ..``).

    Parameters
    ----------
    path : str or os.PathLike
    marginals : sequence of array_like
        One probability vector per variable.
    digits : int
        Significant digits.
    """
    parts = [str(len(marginals))]
    for p in marginals:
        p = np.asarray(p, dtype=np.float64).ravel()
        if p.size == 0 or np.any(~np.isfinite(p)) or np.any(p < 0):
            raise ValueError("every marginal must be a non-empty vector of finite values >= 0")
        parts.append(str(p.size))
        parts += [_fmt(x, digits) for x in p]
    Path(path).write_text("MAR\n" + " ".join(parts) + "\n")


def read_pr(path: PathLike) -> float:
    """Read a ``.PR`` file: log10 of the partition function (or of P(evidence))."""
    path = Path(path)
    toks = _Tokens(_read_text(path), str(path))
    _expect_header(toks, "PR")
    cur = _Cursor(toks, 1)
    value = float(cur.reals(1, "log10 partition function", nonnegative=False)[0])
    cur.at_end("the value")
    return value


def write_pr(path: PathLike, log10_z: float, *, digits: int = 10) -> None:
    """Write a ``.PR`` file holding ``log10_z``."""
    Path(path).write_text(f"PR\n{_fmt(log10_z, digits)}\n")


def read_map(path: PathLike, network: UAINetwork | None = None) -> np.ndarray:
    """Read a ``.MAP`` file (``MAP`` then ``N x_0 .. x_{N-1}``).

    Parameters
    ----------
    path : str or os.PathLike
    network : UAINetwork, optional
        When given, the number of values and their ranges are checked against it.

    Returns
    -------
    numpy.ndarray of int, shape (N,)
    """
    path = Path(path)
    toks = _Tokens(_read_text(path), str(path))
    _expect_header(toks, "MAP")
    cur = _Cursor(toks, 1)
    n_pos = cur.pos
    n = cur.int("number of variables", low=0)
    if network is not None and n != network.n_vars:
        raise toks.error(n_pos, f"{n} values but the network has {network.n_vars} variables")
    values = cur.ints(n, "assignment", low=0)
    cur.at_end("the assignment")
    if network is not None and np.any(values >= network.cards):
        i = int(np.argmax(values >= network.cards))
        raise toks.error(
            n_pos + 1 + i, f"value of variable {i} is outside 0..{network.cards[i] - 1}"
        )
    return values


def write_map(path: PathLike, state: Sequence[int]) -> None:
    """Write one full assignment as a ``.MAP`` file."""
    state = np.asarray(state, dtype=np.int64).ravel()
    Path(path).write_text("MAP\n" + " ".join(map(str, [state.size, *state.tolist()])) + "\n")
