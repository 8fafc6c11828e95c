"""The driver's own decisions, in one process without Ray (`ray.cpus_per_seed` set to the
machine, so the seeds train one after another here): a seed's failure is that seed's, a passing
error is tried again, the status line, and the command a message names."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from seedvar import cli, tracking
from seedvar.config import load_config
from seedvar.progress import Progress
from seedvar.scale import launch as launching
from seedvar.scale.cluster import SeedResources
from seedvar.scale.folders import FIX, Token, unseen
from seedvar.scale.scheduler import Cause, InProcess, Scheduler, SeedTask, run_task
from seedvar.seeds import seed as seed_module
from seedvar.seeds.result import SeedResult, Status, TaskKey
from tests.helpers import QUICK, SMOKE, one_line_error, run_command, seed_runs, seedvar

ONE_AT_A_TIME = f"ray.cpus_per_seed={len(os.sched_getaffinity(0))}"


def study(*settings: str):  # noqa: ANN201
    return load_config(None, ["seeds=[0, 1, 2]", ONE_AT_A_TIME, *settings], profile="smoke")


@pytest.mark.slow
def test_one_seeds_own_failure_fails_only_that_seed_and_a_passing_error_is_retried(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    real, calls = seed_module.run_seed, []

    def flaky(config, *args, **kwargs):  # noqa: ANN001, ANN202
        calls.append(config.train.seed)
        if config.train.seed == 1:  # what no input could cause: this seed's own trouble
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if config.train.seed == 2 and calls.count(2) == 1:  # once: a store locked too long
            raise sqlite3.OperationalError("database is locked")
        return real(config, *args, **kwargs)

    monkeypatch.setattr(seed_module, "run_seed", flaky)
    report = launching.launch(study(), echo=print)
    assert report.finished == [0, 2] and list(report.failed) == [1] and report.not_run == []
    assert report.failed[1].error == "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert {key: list(map(str, why)) for key, why in report.retried.items()} == {2: ["transient"]}
    assert sorted(p.name for p in Path("runs").iterdir()) == ["seed-0", "seed-2"]  # published
    assert sorted(run.info.status for run in seed_runs(Path.cwd())) == ["FINISHED"] * 2


def test_the_status_line_gives_the_time_so_far_and_an_estimate_of_the_time_left():
    scheduler = InProcess(study().ray, 1, print)
    for seed in (2, 3):
        scheduler.submit(SeedTask(TaskKey(seed), study(), ".", "."))
    ended = Counter({Status.FINISHED: 1, Status.REUSED: 1})
    line = launching._status(scheduler, ended, 4, elapsed=600.0, first_steps={})
    assert "2/4 finished, 0 running, 2 waiting, 0 failed; 10 min so far" in line
    # one seed trained in 10 minutes, two to go; the one found finished took no time here
    assert line.endswith("about 20 min left")


class _Resumed:
    """Two seeds resumed from their checkpoints at step 1000 of 2000."""

    running = {TaskKey(0): None, TaskKey(1): None}
    step, phase = 1000, "training"

    def activity(self) -> dict[TaskKey, Progress]:
        return {key: Progress("a", 1, self.phase, self.step, 2000) for key in self.running}

    def size(self, key: TaskKey) -> int:
        return 1


def test_the_estimate_counts_only_the_steps_trained_since_the_driver_began():
    scheduler, first_steps = _Resumed(), {}
    ended: Counter[Status] = Counter()
    line = launching._status(scheduler, ended, 2, elapsed=30.0, first_steps=first_steps)
    assert line.endswith("30 s so far")  # nothing trained here yet: no estimate
    scheduler.step = 1500  # a quarter of each seed in 10 minutes; another quarter to go
    line = launching._status(scheduler, ended, 2, elapsed=600.0, first_steps=first_steps)
    assert "seed 0 training 1500/2000" in line
    assert line.endswith("10 min so far, about 10 min left")
    scheduler.step, scheduler.phase = 2000, "evaluating"  # trained; no training left to time
    line = launching._status(scheduler, ended, 2, elapsed=1200.0, first_steps=first_steps)
    assert "seed 0 evaluating;" in line
    assert line.endswith("20 min so far")


@pytest.mark.parametrize(
    ("environment", "command"),
    [
        ({"MAKELEVEL": "1", "MAKEFLAGS": " -- PROFILE=cpu"}, "make study PROFILE=cpu"),
        ({"DVC_STAGE": "train", "DVC_EXP_NAME": "tidy-cats"}, "dvc exp run"),
        ({"DVC_STAGE": "train"}, "dvc repro"),
        ({}, "seedvar launch"),
    ],
)
def test_messages_name_the_command_the_user_ran(monkeypatch, environment, command):
    for name in ("MAKELEVEL", "MAKEFLAGS", "DVC_STAGE", "DVC_EXP_NAME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.argv", ["seedvar", "train"])
    assert cli.user_command() == command


def _stuck(task: SeedTask) -> None:
    """A seed task whose training loop is blocked in a system call while another of its
    threads runs on (what a heartbeat thread would do, and a hung DataLoader looks like)."""
    threading.Thread(target=lambda: [time.sleep(0.1) for _ in iter(int, 1)], daemon=True).start()
    time.sleep(3600)


@pytest.mark.slow
def test_stalled_seeds_are_cancelled_one_at_a_time_though_their_threads_run(tmp_path: Path):
    ray = pytest.importorskip("ray", reason="pip install -e '.[ray]'")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        config = study("ray.stall_seconds=2")
        said: list[str] = []
        scheduler = Scheduler(ray, config.ray, SeedResources(1, 0), said.append)
        scheduler.remote = ray.remote(_stuck)
        for seed in (0, 1):  # each reports one batch, then nothing: seed 1 stops after seed 0
            scheduler.submit(SeedTask(TaskKey(seed), config, str(tmp_path), str(tmp_path)))
            work = tmp_path / f"seed-{seed}.partial.attempt{seed}"
            work.mkdir()
            progress = Progress(f"attempt{seed}", 1, "training", step=1, total=100, batches=1)
            (work / "progress.json").write_text(json.dumps(asdict(progress)))
            assert not scheduler.wait(0.5)  # seen
        time.sleep(3)  # both stood still past ray.stall_seconds
        first = time.monotonic()  # before the other's clock restarts
        assert not scheduler.wait(0.5)
        # the longest stuck only: it may have held the other up (a lock); the other's clock
        # starts again
        assert scheduler.retried == {TaskKey(0): [Cause.STALLED]}
        assert said[0].startswith("seed 0: attempt attempt0 has not finished a batch for")
        assert "cancelled" in said[0]
        deadline = first + 60
        while TaskKey(1) not in scheduler.retried:
            assert not scheduler.wait(0.5) and time.monotonic() < deadline
        assert time.monotonic() - first >= 2  # a whole ray.stall_seconds later
        assert scheduler.retried == {key: [Cause.STALLED] for key in (TaskKey(0), TaskKey(1))}
        scheduler.cancel_all()
    finally:
        ray.shutdown()


def test_eight_seeds_at_once_on_one_sqlite_file_are_refused_before_any_training(study_dir: Path):
    """2 CPUs at a quarter CPU a seed: 8 seeds at once, a real local Ray's answer, one SQLite
    store: one line naming PostgreSQL or an `mlflow server`, and nothing trained."""
    eight = ["--set", "ray.cpus_per_seed=0.25", "--set", f"seeds={list(range(8))}"]
    done = run_command(seedvar("launch", *SMOKE, *eight), timeout=QUICK, cwd=study_dir)
    one_line_error(done, "8 seeds at once would write to the SQLite store")
    assert "use PostgreSQL (--set tracking.uri=postgresql://" in done.stderr
    assert not list(study_dir.glob("runs/seed-*"))
    store = study_dir / "mlruns" / "mlflow.db"
    assert not store.exists() or not seed_runs(study_dir)
    tracking.check_writers(load_config(None, profile="smoke"), 7)  # fewer: served
    postgres = load_config(None, ["tracking.uri=postgresql://u:p@db/mlflow"], profile="smoke")
    tracking.check_writers(postgres, 32)  # a store for several writers


class _Ended(InProcess):
    """Seeds whose tasks have ended, each with the result its node sent back."""

    def __init__(self, results: list[SeedResult], echo: Callable[[str], None]) -> None:
        super().__init__(study().ray, 1, echo)
        self.results = results
        self.running = {result.key: None for result in results}

    def wait(self, timeout: float) -> list[SeedResult]:
        self.running.clear()
        return self.results


def test_a_seed_finished_out_of_the_drivers_sight_is_a_failure_not_a_finished_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Three tasks say their seed finished; the driver sees seed 0 in runs/ from its run, seed
    1 not at all, seed 2 from an earlier run (a node with a disk of its own published both)."""
    monkeypatch.chdir(tmp_path)
    for seed, run_id in ((0, "run-0"), (2, "an earlier run")):
        Path(f"runs/seed-{seed}").mkdir(parents=True)
        Path(f"runs/seed-{seed}/run.json").write_text(json.dumps({"run_id": run_id}))
    results = [
        SeedResult(TaskKey(s), Status.FINISHED, "a1", {}, Path(f"runs/seed-{s}"), f"run-{s}")
        for s in (0, 1, 2)
    ]
    lines: list[str] = []
    taken: list[SeedResult] = []
    launching.drive(_Ended(results, lines.append), taken.append, lambda: 3, "acc", lines.append)
    assert [(r.key.seed, r.status) for r in taken] == [
        (0, Status.FINISHED),
        (1, Status.FAILED),
        (2, Status.FAILED),
    ]
    assert [line.split(" in ")[0] for line in lines] == ["seed 0 finished"]  # not 1 nor 2
    assert taken[1].error == (
        "seed 1 finished on its node, but this driver does not see it in runs/seed-1 (the node "
        f"published it on a disk of its own); {FIX}"
    )
    assert taken[2].error_type == "ConfigError" and "runs/seed-2 (the node" in str(taken[2].error)


def test_a_seed_on_a_node_that_does_not_see_the_drivers_keep_stops_before_any_work(
    study_dir: Path,
):
    """A node that joined the cluster after the launch checked its nodes, with a disk of its
    own: its seed's task finds no token where the driver wrote it, and stops the launch."""
    keep = study_dir / ".seedvar" / "runs"
    token = Token("driver-host:4321:abc", ".seedvar-nodes-1f2e", str(study_dir), (str(keep),))
    task = SeedTask(TaskKey(0), study(), str(study_dir), str(keep), token=token)
    [result] = run_task(task, {"ray_node": "5f3e9a12c0ffee", "ray_task": "t1"})
    assert result.status is Status.FAILED and result.stops_launch
    assert result.error_type == "ConfigError"
    assert result.error == (
        f"node {socket.gethostname()} (Ray node 5f3e9a12) does not see this driver's folders: "
        f"{keep}/.seedvar-nodes-1f2e (not found), written by the driver on driver-host; its "
        "seeds would be published, and their progress written, on its own disk, where the "
        f"driver can neither count nor watch them; {FIX}"
    )
    assert not keep.exists()  # nothing of the seed was begun
    keep.mkdir(parents=True)
    (keep / token.name).write_text(token.text)
    assert unseen(token) is None  # a node that sees it goes on
