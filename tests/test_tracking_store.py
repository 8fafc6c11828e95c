"""The default tracking store: anchored at the project root (also inside DVC's temporary
workspaces), in write-ahead-log mode, and taking seeds at once beside a reader that holds a
read transaction open (an `mlflow ui`) and a writer that holds the lock for 30 s."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from seedvar.config import load_config
from seedvar.tracking import open_store, tracking_uri
from tests.conftest import STUDY, run_command, seed_name, seed_runs, training_now

LONGER = ["--set", "data.max_train_examples=800", "--set", "train.epochs=2"]


def test_the_default_store_is_at_the_project_root_in_write_ahead_mode(tmp_path, monkeypatch):
    workspace, temporary = tmp_path / "workspace", tmp_path / "dvc-temporary-copy"
    temporary.mkdir()
    monkeypatch.chdir(temporary)  # where `dvc exp run --temp` runs the stage
    monkeypatch.setenv("DVC_ROOT", str(workspace))  # what DVC says the workspace is
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = load_config(None, profile="smoke")
    assert tracking_uri(config.tracking) == f"sqlite:///{workspace}/mlruns/mlflow.db"
    assert not (workspace / "mlruns").exists()  # asking for the URI writes nothing
    open_store(config)
    with sqlite3.connect(workspace / "mlruns" / "mlflow.db") as database:
        assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.slow
def test_seeds_at_once_survive_a_reader_and_a_writer_that_holds_the_lock(study_dir: Path):
    launch = subprocess.Popen(
        [sys.executable, "-m", "seedvar.cli", "launch", "--profile", "smoke", *LONGER],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    database = study_dir / "mlruns" / "mlflow.db"
    deadline = time.monotonic() + STUDY
    while not training_now(study_dir):
        assert launch.poll() is None and time.monotonic() < deadline, launch.stdout.read()
        time.sleep(0.2)
    reader = sqlite3.connect(database, timeout=60)  # an `mlflow ui` in the middle of a read
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM runs").fetchone()
    writer = sqlite3.connect(database, timeout=60, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")  # another writer holds the lock for 30 s
    released = threading.Timer(30, writer.execute, ["COMMIT"])
    released.start()
    try:
        output, _ = launch.communicate(timeout=STUDY)
    finally:
        released.cancel()
        reader.rollback()
    print(output)  # shown with -rP
    assert launch.returncode == 0, output
    finished = [seed_name(run) for run in seed_runs(study_dir) if run.info.status == "FINISHED"]
    assert sorted(finished) == ["seed-0", "seed-1", "seed-2"]  # every seed once, none lost
    assert "RUNNING" not in {run.info.status for run in seed_runs(study_dir)}
    done = run_command(
        [sys.executable, "-m", "seedvar.cli", "launch", "--profile", "smoke", *LONGER],
        timeout=STUDY,
    )
    assert "all 3 seeds are finished" in done.stdout
