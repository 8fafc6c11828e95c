"""The study through real `dvc repro` (smoke profile) in a temporary git repository."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _run(*command: str, cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _set_params(project: Path, **values) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params.update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git + DVC repository holding the pipeline, its sources and the offline data."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # dvc, and the `seedvar` commands of the stages, from this environment even if not activated
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "data" / "offline", tmp_path / "data" / "offline")
    shutil.copy(REPO / "dvc.yaml", tmp_path)
    shutil.copy(REPO / "params.yaml", tmp_path)
    _set_params(tmp_path, profile="smoke", seeds=[0, 1, 2])
    _run("git", "init", "-q", cwd=tmp_path)
    _run("dvc", "init", "-q", cwd=tmp_path)
    _run("dvc", "config", "core.analytics", "false", cwd=tmp_path)
    _run("git", "add", "-A", cwd=tmp_path)
    _run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init", cwd=tmp_path)
    return tmp_path


def _ran(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def test_dvc_repro_runs_the_study_and_reruns_only_what_changed(project: Path):
    first = _run("dvc", "repro", cwd=project)
    assert _ran(first) == {"prepare", "seed@0", "seed@1", "seed@2", "aggregate", "report"}
    seeds = pd.read_csv(project / "results" / "seeds.csv")
    assert seeds["seed"].tolist() == [0, 1, 2] and "ln_subject/object_swap" in seeds
    headline = json.loads((project / "results" / "headline.json").read_text())
    assert headline["seeds"]["count"] == 3 and "hans/lexical_nonent" in headline["spread_ratio"]
    for name in ("report.html", "report.md", "subcases.png", "std.svg"):
        assert (project / "report" / name).is_file()
    assert "mnli/matched_accuracy" in _run("dvc", "metrics", "show", cwd=project)

    client = MlflowClient(f"sqlite:///{project}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    study = client.search_runs([experiment], "tags.`seedvar.role` = 'study'")
    assert len(study) == 1 and study[0].info.status == "FINISHED"
    children = client.search_runs(
        [experiment], f"tags.`mlflow.parentRunId` = '{study[0].info.run_id}'"
    )
    assert sorted(run.info.run_name for run in children) == ["seed-0", "seed-1", "seed-2"]
    assert "study/hans/lexical_nonent/std" in study[0].data.metrics
    assert {a.path for a in client.list_artifacts(study[0].info.run_id)} == {"results", "report"}

    assert _ran(_run("dvc", "repro", cwd=project)) == set()  # nothing changed, nothing runs

    _set_params(project, seeds=[0, 1, 2, 3])
    assert _ran(_run("dvc", "repro", cwd=project)) == {"seed@3", "aggregate", "report"}
    assert len(pd.read_csv(project / "results" / "seeds.csv")) == 4


def test_killed_repro_redoes_only_unfinished_seeds(project: Path):
    _run("dvc", "repro", "prepare", cwd=project)
    repro = subprocess.Popen(
        ["dvc", "repro"],
        cwd=project,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while not list((project / "runs").glob("seed-1.partial*")):  # seed 0 done, seed 1 started
        assert repro.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(repro.pid, signal.SIGKILL)
    repro.wait()
    assert (project / "runs" / "seed-0" / "metrics.json").is_file()
    assert not (project / "runs" / "seed-1" / "metrics.json").exists()

    rerun = _run("dvc", "repro", cwd=project)
    assert _ran(rerun) == {"seed@1", "seed@2", "aggregate", "report"}
    assert len(pd.read_csv(project / "results" / "seeds.csv")) == 3


def test_a_seed_finished_after_dvc_was_killed_is_reused_not_retrained(project: Path):
    _set_params(project, seeds=[0])
    _run("dvc", "repro", "prepare", cwd=project)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    repro = subprocess.Popen(["dvc", "repro"], cwd=project, start_new_session=True, **quiet)
    deadline = time.monotonic() + 240
    while not list((project / "runs").glob("seed-0.partial*")):
        assert repro.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(repro.pid, signal.SIGKILL)  # dvc only: its `seedvar train` child goes on alone
    repro.wait()
    lock = project / "runs" / "seed-0.lock"
    while not (project / "runs" / "seed-0" / "metrics.json").exists() or _locked(lock):
        assert time.monotonic() < deadline
        time.sleep(0.2)

    rerun = _run("dvc", "repro", cwd=project)
    assert {"seed@0", "aggregate", "report"} <= _ran(rerun)
    client = MlflowClient(f"sqlite:///{project}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    runs = client.search_runs([experiment], "attributes.run_name = 'seed-0'")
    assert [run.info.status for run in runs] == ["FINISHED"]  # trained once, kept on rerun


def _locked(path: Path) -> bool:
    """Whether a process holds the seed lock at `path`."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
