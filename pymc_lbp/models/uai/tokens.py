"""Token streams of the UAI file family, with positioned errors, for its readers and writers.

:class:`_Tokens` locates any token (line, 1-based token number) for a
:class:`~pymc_lbp.models.uai.errors.UAIFormatError`; :class:`_Cursor` walks them as numbers,
checking counts, integrality and ranges.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from pymc_lbp.models.uai.errors import UAIFormatError

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

    @classmethod
    def from_file(cls, path: PathLike) -> _Tokens:
        return cls(_read_text(path), str(Path(path)))

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

    def check_numbers(self, values: np.ndarray, start: int, field: str) -> None:
        """Raise at the first NaN of ``values`` (the tokens from ``start`` as :meth:`floats`
        gives them): a NaN token or a non-numeric one."""
        bad = np.isnan(values)
        if bad.any():
            i = start + int(np.argmax(bad))
            try:
                float(self.tokens[i])
                what = "NaN"
            except ValueError:
                what = "non-numeric token"
            raise self.error(i, f"{what} in {field}")


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
        self.toks.check_numbers(vals, self.pos, field)
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


_UTF8_BOM = "\xef\xbb\xbf"
"""A UTF-8 byte-order mark as the latin-1 reading of a file gives it (an editor's, not data)."""


def _read_text(path: PathLike) -> str:
    """The file's text (latin-1: every byte is a character), without a leading UTF-8 BOM."""
    with open(path, encoding="latin-1") as fh:
        return fh.read().removeprefix(_UTF8_BOM)


def _fmt(x: float, digits: int) -> str:
    return format(float(x), f".{digits}g")
