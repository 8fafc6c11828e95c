"""Every benchmark's smoke mode, `python benchmarks/<name>.py --smoke DIR`: the benchmark's own
code path on tiny inputs (the tiny random-init BERT over its profile, a few pairs of each set,
two seeds, one round), in seconds to minutes, every file it writes under DIR and none over the
committed results (benchmarks/results, docs/). tests/test_benchmarks.py runs each one, so that
none rots unseen.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

DATA = {"max_train_examples": 32, "max_val_examples": 32, "max_eval_examples": 60}
# over a benchmark's profile, before the benchmark's own settings (a candidate's, a point's)
SETTINGS = [
    "model.name=tiny-random-bert",
    *(f"data.{key}={value}" for key, value in DATA.items()),
    "train.epochs=1",
    "train.trajectory_examples=30",  # one HANS pair per subcase
    "seeds=[0, 1]",  # a spread to measure
    # the seeds one after another in the launching process: no Ray to start
    f"ray.cpus_per_seed={len(os.sched_getaffinity(0))}",
]


def add_option(parser: argparse.ArgumentParser) -> None:
    """The `--smoke DIR` option (DIR made if missing, its absolute path)."""
    parser.add_argument(
        "--smoke",
        type=_folder,
        metavar="DIR",
        help="a smoke run: tiny inputs, every file written under DIR (benchmarks/smoke.py)",
    )


def _folder(text: str) -> Path:
    path = Path(text).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
