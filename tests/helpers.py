"""Shared test helpers, the one place test modules import them from (no test module imports
another, nor conftest.py: tests/test_layers.py holds to it): the repo's paths and the timeouts
of commands, running a command with a timeout, git + DVC projects, the MLflow seed runs of a
study, the `seedvar` command lines and errors, and a user's own challenge set. The fixtures and
hooks are in conftest.py, the PostgreSQL server in postgres.py."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from glob import glob
from pathlib import Path

import pandas as pd
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
PAGE = 120  # a page's first load in headless Chromium on 2 busy cores (the MLflow UI's)

# seeds one after another in the launching process, for tests about anything but seeds at once:
# no local Ray to start (about 25 s of CPU a launch, measured on 2 smoke seeds)
ONE_AT_A_TIME = {
    "address": None,
    "cpus_per_seed": len(os.sched_getaffinity(0)),
    "gpus_per_seed": None,
}


# Commands


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


def make(*arguments: str) -> list[str]:
    """`make` with this test environment as its .venv (taken as installed: make must not
    build another); quiet about directories, as it is not when a `make` runs the tests."""
    venv = Path(sys.prefix)
    return [
        "make",
        "--no-print-directory",
        "-o",
        str(venv / ".installed-cpu"),
        f"VENV={venv}",
        "LOCK=cpu",
        *arguments,
    ]


def run_ok(*command: str, cwd: Path, timeout: float = STUDY) -> str:
    """Run a command; fail the test with its output unless it exits 0 within `timeout` s."""
    done = run_command(command, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


# The seedvar command

SMOKE = [
    "--profile",
    "smoke",
    "--set",
    "data.max_train_examples=200",
    "--set",
    "data.max_eval_examples=300",
]


def seedvar(*args: str) -> list[str]:
    """The `seedvar` command line, as the console script runs it."""
    return [sys.executable, "-m", "seedvar.cli", *args]


def one_line_error(done: subprocess.CompletedProcess, message: str) -> None:
    """Exit 2, no traceback, and one error line (the last) that says `message`."""
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("seedvar: error: ") and message in last, done.stderr


# Git + DVC projects


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


# A study's seeds


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


# A user's own challenge set: mine.csv, declared in params.yaml (tests/test_own_set.py)

MINE = {
    "source": "mine.csv",
    "labels": ["entailment", "non-entailment"],
    "collapse": {"non-entailment": ["neutral", "contradiction"]},
    "fields": {"premise": ["context"], "hypothesis": ["claim"], "label": ["verdict"]},
    "groups": {"phenomenon": {}},
    "headline": ["mine/negation"],
}


def write_challenge_set(path: Path) -> pd.DataFrame:
    """40 real MNLI pairs relabelled 2-way, in two phenomena, under the user's own names."""
    mnli = pd.read_parquet(OFFLINE / "mnli" / "validation_matched.parquet").head(40)
    frame = pd.DataFrame(
        {
            "context": mnli["premise"],
            "claim": mnli["hypothesis"],
            "verdict": [
                "entailment" if label == 0 else "non-entailment" for label in mnli["label"]
            ],
            "phenomenon": ["negation", "quantifiers"] * 20,
        }
    )
    frame.to_csv(path, index=False)
    return frame


def challenge_csv(path: Path, **columns: list) -> pd.DataFrame:
    """mine.csv: 40 real MNLI pairs relabelled 2-way (context, claim, verdict), in two
    phenomena, with `columns` beside them (each 40 values)."""
    mnli = pd.read_parquet(OFFLINE / "mnli" / "validation_matched.parquet").head(40)
    verdict = ["entailment" if label == 0 else "non-entailment" for label in mnli["label"]]
    frame = pd.DataFrame(
        {"context": mnli["premise"], "claim": mnli["hypothesis"], "verdict": verdict}
    )
    frame = frame.assign(phenomenon=["negation", "quantifiers"] * 20, **columns)
    frame.to_csv(path, index=False)
    return frame
