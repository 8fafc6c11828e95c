"""Shared fixtures and hooks: a scratch study folder that sees the real offline data, a
PostgreSQL server, processes killed with their test, the longest modules first. The helpers
test modules import (paths, timeouts, commands, projects) are in tests/helpers.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

# Assertions in the helpers (run_ok, one_line_error) say what they compared, as in a test module.
pytest.register_assert_rewrite("tests.helpers")

from tests.helpers import QUICK, REPO  # noqa: E402

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


@pytest.fixture(scope="module")
def dvc_environment() -> Iterator[None]:
    """dvc and the stages' `seedvar` from this environment; MLflow stores per project."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        patch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        yield
