"""The MLflow link seedvar prints opens the runs table in a fresh browser (no localStorage).

A real store (a study run and its seeds' runs, written by seedvar.tracking), served by the
`mlflow ui` command seedvar prints, opened in Debian's headless Chromium (apt-get install
chromium chromium-driver) through Selenium and /usr/bin/chromedriver, with a new profile.
MLflow 3.17 opens a bare `#/experiments/<id>` on the GenAI Overview whatever the experiment's
tags say (see `tracking.runs_table_url`): this checks what a user sees, not what a tag says.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from seedvar import tracking
from seedvar.config import Config, load_config
from tests.helpers import PAGE, seed_name, seed_runs

SEEDS = [0, 1, 2]
SERVER_START = 180  # s: `mlflow ui` migrates a new SQLite store, then answers /health


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Config, Path]]:
    """A study's runs as seedvar's tracking writes them: the study run and one child run per
    seed with a metric, in the experiment seedvar creates (tags and all), on SQLite."""
    folder = tmp_path_factory.mktemp("ui-study")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # artifact roots go under folder/mlruns
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        uri = f"sqlite:///{folder / 'mlruns' / 'mlflow.db'}"
        (folder / "mlruns").mkdir()
        config = load_config(None, [f"tracking.uri={uri}", f"seeds={SEEDS}"], "smoke")
        parent = tracking.study_run_id(tracking.open_store(config), config)
        for seed in SEEDS:
            name = tracking.seed_run_name(config, seed)
            tags = {tracking.ROLE_TAG: "seed"}
            with tracking.ending(tracking.start_run(config, name, tags, parent)) as run:
                run.log_raw_metrics({"mnli/matched_accuracy": 0.6 + seed / 100})
    yield config, folder


@pytest.fixture(scope="module")
def ui(study: tuple[Config, Path]) -> Iterator[str]:
    """The UI as a user starts it: the `mlflow ui` command seedvar prints, on a free port
    (one worker); its address. Stopped, with everything it started, at the end."""
    config, folder = study
    port = free_port()
    command = tracking.ui_command(config, port)
    assert command is not None, "a SQLite store gets a command to start its UI"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # this mlflow
    log = folder / "mlflow-ui.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*shlex.split(command), "--workers", "1"],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def _wait_healthy(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"mlflow ui exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=5):
            return
        time.sleep(1)
    pytest.fail(f"mlflow ui did not answer within {SERVER_START} s:\n{log.read_text()[-3000:]}")


def test_ui_command_and_link_point_at_the_store_and_its_runs(study: tuple[Config, Path]) -> None:
    config, folder = study
    experiment = tracking.open_store(config).experiment_id
    assert tracking.ui_command(config) == (
        f"mlflow ui --backend-store-uri sqlite:///{folder / 'mlruns' / 'mlflow.db'} --port 5000"
    )
    assert tracking.runs_table_url(config) == (
        f"http://127.0.0.1:5000/#/experiments/{experiment}/runs?workflowType=machine_learning"
    )
    server = config.model_copy(
        update={"tracking": config.tracking.model_copy(update={"uri": "http://mlflow:8080/"})}
    )
    assert tracking.ui_command(server) is None  # a tracking server serves its own UI


def test_printed_link_opens_the_runs_table_with_the_seeds(
    chromium: Path, study: tuple[Config, Path], ui: str, browser: object
) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    config, folder = study
    experiment = tracking.open_store(config).experiment_id
    link = tracking.runs_table_url(config, host=ui)
    study_name = f"study {tracking.study_label(config)}"
    runs = seed_runs(folder)
    assert sorted(map(seed_name, runs)) == [f"seed-{seed}" for seed in SEEDS]
    seeds = [run.info.run_name for run in runs]

    def text() -> str:
        return browser.execute_script("return document.body ? document.body.innerText : ''")

    def wait(condition: str, what: str) -> None:
        try:
            WebDriverWait(browser, PAGE, poll_frequency=0.5).until(
                lambda _: browser.execute_script(f"return Boolean({condition})")
            )
        except TimeoutException:
            pytest.fail(
                f"{what} not shown within {PAGE} s at {browser.current_url}; the page says:\n"
                f"{text()[:1500]}"
            )

    browser.get(link)
    wait(f"document.body.innerText.includes({json.dumps(study_name)})", "the study run")
    route = urlsplit(browser.current_url).fragment
    assert route.startswith(f"/experiments/{experiment}/runs?"), route
    # the model-training side navigation (Runs, Models, Traces) with Runs current, not the
    # GenAI one (Overview, Traces, Sessions, Judges, ...)
    nav = browser.execute_script(
        "return [...document.querySelectorAll('aside a')].map(a => "
        "[a.getAttribute('href'), a.getAttribute('aria-current')])"
    )
    current = [href for href, state in nav if state == "page"]
    assert any(href.startswith(f"#/experiments/{experiment}/runs?") for href in current), nav
    assert not [href for href, _ in nav if "/overview" in href], nav
    assert "Overview" not in text()
    # the seeds are the study run's children: expand its row, then they are listed
    expand = browser.find_element(
        By.XPATH,
        f"//a[normalize-space()={study_name!r}]/ancestor::div[@role='gridcell']//button",
    )
    expand.click()
    shown = " && ".join(f"document.body.innerText.includes({json.dumps(n)})" for n in seeds)
    wait(shown, f"the seed runs {seeds} under the study run")
