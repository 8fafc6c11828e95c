"""The task of one seed: one attempt at it through the same `run_seed` as `seedvar train`, its
progress recorded in its work folder while it runs, and every ending returned as a TaskResult:
the task never raises (but for an interrupt), so that the driver can tell a bad input from a
passing error or a lost node. It runs as a Ray task, or in the driver's own process."""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seedvar import progress
from seedvar.errors import ConfigError, SeedvarError, Superseded, first_line, transient
from seedvar.project import prepared_data
from seedvar.scale.protocol import SeedTask, Status, TaskResult
from seedvar.seeds.job import PROGRESS, SeedJob

if TYPE_CHECKING:  # the driver imports this module too, and never trains: no Lightning there
    import lightning as L


def run_seed_task(task: SeedTask, where: dict[str, str] | None = None) -> TaskResult:
    """One attempt at one seed, in the project folder, with `task.threads` torch threads.
    `where`: the Ray node and task it runs as (None: in the driver's process)."""
    import time

    import torch

    from seedvar.seeds.seed import Scheduled, run_seed
    from seedvar.sweep.objective import PrunedSeed
    from seedvar.sweep.study import trial_callbacks
    from seedvar.tracking import RunStopped

    started = time.perf_counter()
    config = task.config
    prepared = Path(task.prepared) if task.prepared else None
    job = SeedJob.of(config, store=Path(task.store), data=prepared_data(prepared))
    node = (where or {}).get("ray_node", "")

    def ended(status: Status, **more: Any) -> TaskResult:
        more["seconds"] = time.perf_counter() - started
        return TaskResult(task.key, status, job.attempt_id, node, **more)

    try:
        _enter(task.project_dir, node)
        if task.threads:
            torch.set_num_threads(task.threads)
        callbacks: list[L.Callback] = []
        if task.trial is not None:
            callbacks += trial_callbacks(config, task.trial.number, task.trial.reports)
        with progress.reporting(job.work_dir / PROGRESS, job.attempt_id, task.submission):
            result = run_seed(
                config,
                task.if_finished,
                prepared=Path(task.prepared) if task.prepared else None,
                callbacks=callbacks,
                parent_run_id=task.parent_run_id,
                run_tags=task.run_tags,
                scheduled=Scheduled(job, where or {}),
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
    except Exception as error:  # a bug, or this seed's own trouble (out of memory): its own
        return ended(
            Status.FAILED,
            error=f"{type(error).__name__}: {first_line(error)}",
            error_type=type(error).__name__,
            transient=transient(error),
            detail=traceback.format_exc(),
        )


def run_on_ray(task: SeedTask) -> TaskResult:
    """The body of the Ray task (see `run_seed_task`)."""
    import ray

    context = ray.get_runtime_context()
    where = {"ray_node": context.get_node_id(), "ray_task": context.get_task_id() or ""}
    return run_seed_task(task, where)


def _enter(project_dir: str, node: str) -> None:
    """Work in the project folder, where the config's relative paths (data, output_dir,
    prepared) point on every node."""
    try:
        os.chdir(project_dir)
    except OSError as error:
        raise ConfigError(
            f"the project folder {project_dir} cannot be entered on node {node or 'here'} "
            f"({error.strerror}); put the project on storage that every node mounts at the "
            "same path, or set ray.project_dir to where the nodes see it"
        ) from None
