"""The progress bar of :func:`pymc_lbp.sample`, fed from inside the compiled scans.

The scans call :meth:`ProgressBar.callback` through ``jax.debug.callback`` every fiftieth of
the run, with the iteration's index only, outside the chains' ``jax.vmap`` (vectorised chains
report once per iteration, not once per chain).
"""

from __future__ import annotations

import numpy as np


class ProgressBar:
    """A rich progress bar over warmup and draws (one line; ``enabled=False``: nothing).

    Parameters
    ----------
    tune, draws, chains : int
    chain_method : str
        ``"sequential"`` runs the scans once per chain, the others once for all.
    enabled : bool
    """

    def __init__(self, tune: int, draws: int, chains: int, chain_method: str, enabled: bool):
        self.enabled = bool(enabled)
        runs = chains if chain_method == "sequential" else 1
        self.total = (tune + draws) * runs
        self.tune, self.draws = tune, draws
        self.label = f"{chains} chain(s), {chain_method}: {tune} warmup + {draws} draws each"
        self._progress = None
        self._task = None
        self._runs = 0
        self._last = 0

    @property
    def callback(self):
        """``(phase, i) -> None`` for the scans (None when disabled: the scans call nothing)."""
        return self._tick if self.enabled else None

    def _tick(self, phase, i) -> None:
        done = int(np.asarray(i)) + 1 + (self.tune if int(np.asarray(phase)) else 0)
        if done <= self._last:  # a sequential run's next chain began
            self._runs += 1
        self._last = done
        if self._progress is not None:
            completed = self._runs * (self.tune + self.draws) + done
            self._progress.update(self._task, completed=completed)

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.label, total=self.total)
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            if exc[0] is None:
                self._progress.update(self._task, completed=self.total)
            self._progress.__exit__(*exc)
            self._progress = None
        return False
