"""Ctrl-C (SIGINT) in the command line: it ends the command with one line and
:data:`~pymc_lbp.cli.parser.EXIT_INTERRUPTED`, and no result is written from a run it cut short.

PyMC catches ``KeyboardInterrupt`` in every chain and returns the draws made so far (or raises
``ValueError: Not enough samples to build a trace.`` during tuning), so the command's handler
raises :class:`Interrupted` instead, which PyMC lets through. ``--time-limit``'s watchdog
interrupts the main thread through the same handler and needs PyMC's behaviour: around that
sampling :func:`interrupts_before` raises ``KeyboardInterrupt`` and tells the user's interrupts
(before the watchdog's time) from the watchdog's.
:func:`deferred_interrupts` holds an interrupt until the results are all written.

Signal handlers belong to the main thread: elsewhere (a ``mar-batch`` task on a Dask worker
thread) these change nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = [
    "Interrupted",
    "deferred_interrupts",
    "ignored_interrupts",
    "interrupts_before",
    "raising_interrupts",
]

Handler = Callable[[int, FrameType | None], None] | int


class Interrupted(BaseException):
    """The command was interrupted: Ctrl-C, or a sampling run that stopped short.

    A ``BaseException`` that is not a ``KeyboardInterrupt``: PyMC, which swallows those per
    chain, lets it through. Its message, if any, says what was (not) written.
    """


@contextlib.contextmanager
def _sigint(handler: Handler) -> Iterator[None]:
    """``handler`` for SIGINT within the block, in the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


def raising_interrupts() -> contextlib.AbstractContextManager[None]:
    """SIGINT raises :class:`Interrupted` within the block (a process forked from this one,
    e.g. a chain of PyMC's parallel sampling, raises ``KeyboardInterrupt`` as PyMC expects)."""
    pid = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != pid:
            raise KeyboardInterrupt
        raise Interrupted

    return _sigint(handler)


@contextlib.contextmanager
def interrupts_before(deadline: float) -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` within the block, as Python's own handler does: PyMC
    ends a chain on it, and ``--time-limit``'s watchdog, which interrupts the main thread
    through this handler from ``deadline`` (``time.perf_counter()`` seconds) on, relies on that.
    When the block ends, an interrupt that came before ``deadline`` (the user's) raises
    :class:`Interrupted` in place of whatever the block did or raised."""
    times: list[float] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        times.append(time.perf_counter())
        raise KeyboardInterrupt

    try:
        with _sigint(handler):
            yield
    finally:
        if any(t < deadline for t in times):
            raise Interrupted("no marginals written")


def ignored_interrupts() -> contextlib.AbstractContextManager[None]:
    """SIGINT is ignored within the block, by this process and by the processes it starts
    there, for good (an ignored signal stays ignored through ``exec``): ``mar-batch``'s Dask
    workers, which Ctrl-C reaches with the command, print no traceback of their own and are
    stopped when the command closes the cluster. A Ctrl-C while the block runs is lost."""
    return _sigint(signal.SIG_IGN)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """SIGINT is held within the block and raised (:class:`Interrupted`) when it ends, so that
    the files it writes are all written."""
    held: list[int] = []
    with _sigint(lambda signum, frame: held.append(signum)):
        yield
    if held:
        raise Interrupted("the results were written before the interrupt took effect")
