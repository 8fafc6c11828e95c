"""Exactly-once without locks: an attempt frozen mid-training is taken over by a new attempt;
when it wakes, it stops without touching the seed's folder or its MLflow run. Real processes,
real files, no lock (as Ray tasks run them: `run_seed(..., job=...)`), and a real MLflow
tracking server, as a cluster has: with the SQLite store written directly, an attempt frozen
inside a write would hold the database's write lock and fail every other writer (README)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from tests.helpers import QUICK, seed_runs

pytestmark = pytest.mark.slow
RECIPE = [
    "data.max_train_examples=200",
    "data.max_eval_examples=300",
    "train.epochs=2",
    "train.checkpoint_every_n_steps=3",
    "train.seed=4",
]
ATTEMPT = f"""
import json, sys
from seedvar.config import load_config
from seedvar.errors import Superseded
from seedvar.seeds.job import SeedJob
from seedvar.seeds.seed import run_seed

config = load_config(None, {RECIPE!r}, profile="smoke")
try:
    result = run_seed(config, "reuse", job=SeedJob.of(config))
    print("RESULT", json.dumps({{"status": "reused" if result.reused else "finished"}}))
except Superseded as error:
    print("RESULT", json.dumps({{"status": "superseded", "error": str(error)}}))
"""


@pytest.fixture
def tracking_server(study_dir: Path, monkeypatch: pytest.MonkeyPatch, spawn) -> Iterator[str]:
    """`mlflow server` on the study's SQLite store (mlruns/mlflow.db, which the test reads), as
    MLFLOW_TRACKING_URI of the attempts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (study_dir / "mlruns").mkdir()
    mlflow = Path(sys.executable).with_name("mlflow")
    server = spawn(
        [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        + ["--backend-store-uri", f"sqlite:///{study_dir}/mlruns/mlflow.db"]
        + ["--artifacts-destination", str(study_dir / "mlartifacts")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answers(f"{url}/health"), timeout=120)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    yield url
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=QUICK)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def attempt(spawn, name: str) -> subprocess.Popen:  # noqa: ANN001 (the `spawn` fixture)
    """An attempt at seed 4; its stderr goes to `<name>.err`, which `errors` reads."""
    command = [sys.executable, "-c", ATTEMPT]
    with open(f"{name}.err", "w") as stderr:
        return spawn(command, stdout=subprocess.PIPE, stderr=stderr, text=True)


def errors(name: str) -> str:
    """The end of what attempt `name` wrote to stderr (for a failing assertion's message)."""
    return Path(f"{name}.err").read_text()[-3000:]


def result(output: str) -> dict:
    """What an attempt printed at its end."""
    (found,) = re.findall(r"RESULT (\{.*\})", output)  # progress bars share its line
    return json.loads(found)


def wait_for(condition, timeout: float = 240) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def owner(folder: Path) -> str | None:
    try:
        return json.loads((folder / "attempt.json").read_text())["attempt"]
    except (OSError, ValueError):
        return None


def checkpoint_step(pattern: str) -> int:
    found = list(Path(".seedvar/runs").glob(pattern))
    try:
        return torch.load(found[0], map_location="cpu", weights_only=False)["global_step"]
    except (IndexError, OSError, RuntimeError, EOFError):
        return -1


@pytest.mark.parametrize("wakes", ["while its successor trains", "after the seed is published"])
def test_a_frozen_attempt_that_wakes_stops_without_touching_the_seed(
    study_dir: Path, tracking_server: str, wakes: str, spawn
):
    late = attempt(spawn, "late")
    wait_for(lambda: checkpoint_step("seed-4.partial.*/checkpoints/resume.ckpt") >= 3)
    os.kill(late.pid, signal.SIGSTOP)  # frozen mid-training: no lock, no heartbeat, no exit
    (late_folder,) = Path(".seedvar/runs").glob("seed-4.partial.*")
    late_id = owner(late_folder)

    successor = attempt(spawn, "successor")

    def taken() -> list[Path]:
        return [f for f in Path(".seedvar/runs").glob("seed-4.partial.*") if owner(f) != late_id]

    if wakes == "while its successor trains":
        wait_for(lambda: bool(taken()) and not late_folder.exists())
    else:
        wait_for(lambda: successor.poll() is not None)
        published = {p: p.stat().st_mtime_ns for p in Path("runs/seed-4").rglob("*")}
    os.kill(late.pid, signal.SIGCONT)

    late_out, _ = late.communicate(timeout=120)
    assert late.returncode == 0, errors("late")
    assert result(late_out)["status"] == "superseded"
    out, _ = successor.communicate(timeout=240)
    assert successor.returncode == 0, errors("successor")
    assert result(out)["status"] == "finished"

    assert Path("runs/seed-4/metrics.json").is_file()
    assert not list(
        Path(".seedvar/runs").glob("seed-4.partial*")
    )  # nothing half-written left behind
    if wakes == "after the seed is published":  # the late attempt touched nothing
        assert {p: p.stat().st_mtime_ns for p in Path("runs/seed-4").rglob("*")} == published
    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    (run,) = seed_runs(Path.cwd(), 4)
    assert run.info.status == "FINISHED"  # one run, resumed by the successor, ended once
    assert json.loads(Path("runs/seed-4/run.json").read_text())["run_id"] == run.info.run_id
    assert run.data.tags["seedvar.attempt"] != late_id
    loss = client.get_metric_history(run.info.run_id, "train/loss")
    # The late attempt checks before each write, so after waking it writes nothing new; a
    # write already under way when it froze may land: at most one step twice (README).
    assert len(loss) - len({point.step for point in loss}) <= 1
