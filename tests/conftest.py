"""Shared fixtures and hooks: a scratch study folder that sees the real offline data, a
PostgreSQL server, processes killed with their test, the longest modules first. The helpers
test modules import (paths, timeouts, commands, projects) are in tests/helpers.py."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest

# Assertions in the helpers (run_ok, one_line_error) say what they compared, as in a test module.
pytest.register_assert_rewrite("tests.helpers")

from tests.helpers import PAGE, QUICK, REPO  # noqa: E402

# The modules that take longest, longest first (measured with `pytest -n 2`, docs/tests.md):
# `PYTEST_WORKERS=2 make test` runs the suite on two workers, a module to a worker (`--dist
# loadfile`), and starting these first lets the two finish together. Tests keep their order in
# a module.
LONGEST_FIRST = [  # seconds per module, `pytest -n 2` on 2 busy cores, 2026-12-07 (1,560 s)
    # in this order, not strictly longest first: test_ray.py and test_pipeline.py started
    # together slowed each other by a fifth (572 and 547 s, not 469 and 446, at 1,768 s)
    "test_benchmarks.py",  # 340
    "test_verdict.py",  # 82
    "test_pipeline.py",  # 395
    "test_ray.py",  # 494
    "test_stacked_launch.py",  # 64
    "test_interruptions.py",  # 394
    "test_dvc.py",  # 292
    "test_integrity.py",  # 99
    "test_fencing.py",  # 89
    "test_sweep.py",  # 161
    "test_safety.py",  # 105
    "test_tracking_store.py",  # 108
    "test_cli.py",  # 36
    "test_readme.py",  # 51
]


def pytest_configure(config: pytest.Config) -> None:
    """A worker of `pytest -n N` with N at least the cores does its math on one thread, and
    so do the commands it starts unless they choose (a launch gives each seed its CPUs): two
    workers each running numpy and torch on 2 threads over 2 cores made the verdict's simulated
    studies 2.3 times slower than one thread each (docs/tests.md)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and workers >= len(os.sched_getaffinity(0)):
        import threadpoolctl
        import torch

        os.environ.setdefault("OMP_NUM_THREADS", "1")
        threadpoolctl.threadpool_limits(1)
        torch.set_num_threads(1)


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


# Headless Chromium (Debian's chromium and chromium-driver) through Selenium


def screenshots_script() -> ModuleType:
    """docs/screenshots/take.py, which opens the UI along the same path."""
    spec = importlib.util.spec_from_file_location("take", REPO / "docs/screenshots/take.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = [*screenshots_script().HEADLESS, "--window-size=1600,1000"]


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, its driver and Selenium, or the test fails (not skips) saying so;
    asked for first, before the server starts."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: this test needs Debian's headless Chromium "
            "(apt-get install -y chromium chromium-driver)"
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.fail("selenium is not installed: pip install selenium (the dev set-up has it)")
    return CHROMIUM


@pytest.fixture
def browser(chromium: Path, tmp_path: Path) -> Iterator[object]:
    """Headless Chromium with a profile of its own (nothing in localStorage), via Selenium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    # the driver given, Selenium Manager (which would download one) is not used
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(PAGE)
    driver.set_script_timeout(PAGE)
    try:
        yield driver
    finally:
        driver.quit()
