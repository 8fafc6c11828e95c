"""The main job interrupted at a random moment, every way a user (or a machine) stops it: Ctrl-C,
SIGTERM and SIGKILL of `make study`, `dvc exp run`, `dvc repro` and `seedvar launch`, then the
same command again. Nothing finished is trained again (one FINISHED MLflow run per seed and
recipe), no run is left RUNNING, and no process of the study is left behind, read from the
process table. Each case trains the study under a recipe of its own (its learning rate), in one
project, as a user trying recipes one after another would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from glob import glob
from pathlib import Path

import psutil
import pytest
import yaml

from seedvar.processes import alive, descendants, started_at
from tests.helpers import (
    QUICK,
    REPO,
    STUDY,
    dvc_project,
    make,
    run_command,
    run_ok,
    seed_runs,
    training_now,
)

pytestmark = pytest.mark.slow

SEEDS = [0, 1, 2]
RECIPE = {"data": {"max_train_examples": 400}, "train": {"epochs": 2}}  # 50 steps a seed
# two seeds at once on any machine of two or more cores, so that one finishes while another
# trains; one at a time on one core
CPUS = max(1, len(os.sched_getaffinity(0)) // 2)


@pytest.fixture(scope="module")
def project(dvc_environment: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke study (seeds 0-2, long enough to be interrupted), prepared, with the Makefile
    and its lock files, so that `make study` runs as in a clone."""
    ray = {"address": None, "cpus_per_seed": CPUS, "gpus_per_seed": None}
    project = dvc_project(tmp_path_factory.mktemp("study"), profile="smoke", seeds=SEEDS, ray=ray)
    params = yaml.safe_load((project / "params.yaml").read_text())
    for section, values in RECIPE.items():
        params[section].update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    shutil.copy(REPO / "Makefile", project)
    shutil.copytree(REPO / "requirements", project / "requirements")  # older than the venv
    run_ok("dvc", "repro", "prepare", cwd=project)
    run_ok("git", "add", "-A", cwd=project, timeout=QUICK)
    git = ("git", "-c", "user.name=t", "-c", "user.email=t@t")
    run_ok(*git, "commit", "-qm", "prepared", cwd=project, timeout=QUICK)
    return project


def command_line(command: str) -> list[str]:
    if command == "make study":
        return make("study", "PROFILE=smoke")
    if command == "seedvar launch":
        return ["seedvar", "launch", "--prepared", "prepared"]
    return command.split()


CASES = [  # the command, the signal, and whom it goes to: the command alone or its group;
    # each command and each signal once (`make study` runs `dvc exp run`, which runs `seedvar
    # launch`: a SIGTERM to launch takes the path a SIGTERM through dvc takes)
    ("make study", signal.SIGINT, "group"),  # Ctrl-C in the terminal
    ("dvc exp run", signal.SIGKILL, "command"),  # dvc dies; its launch is left to itself
    ("dvc repro", signal.SIGTERM, "command"),
    ("seedvar launch", signal.SIGKILL, "command"),  # the driver dies; its seeds are left
]


@pytest.mark.parametrize(("command", "number", "whom"), CASES, ids=lambda v: str(v))
def test_an_interrupted_study_loses_nothing_and_leaves_nothing(
    project: Path, command: str, number: signal.Signals, whom: str, spawn
):
    rate = 1e-3 + 1e-4 * CASES.index((command, number, whom))  # this case's recipe
    set_learning_rate(project, rate)
    started = spawn(
        command_line(command), cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + STUDY
    while not (finished(project, rate) and training_now(project)):  # mid-study
        assert started.poll() is None and time.monotonic() < deadline, "finished too soon"
        time.sleep(0.2)
    study = {started.pid: started_at(started.pid), **descendants(started.pid)}
    before = finished(project, rate)
    seeds_before = finished_runs(project, rate)
    if whom == "group":
        os.killpg(started.pid, number)
    else:
        os.kill(started.pid, number)
    started.wait(timeout=QUICK)
    if number != signal.SIGKILL or command != "seedvar launch":  # the driver itself cleans up
        assert not left(study, within=60), "left behind after the interrupt"

    again = run_command(command_line(command), cwd=project, timeout=STUDY)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not left(study, within=10), "left behind after the same command again"
    after = finished(project, rate)
    assert set(after) == set(SEEDS) and all(after[seed] == before[seed] for seed in before)
    per_seed = Counter(finished_runs(project, rate))
    assert per_seed == {seed: 1 for seed in SEEDS}  # nothing trained twice
    assert not [r for r in seed_runs(project) if r.info.status == "RUNNING"]
    print(  # the table of the closing note: shown with -rP
        f"| `{command}` | {number.name} to the {whom} | {sorted(before)} | "
        f"{[seeds_before.count(seed) for seed in SEEDS]} | {[per_seed[seed] for seed in SEEDS]} |"
    )


def finished_runs(project: Path, rate: float) -> list[int]:
    """The seed of every FINISHED MLflow seed run with learning rate `rate`."""
    return [
        int(run.info.run_name.split(" of ")[0].removeprefix("seed-"))
        for run in seed_runs(project)
        if run.info.status == "FINISHED" and run.data.params["train.learning_rate"] == str(rate)
    ]


def set_learning_rate(project: Path, rate: float) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["train"]["learning_rate"] = rate
    (project / "params.yaml").write_text(yaml.safe_dump(params))


def finished(project: Path, rate: float) -> dict[int, str]:
    """The seeds kept finished with learning rate `rate`, and the MLflow run of each."""
    found = {}
    for entry in map(Path, glob(f"{project}/.seedvar/runs/seed-*/*/config.yaml")):
        config = yaml.safe_load(entry.read_text())
        if config["train"]["learning_rate"] == rate and (entry.parent / "run.json").is_file():
            run = json.loads((entry.parent / "run.json").read_text())["run_id"]
            found[int(entry.parent.parent.name.removeprefix("seed-"))] = run
    return found


def left(processes: dict[int, str], within: float) -> list[str]:
    """The command lines of the processes of `processes` (pid: start time) still alive after
    `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        living = [
            pid for pid, begun in processes.items() if alive(pid) and started_at(pid) == begun
        ]
        if not living or time.monotonic() > deadline:
            return [f"{pid}: {command_of(pid)}" for pid in living]
        time.sleep(0.5)


def command_of(pid: int) -> str:
    """Process `pid`'s command line, or "" where it has ended."""
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""
