"""Ctrl-C (SIGINT) in the command line: it ends the command with one line and
:data:`~pymc_lbp.cli.parser.EXIT_INTERRUPTED`, and no result is written from a run it cut short.

PyMC catches ``KeyboardInterrupt`` in every chain and returns the draws made so far (or raises
``ValueError: Not enough samples to build a trace.`` during tuning), and run one after the other
it goes on with the next chain, so the command's handler raises :class:`Interrupted` instead,
which PyMC lets through. ``--time-limit``'s watchdog interrupts the main thread through the same
handler and needs PyMC's behaviour: it interrupts through :func:`interrupt_main`, and around
that sampling :func:`own_interrupts_end_chains` raises ``KeyboardInterrupt`` for those
interrupts and :class:`Interrupted` for the user's.
:func:`deferred_interrupts` holds an interrupt until the results are all written.

Signal handlers belong to the main thread: elsewhere (a ``mar-batch`` task on a Dask worker
thread) these change nothing.
"""

from __future__ import annotations

import _thread
import collections
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = [
    "Interrupted",
    "deferred_interrupts",
    "ignored_interrupts",
    "interrupt_main",
    "own_interrupts_end_chains",
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


_OWN: collections.deque[None] = collections.deque()
"""The program's own interrupts of the main thread (:func:`interrupt_main`) not yet handled."""


def interrupt_main() -> None:
    """Interrupt the main thread on the program's behalf, as ``--time-limit``'s watchdog does
    (``_thread.interrupt_main``: the SIGINT handler runs in the main thread); within
    :func:`own_interrupts_end_chains` it raises ``KeyboardInterrupt``, a user's ``Interrupted``.
    Safe to call from any thread."""
    _OWN.append(None)
    _thread.interrupt_main()


@contextlib.contextmanager
def own_interrupts_end_chains() -> Iterator[None]:
    """Within the block the program's own interrupts (:func:`interrupt_main`) raise
    ``KeyboardInterrupt``, as Python's own handler does: PyMC ends a chain on it, which
    ``--time-limit``'s watchdog relies on. A user's Ctrl-C raises :class:`Interrupted` at once,
    which PyMC lets through: no further chain starts (run one after the other, PyMC would start
    the next chain after a ``KeyboardInterrupt``), and nothing is written. Should some code
    swallow it all the same, it is raised again when the block ends, in place of whatever the
    block did or raised. A process forked in the block (PyMC's parallel chains) raises
    ``KeyboardInterrupt`` as PyMC expects.

    A user's Ctrl-C that arrives while an interrupt of the program's is pending is one signal
    with it (the operating system merges them) and counts as the program's: that happens only
    once the watchdog interrupts, when the time is up and the run is ending anyway."""
    pid = os.getpid()
    users: list[int] = []
    _OWN.clear()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != pid or _OWN:
            _OWN.clear()
            raise KeyboardInterrupt
        users.append(signum)
        raise Interrupted("no marginals written")

    try:
        with _sigint(handler):
            yield
    finally:
        _OWN.clear()
        if users:
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
