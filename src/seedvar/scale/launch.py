"""`seedvar launch`: every unfinished seed of the study as a Ray task, on a cluster or on a
local Ray, with progress as it goes and a clear list of what failed at the end.

Each task runs the same `run_seed` as `seedvar train` (with `--reuse`), writes to output_dir
(shared storage on a cluster) and logs to the tracking store, its run a child of the study's
run. A second `seedvar launch` picks up only what is unfinished.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seedvar import tracking
from seedvar.config import Config
from seedvar.declared import primary_column
from seedvar.errors import OutputExistsError
from seedvar.scale.cluster import chosen_where_seeds_run, import_ray, ray_session, seed_resources
from seedvar.scale.protocol import Cause, SeedTask, Status, TaskKey, TaskResult
from seedvar.scale.scheduler import Scheduler
from seedvar.study.job import SeedJob

POLL_SECONDS = 1.0
STATUS_SECONDS = 60.0


@dataclass
class LaunchReport:
    """What a launch did, seed by seed (`as_dict`: the same, as `seedvar launch --report`
    writes it)."""

    finished: list[int] = field(default_factory=list)  # trained (or completed) now
    already: list[int] = field(default_factory=list)  # finished before this launch
    failed: dict[int, TaskResult] = field(default_factory=dict)
    not_run: list[int] = field(default_factory=list)  # stopped after a failure of the study
    retried: dict[int, list[Cause]] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        failed = {
            seed: {"error": result.error, "error_type": result.error_type}
            for seed, result in sorted(self.failed.items())
        }
        return {
            "finished": sorted(self.finished),
            "already": sorted(self.already),
            "failed": failed,
            "not_run": sorted(self.not_run),
            "retried": {seed: list(map(str, why)) for seed, why in sorted(self.retried.items())},
            "seconds": round(self.seconds, 1),
        }

    @property
    def ok(self) -> bool:
        return not self.failed and not self.not_run

    def failure_lines(self) -> list[str]:
        """One line per failed seed (seeds with the same error share a line), then those not
        run."""
        by_error: dict[str, list[int]] = {}
        for seed, result in sorted(self.failed.items()):
            by_error.setdefault(result.error or "unknown error", []).append(seed)
        lines = [f"{_seeds(seeds)}: {error}" for error, seeds in by_error.items()]
        if self.not_run:
            lines.append(f"{_seeds(self.not_run)}: not run (stopped after the failure above)")
        return lines


def _seeds(seeds: list[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def task_config(config: Config) -> Config:
    """The config the tasks get: the store the driver uses, resolved here (a task's
    environment is its node's, not the driver's: MLFLOW_TRACKING_URI there may name another
    store, and a relative SQLite path would resolve against the task's folder)."""
    uri = tracking.tracking_uri(config.tracking)
    return config.model_copy(update={"tracking": config.tracking.model_copy(update={"uri": uri})})


def launch(
    config: Config,
    prepared: Path | None = None,
    force: bool = False,
    echo: Callable[[str], None] = print,
) -> LaunchReport:
    """Run every seed of `config.seeds` that has not finished with this recipe, as Ray tasks.
    Seeds finished with another recipe are refused (OutputExistsError) unless `force`."""
    started = time.monotonic()
    ray = import_ray()
    report = LaunchReport()
    config = task_config(config)
    stale = []
    for seed in config.seeds:
        job = SeedJob(Path(config.output_dir), seed)
        if job.finished_with(config.with_seed(seed)):
            report.already.append(seed)
        elif job.finished_metrics() is not None:
            stale.append(seed)
    if stale and not force:
        raise OutputExistsError(
            f"{_seeds(stale)} in {config.output_dir} finished with another recipe; --force "
            "retrains them (replacing them when done), or choose another output_dir"
        )
    todo = [seed for seed in config.seeds if seed not in report.already]
    if not todo:
        echo(f"all {len(config.seeds)} seeds are finished in {config.output_dir}: nothing to do")
        return report
    tracking.check_reachable(config)
    with ray_session(config.ray) as cluster:
        resources = seed_resources(config, cluster)
        config = chosen_where_seeds_run(ray, config, resources)
        study_run = tracking.study_run_id(tracking.open_store(config), config)
        echo(f"{cluster.describe()}")
        echo(
            f"{len(todo)} of {len(config.seeds)} seeds to train ({len(report.already)} finished "
            f"before), {resources.describe()}: up to {cluster.slots(resources)} at once; "
            f"outputs in {config.output_dir}, MLflow {tracking.tracking_uri(config.tracking)} "
            f"(study run {study_run})"
        )
        project_dir = config.ray.project_dir or str(Path.cwd())
        scheduler = Scheduler(ray, config.ray, resources, echo)
        for seed in todo:
            task = SeedTask(
                key=TaskKey(seed),
                config=config.with_seed(seed),
                project_dir=project_dir,
                prepared=str(prepared) if prepared else None,
                parent_run_id=study_run,
            )
            scheduler.submit(task)
        try:
            _drive(scheduler, report, todo, primary_column(config.task), echo)
        except BaseException:
            scheduler.cancel_all()
            raise
        report.retried = {key.seed: why for key, why in scheduler.retried.items()}
    _reconcile_runs(config, report.finished, study_run)
    report.seconds = time.monotonic() - started
    return report


def _drive(
    scheduler: Scheduler,
    report: LaunchReport,
    todo: list[int],
    column: str,
    echo: Callable[[str], None],
) -> None:
    """Collect results until every seed has one (each shown with its `column`); after a
    failure that would hit every seed (bad data, bad config), cancel the seeds that have not
    started."""
    last_status = time.monotonic()
    stopping = False
    while scheduler.running:
        for result in scheduler.wait(POLL_SECONDS):
            seed = result.key.seed
            if result.status.done:
                report.finished.append(seed)
                accuracy = (result.metrics or {}).get(column)
                score = f", {column} {accuracy:.4f}" if accuracy is not None else ""
                how = "was found finished" if result.status is Status.REUSED else "finished"
                echo(f"seed {seed} {how} in {result.seconds:.0f} s{score}")
                continue
            report.failed[seed] = result
            echo(f"seed {seed} FAILED: {result.error}")
            if result.detail:
                echo(result.detail.rstrip())
            if result.stops_launch and not stopping:
                stopping = True
                started = scheduler.activity()
                waiting = [key for key in scheduler.running if key not in started]
                for key in waiting:
                    scheduler.cancel(key)
                    report.not_run.append(key.seed)
                if waiting:
                    echo(f"stopping: {len(waiting)} seeds that had not started are not run")
        if time.monotonic() - last_status >= STATUS_SECONDS:
            last_status = time.monotonic()
            echo(_status(scheduler, report, len(todo)))


def _status(scheduler: Scheduler, report: LaunchReport, total: int) -> str:
    activity = scheduler.activity()
    shown = []
    for key, beat in sorted(activity.items(), key=lambda item: item[0].seed)[:4]:
        progress = f" {beat.step}/{beat.total}" if beat.phase == "training" else ""
        shown.append(f"{key} {beat.phase}{progress}")
    more = f", +{len(activity) - 4} more" if len(activity) > 4 else ""
    running = f" ({'; '.join(shown)}{more})" if shown else ""
    waiting = len(scheduler.running) - len(activity)
    return (
        f"[{time.strftime('%H:%M:%S')}] {len(report.finished)}/{total} finished, "
        f"{len(activity)} running{running}, {waiting} waiting, {len(report.failed)} failed"
    )


def _reconcile_runs(config: Config, seeds: list[int], study_run: str) -> None:
    """The folder is the truth: a published seed's run ends FINISHED, and any other run of
    that seed under the study's run still RUNNING (an attempt lost in a window that fencing
    cannot see into, such as between creating its run and recording it) ends KILLED."""
    if not seeds:
        return
    store = tracking.open_store(config)
    published = {}
    for seed in seeds:
        job = SeedJob(Path(config.output_dir), seed)
        if job.finished_metrics() is not None:
            published[tracking.seed_run_name(config, seed)] = job.finished_run_id()
    for run_id in published.values():
        if store.client.get_run(run_id).info.status != tracking.FINISHED:
            tracking.TrackedRun(store.client, run_id).end(
                tracking.FINISHED, {"seedvar.reconciled": "true"}
            )
    running = store.client.search_runs(
        [store.experiment_id],
        f"tags.`{tracking.PARENT_TAG}` = '{study_run}' and attributes.status = 'RUNNING'",
    )
    for run in running:
        if run.info.run_name in published and run.info.run_id != published[run.info.run_name]:
            tracking.TrackedRun(store.client, run.info.run_id).end(
                tracking.KILLED, {"seedvar.orphaned": "true"}
            )
