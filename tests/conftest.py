"""Shared fixtures: a scratch study folder that sees the real offline data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
OFFLINE = REPO / "data" / "offline"


@pytest.fixture
def study_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder (the cwd) with data/ linked to the repo's data, and its own
    MLflow store, so that relative paths in profiles work and tests never share state."""
    (tmp_path / "data").symlink_to(REPO / "data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the whole test session (see tests/postgres.py)."""
    from tests.postgres import postgres_server

    with postgres_server() as url:
        yield url


def run_ok(*command: str, cwd: Path) -> str:
    """Run a command; fail the test with its output unless it exits 0."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def set_params(project: Path, **values: object) -> None:
    """Change top-level keys of a project's params.yaml."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params.update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params))


def stages_ran(output: str) -> set[str]:
    """The stages a `dvc repro` output says it ran."""
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def dvc_project(path: Path, **params: object) -> Path:
    """A git + DVC repository at `path` holding the pipeline, its sources, the offline data
    and the repo's DVC config and plot templates, with `params` set in params.yaml."""
    shutil.copytree(REPO / "src", path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "data" / "offline", path / "data" / "offline")
    shutil.copy(REPO / "dvc.yaml", path)
    shutil.copy(REPO / "params.yaml", path)
    set_params(path, **params)
    run_ok("git", "init", "-q", cwd=path)
    run_ok("dvc", "init", "-q", cwd=path)
    shutil.copy(REPO / ".dvc" / "config", path / ".dvc" / "config")
    shutil.copytree(REPO / ".dvc" / "plots", path / ".dvc" / "plots")
    commit(path, "init")
    return path


def commit(path: Path, message: str) -> None:
    run_ok("git", "add", "-A", cwd=path)
    run_ok("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message, cwd=path)


@pytest.fixture(scope="module")
def dvc_environment() -> Iterator[None]:
    """dvc and the stages' `seedvar` from this environment; MLflow stores per project."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        patch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        yield


def seed_runs(project: Path, seed: int | None = None) -> list:
    """The MLflow seed runs of the study in `project` (only seed `seed`'s, when given)."""
    client = MlflowClient(f"sqlite:///{project}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    runs = client.search_runs([experiment], "tags.`seedvar.role` = 'seed'")
    return [run for run in runs if seed is None or seed_name(run) == f"seed-{seed}"]


def seed_name(run) -> str:  # noqa: ANN001
    """`seed-N` of a seed's run name (which goes on with the study it belongs to)."""
    return run.info.run_name.split(" of ")[0]
