"""Never lose or corrupt work: resume inside a seed, one process per seed, bad input first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from seedvar.config import load_config
from seedvar.project import keep_of
from seedvar.scale.launch import lease
from tests.helpers import QUICK, STUDY, run_command, seed_runs

SETTINGS = [
    "data.max_train_examples=800",
    "train.epochs=2",
    "data.max_eval_examples=300",
    "train.checkpoint_every_n_steps=3",
]
SMOKE = ["--profile", "smoke", *[arg for item in SETTINGS for arg in ("--set", item)]]


def train(*args: str) -> list[str]:
    return [sys.executable, "-m", "seedvar.cli", "train", *SMOKE, *args]


def _step(checkpoint: Path) -> int:
    """The optimizer step a resumable checkpoint was saved at."""
    return torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"]


def wait_for(condition, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, "the run ended before the test could interrupt it"
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.slow
def test_a_killed_seed_resumes_and_equals_an_uninterrupted_run(study_dir: Path, spawn):
    whole = run_command(train("--seed", "4", "--set", "output_dir=whole"), timeout=STUDY)
    assert whole.returncode == 0, whole.stderr
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    cut = spawn(train("--seed", "4", "--set", "output_dir=cut"), **quiet)

    def checkpoint() -> Path:
        return next(
            Path(".seedvar/cut").glob("seed-4.partial*/checkpoints/resume.ckpt"), Path("none")
        )

    wait_for(lambda: checkpoint().is_file() and _step(checkpoint()) >= 9, cut)
    os.killpg(cut.pid, signal.SIGKILL)
    cut.wait(timeout=QUICK)
    assert 9 <= _step(checkpoint()) < 100 and not Path("cut/seed-4").exists()

    resumed = run_command(train("--seed", "4", "--set", "output_dir=cut"), timeout=STUDY)
    assert resumed.returncode == 0, resumed.stderr
    for name in ("mnli_matched", "mnli_mismatched", "hans"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(f"whole/seed-4/predictions/{name}.parquet"),
            pd.read_parquet(f"cut/seed-4/predictions/{name}.parquet"),
        )
    assert not Path("cut/seed-4/checkpoints").exists()  # optimizer state is not kept
    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    runs = seed_runs(Path.cwd(), 4)
    assert sorted(run.info.status for run in runs) == ["FINISHED", "FINISHED"]
    assert sum(run.data.tags.get("seedvar.resumed") == "true" for run in runs) == 1
    loss = client.get_metric_history(
        next(r for r in runs if r.data.tags.get("seedvar.resumed")).info.run_id, "train/loss"
    )
    assert len({point.step for point in loss}) == len(loss)  # one curve, no repeated steps


@pytest.mark.slow
def test_a_second_driver_of_the_study_stops_at_once_naming_the_first(study_dir: Path):
    config = load_config(None, [*SETTINGS, "train.seed=6"], profile="smoke")
    with lease(keep_of(Path("runs")), config.study_hash(), "dvc repro"):  # a driver ...
        second = run_command(train("--seed", "6"), timeout=QUICK)
        launch = run_command([sys.executable, "-m", "seedvar.cli", "launch", *SMOKE], timeout=QUICK)
    for stopped in (second, launch):  # ... so another one stops at once, in one line
        assert stopped.returncode == 2, stopped.stderr
        (line,) = [line for line in stopped.stderr.splitlines() if line.strip()]
        assert f"being trained by `dvc repro` (pid {os.getpid()} on " in line, line
    assert not list(Path(".seedvar/runs").glob("seed-6.partial*"))
    first = run_command(train("--seed", "6"), timeout=STUDY)
    assert first.returncode == 0 and Path("runs/seed-6/metrics.json").is_file()
    again = run_command(train("--seed", "6"), timeout=QUICK)
    assert again.returncode == 2 and "already finished" in again.stderr  # never retrained


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "tracking.uri=http://127.0.0.1:9"], "cannot reach the MLflow tracking server"),
        (["--set", "model.name=/no/such/model"], "cannot load model '/no/such/model'"),
        (["--set", "seeds=[]"], "the seed list is empty"),
        (["--set", "seeds=[1, 2, 2]"], "seed(s) [2] appear more than once"),
        (["--set", "train.batch_size=0"], "train.batch_size: Input should be greater than 0"),
        (["--set", "diagnostics.hans.source=data/offline/README.md"], "unknown format '.md'"),
    ],
)
def test_bad_input_stops_before_any_work_with_one_line(study_dir: Path, args, message):
    done = run_command(train("--seed", "1", *args), timeout=QUICK)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert not Path("runs").exists() and not Path("mlruns").exists()  # no seed, no run begun


def test_unreachable_study_database_stops_before_any_trial(study_dir: Path):
    sweep = [sys.executable, "-m", "seedvar.cli", "sweep", "--profile", "smoke"]
    storage = ["--set", "sweep.storage=postgresql://postgres@127.0.0.1:9/nothing"]
    done = run_command([*sweep, *storage], timeout=QUICK)
    assert done.returncode == 2 and "cannot open the study storage" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not Path("sweeps").exists() and not Path("mlruns").exists()  # no trial begun
