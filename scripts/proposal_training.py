"""What every proposal-training script does after building its proposal: evaluate on held-out
examples, train, evaluate again, record how the file was made, save.

Used by ``train_grid_bn_proposal.py``, ``train_chain_proposal.py`` and
``train_flag_value_proposal.py`` (run from the repository root or anywhere: they put this folder
on ``sys.path``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> str | None:
    """The repository's HEAD commit, or None outside a git checkout."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def train_and_save(
    proposal,
    data,
    args: argparse.Namespace,
    *,
    script: str,
    data_text: str,
    evaluate: Callable,
    out: Path,
    before_key: str = "held_out_before",
    after_key: str = "held_out_after",
) -> Path:
    """Train ``proposal`` on ``data`` with the script's ``args`` (steps, batch size, learning
    rates, seed), print and record ``evaluate(proposal)`` before and after, the arguments, the
    commit, the data and a thinned loss curve in its metadata, and save it to ``out``."""
    before = evaluate(proposal)
    print("before:", before, flush=True)
    start = time.perf_counter()
    report = proposal.fit(
        data,
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        final_learning_rate=args.final_learning_rate,
        seed=args.seed,
        progressbar=True,
    )
    seconds = time.perf_counter() - start
    after = evaluate(proposal)
    print("after:", after, f"({seconds:.0f} s)", flush=True)
    proposal.metadata.update(
        {
            "script": script,
            "arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "git_commit": git_commit(),
            "data": data_text,
            "training_seconds": round(seconds, 1),
            before_key: before,
            after_key: after,
            "loss_curve": [float(x) for x in report.losses[:: max(1, args.steps // 200)]],
        }
    )
    path = proposal.save(out)
    print(json.dumps({"saved": str(path), "bytes": path.stat().st_size}), flush=True)
    return path
