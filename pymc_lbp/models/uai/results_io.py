"""Readers and writers of the UAI result files ``.MAR``, ``.PR`` and ``.MAP`` (the formats are
in :mod:`pymc_lbp.models.uai.io`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pymc_lbp.factor_graph.network import UAINetwork
from pymc_lbp.files import write_text_atomically
from pymc_lbp.models.uai.tokens import PathLike, _Cursor, _fmt, _Tokens

__all__ = ["read_map", "read_mar", "read_pr", "write_map", "write_mar", "write_pr"]


def _open(path: PathLike, header: str) -> tuple[_Tokens, _Cursor]:
    """The file's tokens, checked to start with ``header``, and a cursor after it."""
    toks = _Tokens.from_file(path)
    if len(toks) == 0 or toks.tokens[0].upper() != header:
        raise toks.error(0, f"expected the header {header!r}")
    return toks, _Cursor(toks, 1)


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
    _, cur = _open(path, "MAR")
    n = cur.int("number of variables", low=0)
    marginals = []
    for i in range(n):
        card = cur.int(f"cardinality of variable {i}", low=1)
        marginals.append(cur.reals(card, f"marginal of variable {i}"))
    cur.at_end(f"the marginal of variable {n - 1}")
    return marginals


def write_mar(path: PathLike, marginals: Sequence[np.ndarray], *, digits: int = 10) -> None:
    """Write marginals as a ``.MAR`` file: ``MAR``, ``N``, each cardinality and its probabilities.

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
    write_text_atomically(path, "MAR\n" + " ".join(parts) + "\n")


def read_pr(path: PathLike) -> float:
    """Read a ``.PR`` file: log10 of the partition function (or of P(evidence))."""
    _, cur = _open(path, "PR")
    value = float(cur.reals(1, "log10 partition function", nonnegative=False)[0])
    cur.at_end("the value")
    return value


def write_pr(path: PathLike, log10_z: float, *, digits: int = 10) -> None:
    """Write a ``.PR`` file holding ``log10_z``."""
    write_text_atomically(path, f"PR\n{_fmt(log10_z, digits)}\n")


def read_map(path: PathLike, network: UAINetwork | None = None) -> np.ndarray:
    """Read a ``.MAP`` file: ``MAP``, ``N``, then the N values.

    Parameters
    ----------
    path : str or os.PathLike
    network : UAINetwork, optional
        When given, the number of values and their ranges are checked against it.

    Returns
    -------
    numpy.ndarray of int, shape (N,)
    """
    toks, cur = _open(path, "MAP")
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
    write_text_atomically(path, "MAP\n" + " ".join(map(str, [state.size, *state.tolist()])) + "\n")
