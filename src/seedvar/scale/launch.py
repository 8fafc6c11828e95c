"""`seedvar launch`: the study's driver. It holds the study's lease, trains every seed that has
not finished with this recipe, as many at once as the machine (or the Ray cluster at
`ray.address`) holds, shows progress as it goes, publishes each finished seed into output_dir
and lists what failed at the end. It is what `dvc repro` runs (the `train` stage).

Seeds run as Ray tasks (the same `run_seed` as `seedvar train`, with `--reuse`) on a local Ray
or a cluster, or one after another in this process where Ray is not installed or the machine
holds one seed at a time. Each writes to output_dir and its work folder (shared storage on a
cluster) and logs to the tracking store, its run a child of the study's run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from seedvar import tracking
from seedvar.config import Config
from seedvar.declared import primary_column
from seedvar.errors import RayUnavailableError
from seedvar.processes import end_recorded
from seedvar.project import prepared_data, work_dir_of
from seedvar.scale.cluster import (
    INSTALL,
    chosen_where_seeds_run,
    import_ray,
    ray_session,
    seed_resources,
    this_machine,
)
from seedvar.scale.lease import DRIVER_TAG, driver_gone, driver_id, lease
from seedvar.scale.protocol import Cause, SeedTask, Status, TaskKey, TaskResult
from seedvar.scale.scheduler import InProcess, Scheduler
from seedvar.seeds.adopt import adopt
from seedvar.seeds.job import IfFinished, SeedJob
from seedvar.training.device import on_this_machine

POLL_SECONDS = 1.0
STATUS_SECONDS = 30.0
Where = Literal["here", "auto"]  # where seeds train: in this process, or as the machine holds


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
    echo: Callable[[str], None] = print,
    command: str = "seedvar launch",
    seeds: list[int] | None = None,
    where: Where = "auto",
    if_finished: IfFinished = "reuse",
) -> LaunchReport:
    """Train every seed of `seeds` (default: `config.seeds`) that has not finished with this
    recipe and publish every seed into output_dir; `command`: what the user ran (for a second
    driver's message). `if_finished`, for a seed finished with this recipe: "reuse" (publish it),
    "refuse" (OutputExistsError), "replace" (train it again). Seeds finished with another recipe
    stay kept (and come back when that recipe does)."""
    started = time.monotonic()
    seeds = config.seeds if seeds is None else seeds
    if config.ray.address is not None and where != "here":
        import_ray()  # one line before any work where the cluster cannot be used
    report = LaunchReport()
    config = task_config(config)
    store = work_dir_of(Path(config.output_dir)).resolve()
    record = store / f"ray-{config.study_hash()}.json"  # the local Ray of a killed driver
    SeedJob(Path(config.output_dir), seeds[0], store=store).check_writable()
    data = prepared_data(prepared)  # the sets' fingerprints: a seed on other data is another
    with lease(store, config.study_hash(), command):
        end_recorded(record)
        for seed in seeds:
            job = SeedJob(Path(config.output_dir), seed, store=store, data=data)
            entry = job.stored(config.with_seed(seed)) or adopt(job, config.with_seed(seed))
            if entry is not None and if_finished != "replace":
                job.refuse_finished(config.with_seed(seed), force=if_finished == "reuse")
                job.show(entry)
                report.already.append(seed)
        todo = [seed for seed in seeds if seed not in report.already]
        if not todo:
            return report
        tracking.check_reachable(config)
        with _executor(config, where, len(todo), record, echo) as (scheduler, at_once, config):
            study_run = tracking.study_run_id(tracking.open_store(config), config)
            end_orphaned(config)  # runs of drivers that were killed
            echo(
                f"{len(todo)} of {len(seeds)} seeds to train ({len(report.already)} "
                f"finished before), up to {at_once} at once; outputs in {config.output_dir}, "
                f"MLflow {tracking.tracking_uri(config.tracking)} (study run {study_run})"
            )
            project_dir = config.ray.project_dir or str(Path.cwd())
            for seed in todo:
                task = SeedTask(
                    key=TaskKey(seed),
                    config=config.with_seed(seed),
                    project_dir=project_dir,
                    store=str(store),
                    prepared=str(prepared) if prepared else None,
                    parent_run_id=study_run,
                    run_tags={DRIVER_TAG: driver_id()},
                    if_finished=if_finished,
                )
                scheduler.submit(task)
            try:
                _drive(scheduler, report, todo, primary_column(config.task), echo)
            finally:
                scheduler.cancel_all()
                end_orphaned(config, driver_id())  # this driver's cancelled tasks' runs
            report.retried = {key.seed: why for key, why in scheduler.retried.items()}
    report.seconds = time.monotonic() - started
    return report


@contextmanager
def _executor(
    config: Config, where: Where, todo: int, record: Path, echo: Callable[[str], None]
) -> Iterator[tuple[Scheduler | InProcess, int, Config]]:
    """This process, one seed after another, where `where` is "here"; else Ray where it can
    train two or more seeds at once (or ray.address names a cluster), else this process; with
    how many seeds run at once, and the config with its "auto" precisions as they resolve
    where the seeds run."""
    if where == "here":  # torch's own thread count, as in any process of its own
        yield InProcess(config.ray, None, echo), 1, on_this_machine(config)
        return
    local = config.ray.address is None
    machine = this_machine()
    resources = seed_resources(config, machine) if local else None
    threads = resources.threads if resources else 1
    if resources is not None and (todo < 2 or machine.slots(resources) < 2):
        yield InProcess(config.ray, threads, echo), 1, on_this_machine(config)
        return
    try:
        ray = import_ray()
    except RayUnavailableError:
        if not local:
            raise
        echo(f"Ray is not installed: seeds train one at a time ({INSTALL} trains them at once)")
        yield InProcess(config.ray, threads, echo), 1, on_this_machine(config)
        return
    with ray_session(config.ray, record) as cluster:
        resources = seed_resources(config, cluster)
        echo(f"{cluster.describe()}, {resources.describe()}")
        chosen = chosen_where_seeds_run(ray, config, resources)
        scheduler = Scheduler(ray, config.ray, resources, echo, cluster.one_gpu_per_node)
        yield scheduler, cluster.slots(resources), chosen


def _drive(
    scheduler: Scheduler | InProcess,
    report: LaunchReport,
    todo: list[int],
    column: str,
    echo: Callable[[str], None],
) -> None:
    """Collect results until every seed has one (each shown with its `column`); after a
    failure that would hit every seed (bad data, bad config), cancel the seeds that have not
    started."""
    started = last_status = time.monotonic()
    stopping = False
    first_steps: dict[tuple[TaskKey, int], int] = {}
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
                begun = scheduler.activity()
                waiting = [key for key in scheduler.running if key not in begun]
                for key in waiting:
                    scheduler.cancel(key)
                    report.not_run.append(key.seed)
                if waiting:
                    echo(f"stopping: {len(waiting)} seeds that had not started are not run")
        if time.monotonic() - last_status >= STATUS_SECONDS and scheduler.running:
            last_status = time.monotonic()
            line = _status(scheduler, report, len(todo), last_status - started, first_steps)
            echo(line)


def _status(
    scheduler: Scheduler | InProcess,
    report: LaunchReport,
    total: int,
    elapsed: float,
    first_steps: dict[tuple[TaskKey, int], int],
) -> str:
    """One line: how many seeds are done, running (with their steps) and waiting, the time
    so far and an estimate of the time left. The estimate's pace counts only the steps trained
    since this driver began (`first_steps` keeps each submission's step when first seen): a seed
    resumed from its checkpoint did the rest before."""
    activity = scheduler.activity()
    shown = []
    for key, found in sorted(activity.items(), key=lambda item: item[0].seed)[:4]:
        steps = f" {found.step}/{found.total}" if found.phase == "training" else ""
        shown.append(f"{key} {found.phase}{steps}")
    more = f", +{len(activity) - 4} more" if len(activity) > 4 else ""
    running = f" ({'; '.join(shown)}{more})" if shown else ""
    waiting = len(scheduler.running) - len(activity)
    done = len(report.finished) + len(report.failed)
    trained = {key: p for key, p in activity.items() if p.total}  # evaluating keeps its steps
    first = {key: first_steps.setdefault((key, p.submission), p.step) for key, p in trained.items()}
    # seeds' worth of work done here and still to do (training steps stand for it)
    here = done + sum((p.step - first[key]) / p.total for key, p in trained.items())
    to_do = total - done - sum(p.step / p.total for p in trained.values())
    estimate = here >= 0.25 and to_do > 0  # none while the last seeds evaluate
    left = f", about {_duration(elapsed * to_do / here)} left" if estimate else ""
    return (
        f"[{time.strftime('%H:%M:%S')}] {len(report.finished)}/{total} finished, "
        f"{len(activity)} running{running}, {waiting} waiting, {len(report.failed)} failed; "
        f"{_duration(elapsed)} so far{left}"
    )


def _duration(seconds: float) -> str:
    """`42 s`, `17 min`, `2 h 5 min`."""
    minutes = round(seconds / 60)
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60} min"


def end_orphaned(config: Config, driver: str | None = None) -> None:
    """End KILLED the seed runs left RUNNING by attempts that no longer run: those of
    `driver` (this driver's cancelled tasks), else those of every driver on this host that
    is gone (killed with SIGKILL, which leaves no chance to end them). An attempt that
    resumes such a seed continues its run."""
    database = tracking.sqlite_file(tracking.tracking_uri(config.tracking))
    if database is not None and not database.is_file():
        return  # a new store: nothing to end
    store = tracking.open_store(config)
    running = store.client.search_runs(
        [store.experiment_id],
        f"tags.`{DRIVER_TAG}` LIKE '%:%' and attributes.status = 'RUNNING'",
    )
    for run in running:
        held_by = run.data.tags[DRIVER_TAG]
        if held_by == driver or (driver is None and driver_gone(held_by)):
            tracking.TrackedRun(store.client, run.info.run_id).end(
                tracking.KILLED, {"seedvar.interrupted": "true"}
            )
