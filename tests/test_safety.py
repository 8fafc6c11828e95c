"""Never publish a wrong seed, never waste a finished one: divergence, kills after training,
odd inputs and disk errors, through real processes and real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.helpers import OFFLINE, QUICK, STUDY, one_line_error, run_command, seed_runs

SMOKE = ["--profile", "smoke"]


def train(*args: str) -> list[str]:
    return [sys.executable, "-m", "seedvar.cli", "train", *SMOKE, *args]


@pytest.mark.slow
def test_a_diverged_seed_fails_and_is_not_published(study_dir: Path):
    done = run_command(train("--seed", "0", "--set", "train.learning_rate=1e4"), timeout=STUDY)
    one_line_error(done, "training diverged: the loss became non-finite at step")
    assert not Path("runs/seed-0").exists()
    (run,) = seed_runs(study_dir, 0)
    assert run.info.status == "FAILED"


@pytest.mark.slow
def test_a_seed_killed_while_evaluating_resumes_at_evaluation_in_the_same_run(
    study_dir: Path, spawn
):
    args = ("--seed", "3", "--set", "data.max_eval_examples=3000")
    cut = spawn(train(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not (
        first_sets := list(
            Path(".seedvar/runs").glob("seed-3.partial*/predictions/mnli_m*.parquet")
        )
    ):
        assert cut.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    (first_set,) = first_sets
    os.killpg(cut.pid, signal.SIGKILL)
    cut.wait(timeout=QUICK)
    assert not Path("runs/seed-3/metrics.json").exists()
    (killed,) = seed_runs(study_dir, 3)
    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    curve = client.get_metric_history(killed.info.run_id, "train/loss")
    written = first_set.stat().st_mtime_ns

    rerun = run_command(train(*args), timeout=STUDY)
    assert rerun.returncode == 0, rerun.stderr
    assert "Epoch 0" not in rerun.stderr  # no training: the saved weights are the checkpoint
    (run,) = seed_runs(study_dir, 3)  # the same MLflow run, now finished
    assert run.info.run_id == killed.info.run_id and run.info.status == "FINISHED"
    assert len(client.get_metric_history(run.info.run_id, "train/loss")) == len(curve)
    finished = Path("runs/seed-3/predictions/mnli_matched.parquet")
    assert finished.stat().st_mtime_ns == written  # a finished set is not predicted again
    assert len(pd.read_parquet("runs/seed-3/predictions/hans.parquet")) == 3000


def _broken_copy(name: str, change) -> str:  # noqa: ANN001 (a frame -> frame function)
    frame = change(pd.read_parquet(OFFLINE / "hans" / "validation.parquet"))
    path = Path(name)
    frame.to_parquet(path)
    return str(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.assign(premise=[None, *f["premise"][1:]]), "have no premise text (id 0)"),
        (lambda f: f.assign(subcase=["ln_bogus", *f["subcase"][1:]]), "unknown subcase value"),
        (lambda f: f.assign(idx=[1, *f["idx"][1:]]), "repeated example id(s) (1)"),
    ],
)
def test_odd_data_stops_before_training_with_one_line(study_dir: Path, change, message):
    hans = _broken_copy("hans.parquet", change)
    done = run_command(
        train("--seed", "1", "--set", f"diagnostics.hans.source={hans}"), timeout=QUICK
    )
    one_line_error(done, message)
    assert not list(Path(".seedvar/runs").glob("seed-1.partial*"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs: room for a seed's small files, not for its checkpoint."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], timeout=QUICK
    )
    if done.returncode != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True, timeout=QUICK)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_seed_resumes(study_dir: Path, small_disk: Path):
    args = ("--seed", "2", "--set", f"output_dir={small_disk}/runs")
    done = run_command(train(*args, "--set", "train.checkpoint_every_n_steps=2"), timeout=STUDY)
    one_line_error(done, f"the disk of {small_disk}/runs has no space left")
    assert "run the same command again" in done.stderr
    assert not (small_disk / "runs" / "seed-2").exists()
    subprocess.run(["mount", "-o", "remount,size=400m", str(small_disk)], check=True, timeout=QUICK)
    again = run_command(train(*args, "--set", "train.checkpoint_every_n_steps=2"), timeout=STUDY)
    assert again.returncode == 0, again.stderr  # room again: the same command finishes it
    assert (small_disk / "runs" / "seed-2" / "metrics.json").is_file()
    statuses = [run.info.status for run in seed_runs(Path.cwd(), 2)]
    assert statuses.count("FINISHED") == 1 and "RUNNING" not in statuses


def test_a_read_only_output_dir_is_refused_before_any_work(study_dir: Path, small_disk: Path):
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True, timeout=QUICK)
    done = run_command(
        train("--seed", "2", "--set", f"output_dir={small_disk}/runs"), timeout=QUICK
    )
    one_line_error(done, f"cannot write to output_dir {small_disk}/runs")
