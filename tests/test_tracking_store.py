"""The tracking store: the default one anchored at the project root (also inside DVC's
temporary workspaces), in write-ahead-log mode; a write that meets a lock held past the store's
own timeout tried again, not its seed; eight seeds' writes at once beside a reader that holds a
transaction open (an `mlflow ui`) and a writer that holds the lock, on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
import torch
from mlflow.exceptions import MlflowException
from mlflow.system_metrics.metrics import gpu_monitor
from sqlalchemy import event
from sqlalchemy.engine import Engine

from seedvar.config import load_config
from seedvar.errors import transient
from seedvar.tracking import FINISHED, TrackedRun, open_store, retry, start_run, tracking_uri
from seedvar.tracking.logger import RunLogger
from seedvar.tracking.system import SystemMetrics, seed_gpus, system_metrics
from tests.helpers import QUICK, STUDY, run_command, seed_name, seed_runs, training_now
from tests.postgres import postgres_server

LONGER = ["--set", "data.max_train_examples=800", "--set", "train.epochs=2"]


def test_the_default_store_is_at_the_project_root_in_write_ahead_mode(tmp_path, monkeypatch):
    workspace, temporary = tmp_path / "workspace", tmp_path / "dvc-temporary-copy"
    temporary.mkdir()
    monkeypatch.chdir(temporary)  # where `dvc exp run --temp` runs the stage
    monkeypatch.setenv("DVC_ROOT", str(workspace))  # what DVC says the workspace is
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = load_config(None, profile="smoke")
    assert tracking_uri(config.tracking) == f"sqlite:///{workspace}/mlruns/mlflow.db"
    assert not (workspace / "mlruns").exists()  # asking for the URI writes nothing
    open_store(config)
    with sqlite3.connect(workspace / "mlruns" / "mlflow.db") as database:
        assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.slow
def test_seeds_at_once_survive_a_reader_and_a_writer_that_holds_the_lock(study_dir: Path):
    launch = subprocess.Popen(
        [sys.executable, "-m", "seedvar.cli", "launch", "--profile", "smoke", *LONGER],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    database = study_dir / "mlruns" / "mlflow.db"
    deadline = time.monotonic() + STUDY
    while not training_now(study_dir):
        assert launch.poll() is None and time.monotonic() < deadline, launch.stdout.read()
        time.sleep(0.2)
    reader = sqlite3.connect(database, timeout=60)  # an `mlflow ui` in the middle of a read
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM runs").fetchone()
    writer = sqlite3.connect(database, timeout=60, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")  # another writer holds the lock for 30 s
    released = threading.Timer(30, writer.execute, ["COMMIT"])
    released.start()
    try:
        output, _ = launch.communicate(timeout=STUDY)
    finally:
        released.cancel()
        reader.rollback()
    print(output)  # shown with -rP
    assert launch.returncode == 0, output
    assert "submitted again" not in output and "trying again" not in output  # no seed retried
    finished = [seed_name(run) for run in seed_runs(study_dir) if run.info.status == "FINISHED"]
    assert sorted(finished) == ["seed-0", "seed-1", "seed-2"]  # every seed once, none lost
    assert "RUNNING" not in {run.info.status for run in seed_runs(study_dir)}
    assert not [run for run in seed_runs(study_dir) if "seedvar.resumed" in run.data.tags]
    done = run_command(
        [sys.executable, "-m", "seedvar.cli", "launch", "--profile", "smoke", *LONGER],
        timeout=STUDY,
    )
    assert "all 3 seeds are finished" in done.stdout


BUSY_TIMEOUT_MS = 200  # MLflow's SQLite sessions wait 20 s for a lock; here 0.2 s
STEPS = 10  # training-curve points per seed in the contention test


@pytest.fixture
def short_busy_timeout() -> Iterator[None]:
    """MLflow's SQLite sessions give up on a lock after BUSY_TIMEOUT_MS, not 20 s (its own
    PRAGMA, shortened on the way to the database)."""

    def shorter(_c: Any, _cur: Any, statement: str, parameters: Any, *_: Any) -> tuple[str, Any]:
        return statement.replace("busy_timeout = 20000", f"busy_timeout = {BUSY_TIMEOUT_MS}"), (
            parameters
        )

    event.listen(Engine, "before_cursor_execute", shorter, retval=True)
    yield
    event.remove(Engine, "before_cursor_execute", shorter)


@contextmanager
def retries_seen(release: Callable[[], None] | None = None, at: int = 0) -> Iterator[list[str]]:
    """The writes tried again (retry.py logs each at DEBUG), as they come; at the `at`-th,
    `release` is called (the lock holder lets go once writes have failed against its lock `at`
    times)."""
    seen: list[str] = []

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())
            if release is not None and len(seen) == at:
                release()

    handler, level = Seen(), retry.log.level
    retry.log.addHandler(handler)
    retry.log.setLevel(logging.DEBUG)
    try:
        yield seen
    finally:
        retry.log.removeHandler(handler)
        retry.log.setLevel(level)


def busy_lines(stderr: str) -> list[str]:
    """The lines in which a process says that its writes wait for a busy store."""
    return [line for line in stderr.splitlines() if "the tracking store, which is busy" in line]


def sqlite_lock(database: Path) -> sqlite3.Connection:
    """Another connection that holds the store's write lock until it commits."""
    holder = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def log_accuracy(run: TrackedRun) -> None:
    run.log_raw_metrics({"accuracy": 0.75})


def log_curve_point(run: TrackedRun) -> None:
    RunLogger(tracking_uri=run.client.tracking_uri, run_id=run.run_id).log_metrics(
        {"accuracy": 0.75}, step=3
    )


@pytest.mark.parametrize("write", [log_accuracy, log_curve_point])
def test_a_write_outlasts_a_lock_held_past_the_busy_timeout(
    study_dir: Path,
    short_busy_timeout: None,
    write: Callable[[TrackedRun], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = start_run(load_config(None, profile="smoke"), "seed-0")
    capsys.readouterr()
    holder = sqlite_lock(study_dir / "mlruns" / "mlflow.db")
    with closing(holder), retries_seen(lambda: holder.execute("COMMIT"), at=2) as retried:
        write(run)  # fails twice against the lock, then the lock goes and it succeeds
    assert len(retried) == 2 and "database is locked" in retried[0]
    assert run.client.get_run(run.run_id).data.metrics == {"accuracy": 0.75}
    assert busy_lines(capsys.readouterr().err) == [  # one line, not one per try
        "seedvar: waiting for the tracking store, which is busy (database is locked): writes "
        f"are tried again for up to {retry.WRITE_RETRY_SECONDS:.0f} s"
    ]


def test_a_seed_whose_writes_wait_for_a_busy_store_says_so_once_per_spell(
    study_dir: Path, short_busy_timeout: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three writes of seed 3 held up by one lock at once: one line; the store busy again
    later: one more."""
    run = start_run(load_config(None, profile="smoke"), "seed-3")
    database = study_dir / "mlruns" / "mlflow.db"
    capsys.readouterr()
    with retry.writing_for("seed 3"):
        holder = sqlite_lock(database)
        with (
            closing(holder),
            retries_seen(lambda: holder.execute("COMMIT"), at=6) as retried,
            ThreadPoolExecutor(3) as writers,
        ):
            list(writers.map(lambda _: log_accuracy(run), range(3)))
        assert len(retried) >= 6
        first = busy_lines(capsys.readouterr().err)
        holder = sqlite_lock(database)
        with closing(holder), retries_seen(lambda: holder.execute("COMMIT"), at=1):
            log_curve_point(run)
        again = busy_lines(capsys.readouterr().err)
    expected = (
        "seedvar: seed 3 waits for the tracking store, which is busy (database is locked): its "
        f"writes are tried again for up to {retry.WRITE_RETRY_SECONDS:.0f} s; the seed is not "
        "restarted"
    )
    assert first == [expected] and again == [expected]
    assert run.client.get_run(run.run_id).data.metrics == {"accuracy": 0.75}


def test_a_lock_that_outlasts_the_retries_fails_the_write_as_transient(
    study_dir: Path, short_busy_timeout: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry, "WRITE_RETRY_SECONDS", 1.0)
    run = start_run(load_config(None, profile="smoke"), "seed-0")
    holder = sqlite_lock(study_dir / "mlruns" / "mlflow.db")
    with closing(holder), retries_seen() as retried, pytest.raises(MlflowException) as failed:
        log_accuracy(run)
    assert retried and "database is locked" in str(failed.value)
    assert transient(failed.value)  # the scheduler's last resort: the seed is tried again
    assert run.client.get_run(run.run_id).data.metrics == {}


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """One PostgreSQL server for this module's tests: an MLflow URI whose sessions give up on a
    lock after BUSY_TIMEOUT_MS (`lock_timeout`; unset, they wait for as long as it is held)."""
    with postgres_server() as url:
        yield f"{url}?options=-c%20lock_timeout%3D{BUSY_TIMEOUT_MS}"


@contextmanager
def sqlite_contention(database: Path) -> Iterator[Callable[[], None]]:
    """A reader in the middle of a read (an `mlflow ui`) and a writer holding the lock;
    yields the writer's release."""
    with closing(sqlite3.connect(database)) as reader, closing(sqlite_lock(database)) as holder:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM runs").fetchone()
        yield lambda: holder.execute("COMMIT")


@contextmanager
def postgres_contention(uri: str) -> Iterator[Callable[[], None]]:
    """The same on PostgreSQL: a reader's open snapshot, a writer's lock on the runs table."""
    with psycopg.connect(uri) as reader, psycopg.connect(uri) as holder:
        reader.execute("SELECT count(*) FROM runs").fetchone()  # its transaction stays open
        holder.execute("LOCK TABLE runs IN EXCLUSIVE MODE")
        yield holder.commit


def seed_tracking(seed: int) -> str:
    """What a seed writes: its run, params, a training curve (Lightning's logger), results,
    its end. Returns the run's id."""
    config = load_config(None, profile="smoke")
    run = start_run(config, f"seed-{seed}")
    run.log_params({"seed": seed, "learning_rate": 1e-3})
    logger = RunLogger(tracking_uri=run.client.tracking_uri, run_id=run.run_id)
    for step in range(STEPS):
        logger.log_metrics({"train_loss": 1 / (step + 1)}, step=step)
    run.log_raw_metrics({"accuracy": seed / 10})
    run.end(FINISHED)
    return run.run_id


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_eight_seeds_write_at_once_beside_a_reader_and_a_writer_holding_the_lock(
    store: str,
    study_dir: Path,
    short_busy_timeout: None,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if store == "postgres":
        uri = request.getfixturevalue("postgres")
        contention = postgres_contention(uri)
    else:
        uri = f"sqlite:///{study_dir}/mlruns/mlflow.db"
        contention = sqlite_contention(study_dir / "mlruns" / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    open_store(load_config(None, profile="smoke"))  # the store's tables and the experiment
    with (
        contention as release,
        retries_seen(release, at=8) as retried,
        ThreadPoolExecutor(8) as seeds,
    ):
        run_ids = list(seeds.map(seed_tracking, range(8)))
    assert len(retried) >= 8  # the writers met the lock, and got through it
    client = open_store(load_config(None, profile="smoke")).client
    for seed, run_id in enumerate(run_ids):
        run = client.get_run(run_id)
        assert run.info.status == FINISHED
        assert run.data.params == {"seed": str(seed), "learning_rate": "0.001"}
        assert run.data.metrics == {"train_loss": 1 / STEPS, "accuracy": seed / 10}
        curve = client.get_metric_history(run_id, "train_loss")
        assert sorted(point.step for point in curve) == list(range(STEPS))


def _history(run: TrackedRun, key: str) -> list[int]:
    """The steps at which the run has `key`."""
    return sorted(m.step for m in run.client.get_metric_history(run.run_id, key))


def test_a_seeds_system_metrics_outlast_a_busy_store(
    study_dir: Path, short_busy_timeout: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """MLflow's own sampler (3.17) ends at its first write that meets a lock, and the seed logs
    no more system metrics; here that write is tried again and the sampling goes on."""
    run = start_run(load_config(None, profile="smoke"), "seed-0")
    key = "system/cpu_utilization_percentage"
    capsys.readouterr()
    holder = sqlite_lock(study_dir / "mlruns" / "mlflow.db")
    with (
        closing(holder),
        retries_seen(lambda: holder.execute("COMMIT"), at=2) as retried,
        system_metrics(run.client.tracking_uri, run.run_id, 0.2, on_gpu=False),
    ):
        deadline = time.monotonic() + QUICK
        while len(_history(run, key)) < 3:
            assert time.monotonic() < deadline, "no system metrics after the lock went"
            time.sleep(0.2)
    assert len(retried) >= 2 and "database is locked" in retried[0]
    assert _history(run, key)[:3] == [0, 1, 2]
    assert "system/system_memory_usage_megabytes" in run.client.get_run(run.run_id).data.metrics
    assert busy_lines(capsys.readouterr().err) == [
        "seedvar: waiting for the tracking store, which is busy (database is locked): writes "
        f"are tried again for up to {retry.WRITE_RETRY_SECONDS:.0f} s"
    ]
    steps = len(_history(run, key))
    with system_metrics(run.client.tracking_uri, run.run_id, 0.1, False, holds=lambda: False):
        time.sleep(0.5)  # an attempt that lost its seed's run writes nothing more into it
    assert len(_history(run, key)) == steps


class _NVML:
    """NVML on an 8-GPU node (the driver's answers, which ignore CUDA_VISIBLE_DEVICES): GPU i
    has used i GB of its 80, and is i % used."""

    NVMLError = RuntimeError
    UUIDS = [f"GPU-5d4c8c16-0000-4000-8000-00000000000{i}" for i in range(8)]

    def nvmlInit(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 8

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:  # noqa: N802
        return self.UUIDS[handle]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(used=handle * 1e9, total=80e9)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(gpu=handle)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:  # noqa: N802
        return 100_000 + handle

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:  # noqa: N802
        return 700_000


def test_a_seed_logs_its_own_gpu_alone_not_every_gpu_of_its_node(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray gives a seed GPU 5 of 8 (CUDA_VISIBLE_DEVICES=5); torch sees it as its device 0,
    NVML still lists all 8. The seed's run gets GPU 5's numbers as `gpu_0_*`, and nothing of the
    other seven; a CPU seed, no GPU at all."""
    nvml = _NVML()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(gpu_monitor, "pynvml", nvml, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    # torch.cuda's answers on that node: CUDA numbers the visible GPUs from 0
    visible = [int(i) for i in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]
    properties = {i: SimpleNamespace(uuid=nvml.UUIDS[n][4:]) for i, n in enumerate(visible)}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties.__getitem__)
    every = gpu_monitor.GPUMonitor()  # MLflow's: all eight, as this seed's gpu_0 ... gpu_7
    every.collect_metrics()
    assert len({key.split("_")[1] for key in every.aggregate_metrics()}) == 8
    run = start_run(load_config(None, profile="smoke"), "seed-3")
    for gpus, name in ((seed_gpus(), "a GPU seed"), ([], "a CPU seed")):
        sampling = SystemMetrics(run.client.tracking_uri, run.run_id, 0.1, gpus)
        for sampler in sampling.samplers:
            sampler.collect_metrics()
        sampling.publish()
        logged = run.client.get_run(run.run_id).data.metrics
        gpu = {k: v for k, v in logged.items() if k.startswith("system/gpu")}
        assert gpu == {
            "system/gpu_0_memory_usage_percentage": 6.2,  # GPU 5: 5 of 80 GB
            "system/gpu_0_memory_usage_megabytes": 5000.0,
            "system/gpu_0_utilization_percentage": 5.0,
            "system/gpu_0_power_usage_watts": 100.0,
            "system/gpu_0_power_usage_percentage": 14.3,
        }, name  # the CPU seed's step added none (the GPU seed's stay the latest values)
        assert _history(run, "system/gpu_0_utilization_percentage") == [0], name


def test_a_write_waiting_for_a_busy_store_counts_as_progress(tmp_path: Path):
    """A seed whose write waits for a locked store is not stuck: each try ticks its progress,
    so a driver cancels the seed that holds the store (frozen mid-write), not the one waiting
    (tests/test_ray.py's frozen task once cancelled both)."""
    from seedvar import progress
    from seedvar.tracking.retry import retried

    tries = []

    @retried
    def write() -> str:
        tries.append(time.monotonic())
        if len(tries) < 4:
            raise sqlite3.OperationalError("database is locked")
        return "written"

    path = tmp_path / "progress.json"
    with progress.reporting(path, "attempt", 1):
        assert write() == "written"
        counted = progress.read(path)
    assert len(tries) == 4 and counted is not None and counted.batches == 3
