"""Shared fixtures: a scratch study folder that sees the real offline data."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from glob import glob
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
OFFLINE = REPO / "data" / "offline"

# Every command a test starts has a timeout (seconds), several times what it needs on 2 busy
# cores, so that a hung command fails its test instead of holding the suite.
QUICK = 120  # a command that stops at an error before any work; git and dvc bookkeeping
STUDY = 600  # a command that trains: a smoke seed, a smoke `dvc repro`, a smoke sweep

# The modules that take longest, longest first (measured with `pytest -n 2`, docs/tests.md):
# `PYTEST_WORKERS=2 make test` runs the suite on two workers, a module to a worker (`--dist
# loadfile`), and starting these first lets the two finish together. Tests keep their order in
# a module.
LONGEST_FIRST = [  # seconds per module, 2026-12-05 (docs/tests.md)
    "test_verdict.py",  # 508
    "test_pipeline.py",  # 448
    "test_ray.py",  # 357
    "test_interruptions.py",  # 321
    "test_dvc.py",  # 256
    "test_integrity.py",  # 239
    "test_fencing.py",  # 124
    "test_sweep.py",  # 118
    "test_safety.py",  # 117
    "test_tracking_store.py",  # 88
    "test_cli.py",  # 83
    "test_readme.py",  # 60
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (see LONGEST_FIRST), the others after them as collected."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


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


def run_command(
    command: Sequence[str], *, timeout: float, **options: object
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(command, capture_output=True, text=True, timeout=timeout)`, except that
    past the timeout (or on Ctrl-C) it kills the command and every process it started (a
    `dvc repro`'s `seedvar train`, say), and a timeout fails the test with what it printed."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **options,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stdout, stderr = _kill(process)
        pytest.fail(f"{list(command)} still running after {timeout} s:\n{stdout}\n{stderr}")
    except BaseException:
        _kill(process)
        raise
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


def _kill(process: subprocess.Popen) -> tuple[str, str]:
    """Kill a command started by `run_command` with everything it started; what it had printed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    try:
        return process.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # a process that left the group holds its pipes
        process.kill()
        return "", ""


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen]]:
    """`spawn(command, **options)`: `subprocess.Popen` in a session of its own, for a test
    that interrupts a command (it bounds its own waits). Whatever is left of it when the test
    ends, failed or not, is killed with everything it started: nothing outlives its test."""
    started: list[subprocess.Popen] = []

    def start(command: Sequence[str], **options: object) -> subprocess.Popen:
        started.append(subprocess.Popen(command, start_new_session=True, **options))
        return started[-1]

    yield start
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=QUICK)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def make(*arguments: str) -> list[str]:
    """`make` with this test environment as its .venv (taken as installed: make must not
    build another)."""
    venv = Path(sys.prefix)
    return ["make", "-o", str(venv / ".installed-cpu"), f"VENV={venv}", "LOCK=cpu", *arguments]


def run_ok(*command: str, cwd: Path, timeout: float = STUDY) -> str:
    """Run a command; fail the test with its output unless it exits 0 within `timeout` s."""
    done = run_command(command, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def committed(relative: str) -> str:
    """A file of the repo as committed (HEAD), not as the checkout has it now: `dvc exp run -S
    profile=...` rewrites params.yaml, and a test must not run what a user last ran. The file
    itself only where the repo is not a git checkout (or the file is not committed)."""
    try:
        shown = subprocess.run(
            ["git", "-C", str(REPO), "show", f"HEAD:./{relative}"],
            capture_output=True,
            text=True,
            timeout=QUICK,
        )
    except OSError:  # no git
        shown = None
    if shown is None or shown.returncode != 0:
        return (REPO / relative).read_text()
    return shown.stdout


def set_params(project: Path, **values: object) -> None:
    """Change top-level keys of a project's params.yaml."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params.update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params))


def stages_ran(output: str) -> set[str]:
    """The stages a `dvc repro` output says it ran."""
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def dvc_project(path: Path, **params: object) -> Path:
    """A git + DVC repository at `path` holding the pipeline, its sources, the offline data,
    the repo's ignore files, DVC config and plot templates, with the committed params.yaml (see
    `committed`) and `params` set in it."""
    shutil.copytree(REPO / "src", path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "data" / "offline", path / "data" / "offline")
    for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
        shutil.copy(REPO / name, path)
    (path / "params.yaml").write_text(committed("params.yaml"))
    set_params(path, **params)
    run_ok("git", "init", "-q", cwd=path, timeout=QUICK)
    run_ok("dvc", "init", "-q", cwd=path, timeout=QUICK)
    shutil.copy(REPO / ".dvc" / "config", path / ".dvc" / "config")
    shutil.copytree(REPO / ".dvc" / "plots", path / ".dvc" / "plots")
    commit(path, "init")
    return path


def commit(path: Path, message: str) -> None:
    run_ok("git", "add", "-A", cwd=path, timeout=QUICK)
    git = ("git", "-c", "user.name=t", "-c", "user.email=t@t")
    run_ok(*git, "commit", "-qm", message, cwd=path, timeout=QUICK)


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


def training_now(project: Path) -> bool:
    """Whether a seed of the project's study is training now (its progress.json says so)."""
    for path in map(Path, glob(f"{project}/.seedvar/runs/seed-*.partial.*/progress.json")):
        try:
            if json.loads(path.read_text())["phase"] == "training":
                return True
        except (OSError, ValueError, KeyError):
            continue
    return False


def seed_name(run) -> str:  # noqa: ANN001
    """`seed-N` of a seed's run name (which goes on with the study it belongs to)."""
    return run.info.run_name.split(" of ")[0]
