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

from seedvar import tracking
from seedvar.config import Config
from seedvar.errors import OutputExistsError
from seedvar.metrics import MNLI_MATCHED
from seedvar.scale.ray_tasks import (
    Outcome,
    SeedTask,
    chosen_where_seeds_run,
    import_ray,
    ray_session,
    seed_resources,
)
from seedvar.scale.scheduler import Scheduler
from seedvar.study.job import SeedJob

POLL_SECONDS = 1.0
STATUS_SECONDS = 60.0
# failures that would recur in every seed: bad input, a store or disk out of reach
STUDY_WIDE = ("ConfigError", "DataError", "ModelError", "TrackingError", "DiskError")


def hits_every_seed(outcome: Outcome) -> bool:
    """Whether a failure says the other seeds will fail too: bad input, or an error seedvar
    does not know (a bug, a broken environment). A diverged seed, a lost node, a seed that
    stalled too often, say nothing about the others."""
    return outcome.error_type in STUDY_WIDE or outcome.detail is not None


@dataclass
class LaunchReport:
    """What a launch did, seed by seed."""

    finished: list[int] = field(default_factory=list)  # trained (or completed) now
    already: list[int] = field(default_factory=list)  # finished before this launch
    failed: dict[int, Outcome] = field(default_factory=dict)
    not_run: list[int] = field(default_factory=list)  # stopped after a failure of the study
    retried: dict[int, list[str]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.not_run

    def failure_lines(self) -> list[str]:
        """One line per failed seed (seeds with the same error share a line), then those not
        run."""
        by_error: dict[str, list[int]] = {}
        for seed, outcome in sorted(self.failed.items()):
            by_error.setdefault(outcome.error or "unknown error", []).append(seed)
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
        study_run = tracking.study_run_id(*tracking.open_store(config), config)
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
                key=f"seed {seed}",
                config=config.with_seed(seed),
                project_dir=project_dir,
                prepared=str(prepared) if prepared else None,
                parent_run_id=study_run,
            )
            scheduler.submit(task)
        try:
            _drive(scheduler, report, todo, echo)
        except BaseException:
            scheduler.cancel_all()
            raise
        report.retried = {int(k.split()[-1]): why for k, why in scheduler.retried.items()}
    _reconcile_runs(config, report.finished, study_run)
    report.seconds = time.monotonic() - started
    return report


def _drive(scheduler: Scheduler, report: LaunchReport, todo: list[int], echo) -> None:
    """Collect outcomes until every seed has one; after a failure that would hit every seed
    (bad data, bad config), cancel the seeds that have not started."""
    last_status = time.monotonic()
    stopping = False
    while len(scheduler):
        for outcome in scheduler.wait(POLL_SECONDS):
            seed = outcome.seed
            if outcome.status in ("finished", "reused"):
                report.finished.append(seed)
                accuracy = (outcome.metrics or {}).get(MNLI_MATCHED)
                score = f", MNLI-m {accuracy:.4f}" if accuracy is not None else ""
                how = "finished" if outcome.status == "finished" else "was found finished"
                echo(f"seed {seed} {how} in {outcome.seconds:.0f} s{score}")
            else:
                report.failed[seed] = outcome
                echo(f"seed {seed} FAILED: {outcome.error}")
                if outcome.detail:
                    echo(outcome.detail.rstrip())
                if hits_every_seed(outcome) and not stopping:
                    stopping = True
                    started = scheduler.started()
                    waiting = [key for key in scheduler.running if key not in started]
                    for key in waiting:
                        scheduler.cancel(key)
                        report.not_run.append(int(key.split()[-1]))
                    if waiting:
                        echo(f"stopping: {len(waiting)} seeds that had not started are not run")
        if time.monotonic() - last_status >= STATUS_SECONDS:
            last_status = time.monotonic()
            echo(_status(scheduler, report, len(todo)))


def _status(scheduler: Scheduler, report: LaunchReport, total: int) -> str:
    activity = scheduler.activity()
    shown = []
    for key, info in sorted(activity.items())[:4]:
        progress = f" {info['step']}/{info['total']}" if info.get("phase") == "training" else ""
        shown.append(f"{key} {info['phase']}{progress}")
    more = f", +{len(activity) - 4} more" if len(activity) > 4 else ""
    running = f" ({'; '.join(shown)}{more})" if shown else ""
    waiting = len(scheduler) - len(activity)
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
    client, experiment = tracking.open_store(config)
    published = {}
    for seed in seeds:
        job = SeedJob(Path(config.output_dir), seed)
        if job.finished_metrics() is not None:
            published[tracking.seed_run_name(config, seed)] = job.finished_run_id()
    for run_id in published.values():
        if client.get_run(run_id).info.status != tracking.FINISHED:
            tracking.TrackedRun(client, run_id).end(
                tracking.FINISHED, {"seedvar.reconciled": "true"}
            )
    running = client.search_runs(
        [experiment],
        f"tags.`{tracking.PARENT_TAG}` = '{study_run}' and attributes.status = 'RUNNING'",
    )
    for run in running:
        if run.info.run_name in published and run.info.run_id != published[run.info.run_name]:
            tracking.TrackedRun(client, run.info.run_id).end(
                tracking.KILLED, {"seedvar.orphaned": "true"}
            )
