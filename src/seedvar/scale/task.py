"""The Ray task of one seed: one attempt at it through the same `run_seed` as `seedvar train`,
its heartbeat sent to the driver's board while it runs, and every ending returned as a
TaskResult: the task never raises, so that the driver can tell a bad input from a lost node.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seedvar.errors import ConfigError, SeedvarError, Superseded, first_line
from seedvar.scale.cluster import import_ray
from seedvar.scale.protocol import Beat, SeedTask, Status, TaskResult

if TYPE_CHECKING:  # the driver imports this module too, and never trains: no Lightning there
    import lightning as L


class Heartbeat(threading.Thread):
    """Sends the beat to the board every `interval` seconds while the attempt runs. A thread of
    the task's own process: it stops when the process is frozen, dies or loses its node."""

    def __init__(self, board: Any, task: SeedTask, beat: Beat) -> None:
        super().__init__(daemon=True, name=f"seedvar heartbeat {task.key}")
        self.board, self.key, self.beat, self.interval = board, task.key, beat, task.beat_seconds
        self.stopped = threading.Event()

    def send(self) -> None:
        with suppress(Exception):  # a board being restarted: the next beat gets through
            self.board.beat.remote(self.key, replace(self.beat))

    def run(self) -> None:
        self.send()
        while not self.stopped.wait(self.interval):
            self.send()

    def stop(self, status: Status) -> None:
        self.stopped.set()
        self.beat.phase = status
        self.send()


def run_seed_task(task: SeedTask, board: Any) -> TaskResult:
    """The body of the Ray task: one attempt at one seed, in the project folder, with
    `task.threads` torch threads, beating to `board`."""
    import torch

    from seedvar.scale.progress import Progress
    from seedvar.study.job import SeedJob
    from seedvar.study.seed import Scheduled, run_seed
    from seedvar.sweep.objective import PrunedSeed
    from seedvar.sweep.study import trial_callbacks
    from seedvar.tracking import RunStopped

    started = time.perf_counter()
    config, context = task.config, import_ray().get_runtime_context()
    node = context.get_node_id()
    job = SeedJob.of(config)
    beat = Beat(task.submission, job.attempt_id, node, socket.gethostname(), os.getpid())
    heartbeat = Heartbeat(board, task, beat)
    heartbeat.start()

    def ended(status: Status, **more: Any) -> TaskResult:
        heartbeat.stop(status)
        more["seconds"] = time.perf_counter() - started
        return TaskResult(task.key, status, job.attempt_id, node, **more)

    try:
        _enter(task.project_dir, node)
        torch.set_num_threads(task.threads)
        callbacks: list[L.Callback] = [Progress(beat)]
        if task.trial is not None:
            callbacks += trial_callbacks(config, task.trial.number, task.trial.reports)
        result = run_seed(
            config,
            "reuse",
            prepared=Path(task.prepared) if task.prepared else None,
            callbacks=callbacks,
            parent_run_id=task.parent_run_id,
            run_tags=task.run_tags,
            scheduled=Scheduled(job, {"ray_node": node, "ray_task": context.get_task_id()}),
        )
        status = Status.REUSED if result.reused else Status.FINISHED
        return ended(status, run_id=result.run_id, metrics=result.metrics)
    except RunStopped as stopped:  # its trial was pruned (or failed) on another seed
        status = Status.PRUNED if isinstance(stopped, PrunedSeed) else Status.STOPPED
        return ended(status, error=first_line(stopped))
    except Superseded as superseded:
        return ended(Status.SUPERSEDED, error=first_line(superseded))
    except SeedvarError as error:
        kind = type(error)
        return ended(
            Status.FAILED,
            error=first_line(error),
            error_type=kind.__name__,
            stops_launch=kind.stops_launch,
        )
    except Exception as error:  # a bug or a broken environment: every seed would meet it
        return ended(
            Status.FAILED,
            error=f"{type(error).__name__}: {first_line(error)}",
            error_type=type(error).__name__,
            stops_launch=True,
            detail=traceback.format_exc(),
        )


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
