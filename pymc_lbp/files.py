"""Files written whole or not at all: :func:`write_text_atomically`.

The one writer of every result file (the UAI family's ``.MAR``, ``.PR``, ``.MAP``, ``.evid`` and
networks, through :mod:`pymc_lbp.models.uai`; the command line's ``.MCSE``, and ``mar-batch``'s
logs and summary). Imports only the standard library, so that a command that only writes
files (``mar-batch``'s parent process, its summary) does not import PyMC.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

__all__ = ["write_text_atomically"]


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all.

    The text goes to a temporary file in the same directory (its data synced to disk), which
    then replaces ``path`` (``os.replace``): a run killed while writing, or a reader, sees the
    previous file or the new one, never a part; on an error the temporary file is removed and
    ``path`` is left as it was. A symbolic link is written through (its target is replaced);
    an existing file's permissions are kept, a new file gets the usual ones (umask).

    Parameters
    ----------
    path : str or os.PathLike
    text : str
        Written as UTF-8, line ends as they are.
    """
    target = Path(os.path.realpath(path))
    tmp = target.with_name(f".{target.name[:200]}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileNotFoundError):
            shutil.copymode(target, tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename == str(tmp):
            exc.filename = os.fspath(path)  # the file asked for, not the temporary one
        raise
