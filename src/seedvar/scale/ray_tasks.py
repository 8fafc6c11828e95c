"""Seeds as Ray tasks: connecting to Ray (or starting it here), the resources of one seed, the
task that runs one attempt at a seed through `run_seed`, and the heartbeat board.

Ray is an optional extra (`pip install -e '.[ray]'`): it is imported here, and only when a
command that needs it runs, so the base install works without it.

A task is run with `retry_exceptions=False`: Ray retries it (up to `ray.max_retries`) only when
its node or its worker process dies, never for an error of its own. It does not raise those
errors at all: it reports every ending as an `Outcome` (finished, reused, pruned, superseded,
failed with the error's first line), so that the driver can tell a bad input from a lost node.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L

from seedvar.config import Config, RayConfig
from seedvar.errors import ConfigError, RayUnavailableError, SeedvarError, Superseded, first_line
from seedvar.training.device import on_this_machine

INSTALL = "pip install -e '.[ray]'"
HEARTBEATS_PER_STALL = 5  # an attempt beats this many times within ray.stall_seconds


def import_ray() -> Any:
    """The `ray` module, or one line that says how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(
            f"this command runs seeds on Ray, which is not installed; {INSTALL} (ray 2.60)"
        ) from None
    return ray


@dataclass(frozen=True)
class ClusterInfo:
    """What the command connected to: alive nodes and their resources."""

    address: str | None  # None: a local Ray started by this command
    nodes: list[dict[str, float]]  # per alive node: {"CPU": ..., "GPU": ...}
    dashboard_url: str | None

    @property
    def cpus(self) -> float:
        return sum(node.get("CPU", 0.0) for node in self.nodes)

    @property
    def gpus(self) -> float:
        return sum(node.get("GPU", 0.0) for node in self.nodes)

    def slots(self, resources: SeedResources) -> int:
        """How many seeds the cluster runs at once with these resources per seed."""
        return sum(resources.fit(node) for node in self.nodes)

    def describe(self) -> str:
        where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
        dashboard = f"; dashboard {self.dashboard_url}" if self.dashboard_url else ""
        resources = f"{len(self.nodes)} node(s), {self.cpus:g} CPUs, {self.gpus:g} GPUs"
        return f"{where}: {resources}{dashboard}"


@dataclass(frozen=True)
class SeedResources:
    """What one seed asks Ray for; `threads`: torch's CPU threads inside the task."""

    cpus: float
    gpus: float

    @property
    def threads(self) -> int:
        return max(1, int(self.cpus))

    def fit(self, node: dict[str, float]) -> int:
        """How many seeds fit on one node at once."""
        counts = [math.floor(node.get("CPU", 0.0) / self.cpus + 1e-9)]
        if self.gpus:
            counts.append(math.floor(node.get("GPU", 0.0) / self.gpus + 1e-9))
        return max(0, min(counts))

    def describe(self) -> str:
        return f"{self.cpus:g} CPU and {self.gpus:g} GPU per seed"


def seed_resources(config: Config, cluster: ClusterInfo) -> SeedResources:
    """Resources per seed from the `ray` section; ConfigError if they do not suit the training
    settings, RayUnavailableError if no node of the cluster can run one seed."""
    settings, accelerator = config.ray, config.train.accelerator
    gpus = settings.gpus_per_seed
    if gpus == "auto":
        gpus = 1.0 if cluster.gpus > 0 and accelerator != "cpu" else 0.0
    if accelerator == "gpu" and gpus == 0:
        raise ConfigError(
            "train.accelerator is gpu but ray.gpus_per_seed is 0 (or the cluster has no GPU); "
            "set ray.gpus_per_seed, e.g. 1 or 0.5, on a cluster with GPUs"
        )
    if accelerator == "cpu" and gpus > 0:
        raise ConfigError(
            f"ray.gpus_per_seed is {gpus:g} but train.accelerator is cpu: the GPUs would sit "
            "idle; set ray.gpus_per_seed=0"
        )
    resources = SeedResources(settings.cpus_per_seed, float(gpus))
    if cluster.slots(resources) == 0:
        largest = max(cluster.nodes, key=lambda n: (n.get("GPU", 0), n.get("CPU", 0)), default={})
        raise RayUnavailableError(
            f"no node of {cluster.describe()} can run one seed with "
            f"{resources.describe()} (the largest node has {largest.get('CPU', 0):g} CPUs and "
            f"{largest.get('GPU', 0):g} GPUs); lower ray.cpus_per_seed or ray.gpus_per_seed, "
            "or add nodes"
        )
    return resources


def chosen_where_seeds_run(ray: Any, config: Config, resources: SeedResources) -> Config:
    """The config with its "auto" precisions made concrete by a task where seeds run (the
    driver's machine may have no GPU, or another CPU)."""
    probe = ray.remote(num_cpus=resources.cpus, num_gpus=resources.gpus)(on_this_machine)
    return ray.get(probe.remote(config))


def alive_nodes(ray: Any) -> dict[str, dict[str, float]]:
    """Node id -> resources, for every node of the cluster that is alive."""
    return {node["NodeID"]: node["Resources"] for node in ray.nodes() if node["Alive"]}


@contextmanager
def ray_session(settings: RayConfig) -> Iterator[ClusterInfo]:
    """Connect to the cluster at `ray.address` ("auto", "host:port", "ray://host:port"), or
    with no address start a local Ray on this machine (every CPU and GPU); shut down on exit
    what was started here."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        try:
            context = ray.init(
                address=settings.address,
                log_to_driver=False,  # the tasks' training output stays in Ray's logs
                logging_level=logging.WARNING,
            )
        except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError...
            raise RayUnavailableError(
                f"cannot connect to the Ray cluster at {settings.address} "
                f"({first_line(error)}); start it (`ray start --head` on the head node) or "
                "leave ray.address empty to start Ray on this machine"
            ) from None
        dashboard = getattr(context, "dashboard_url", None) or None
    else:
        dashboard = None
    try:
        nodes = list(alive_nodes(ray).values())
        dashboard_url = f"http://{dashboard}" if dashboard else None
        address = settings.address or os.environ.get("RAY_ADDRESS")  # ray.init's fallback
        yield ClusterInfo(address, nodes, dashboard_url)
    finally:
        if started_here:
            ray.shutdown()


class Board:
    """Heartbeats of the attempts at work, by task key (a Ray actor next to the driver).

    Beats are stamped with the board's own clock, so the driver never compares the clocks of
    two machines. The driver reads the board to show progress and to find an attempt that
    stopped beating on a node that is still alive: a frozen or hung process, which Ray itself
    would wait for forever."""

    def __init__(self) -> None:
        self.beats: dict[str, dict[str, dict[str, Any]]] = {}

    def beat(self, key: str, info: dict[str, Any]) -> None:
        now = time.monotonic()
        entry = self.beats.setdefault(key, {}).setdefault(info["attempt"], {"first": now})
        entry.update(info, last=now)

    def snapshot(self) -> tuple[float, dict[str, dict[str, dict[str, Any]]]]:
        return time.monotonic(), self.beats


def start_board(ray: Any) -> Any:
    """The board, on the driver's node where there is one (restarted elsewhere if that node
    dies; a driver connected through Ray Client leaves the choice to Ray)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(Board)
    try:
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    except Exception:
        return actor.remote()
    return actor.options(scheduling_strategy=here).remote()


@dataclass(frozen=True)
class TrialLink:
    """The sweep trial a seed belongs to: its seed 0 reports to it (pruning); every seed
    stops when the trial has been pruned."""

    trial_id: int
    number: int
    reports: bool


@dataclass(frozen=True)
class SeedTask:
    """One seed for a Ray task to run: the same `run_seed` as `seedvar train`."""

    key: str  # "seed 3", "trial 2 seed 1": how the driver names it
    config: Config
    project_dir: str
    threads: int = 1
    heartbeat_seconds: float = 10.0
    prepared: str | None = None
    parent_run_id: str | None = None
    run_tags: dict[str, str] = field(default_factory=dict)
    trial: TrialLink | None = None


@dataclass(frozen=True)
class Outcome:
    """How one attempt at a seed ended (a task's return value)."""

    key: str
    seed: int
    status: str  # finished | reused | pruned | stopped | superseded | failed
    attempt: str
    node: str
    run_id: str | None = None
    metrics: dict[str, float] | None = None
    error: str | None = None  # the first line
    error_type: str | None = None
    detail: str | None = None  # the traceback of an error that is not a SeedvarError
    seconds: float = 0.0


class Progress(L.Callback):
    """Keeps the heartbeat's view of training up to date (step, total, phase)."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.info.update(phase="training", total=int(getattr(module, "total_steps", 0)))

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        self.info["step"] = trainer.global_step

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.info["phase"] = "evaluating"


class Heartbeat(threading.Thread):
    """Sends `info` to the board every `interval` seconds while the attempt runs. A thread of
    the task's own process: it stops when the process is frozen, dies or loses its node."""

    def __init__(self, board: Any, key: str, info: dict[str, Any], interval: float) -> None:
        super().__init__(daemon=True, name=f"seedvar heartbeat {key}")
        self.board, self.key, self.info, self.interval = board, key, info, interval
        self.stopped = threading.Event()

    def send(self) -> None:
        with suppress(Exception):  # a board being restarted: the next beat gets through
            self.board.beat.remote(self.key, dict(self.info))

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.send()

    def stop(self, phase: str) -> None:
        self.stopped.set()
        self.info["phase"] = phase
        self.send()


def run_seed_task(task: SeedTask, board: Any) -> Outcome:
    """The body of the Ray task: one attempt at one seed, in the project folder, with
    `task.threads` torch threads, beating to `board`; every ending becomes an Outcome."""
    import torch

    from seedvar.study.job import SeedJob
    from seedvar.study.seed import run_seed
    from seedvar.sweep.objective import PrunedSeed
    from seedvar.sweep.study import trial_callbacks
    from seedvar.tracking import RunStopped

    ray = import_ray()
    started = time.perf_counter()
    config, context = task.config, ray.get_runtime_context()
    node = context.get_node_id()
    job = SeedJob(Path(config.output_dir), config.train.seed)
    info = {"attempt": job.attempt, "node": node, "host": socket.gethostname()}
    info.update(pid=os.getpid(), phase="loading", step=0, total=0)
    beat = Heartbeat(board, task.key, info, task.heartbeat_seconds)
    beat.send()
    beat.start()

    def outcome(status: str, **more: Any) -> Outcome:
        more["seconds"] = time.perf_counter() - started
        return Outcome(task.key, config.train.seed, status, job.attempt, node, **more)

    ended = "failed"
    try:
        _enter(task.project_dir, node)
        torch.set_num_threads(task.threads)
        callbacks = [Progress(info)]
        if task.trial is not None:
            callbacks += trial_callbacks(config, task.trial.trial_id, task.trial.reports)
        result = run_seed(
            config,
            prepared=Path(task.prepared) if task.prepared else None,
            callbacks=callbacks,
            parent_run_id=task.parent_run_id,
            run_tags=task.run_tags,
            reuse=True,
            job=job,
            exclusive=False,
            note={"ray_node": node, "ray_task": context.get_task_id()},
        )
        ended = "reused" if result.reused else "finished"
        return outcome(ended, run_id=result.run_id, metrics=result.metrics)
    except RunStopped as stopped:  # its trial was pruned (or failed) on another seed
        ended = "pruned" if isinstance(stopped, PrunedSeed) else "stopped"
        return outcome(ended, error=first_line(stopped))
    except Superseded as superseded:
        ended = "superseded"
        return outcome(ended, error=first_line(superseded))
    except SeedvarError as error:
        return outcome("failed", error=first_line(error), error_type=type(error).__name__)
    except Exception as error:
        return outcome(
            "failed",
            error=f"{type(error).__name__}: {first_line(error)}",
            error_type=type(error).__name__,
            detail=traceback.format_exc(),
        )
    finally:
        beat.stop(ended)


def _enter(project_dir: str, node: str) -> None:
    """Work in the project folder, where the config's relative paths (data, output_dir,
    prepared, the SQLite tracking store) point on every node."""
    try:
        os.chdir(project_dir)
    except OSError as error:
        raise ConfigError(
            f"the project folder {project_dir} cannot be entered on node {node} "
            f"({error.strerror}); put the project on storage that every node mounts at the "
            "same path, or set ray.project_dir to where the nodes see it"
        ) from None


def remote_seed_task(ray: Any) -> Any:
    """`run_seed_task` as a Ray remote function (resources are set per call)."""
    return ray.remote(run_seed_task)
