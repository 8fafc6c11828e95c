"""Shared fixtures: a scratch study folder that sees the real offline data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
