"""The driver of every command that trains seeds (`seedvar launch`, `dvc repro`, `seedvar train`;
`seedvar sweep` through sweep/trial.py): the study's lease, a backend (this process, or Ray), the
runs killed drivers left RUNNING ended KILLED; and the launch, its progress and its report."""

from __future__ import annotations

import json
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

from seedvar import tracking
from seedvar.config import Config
from seedvar.declared import primary_column
from seedvar.errors import RayUnavailableError, SeedvarError
from seedvar.files import write_atomically
from seedvar.processes import end_recorded, started_at
from seedvar.project import keep_of, prepared_data
from seedvar.scale import scheduler as tasks
from seedvar.scale.cluster import (
    INSTALL,
    SeedResources,
    import_ray,
    ray_session,
    seed_resources,
    this_machine,
)
from seedvar.scale.folders import FIX, Token, shared_with_nodes
from seedvar.scale.scheduler import InProcess
from seedvar.scale.stacking import require_stackable
from seedvar.seeds.adopt import adopt
from seedvar.seeds.finished import RUN_STATE
from seedvar.seeds.job import IfFinished, SeedJob
from seedvar.seeds.result import SeedResult, Status, TaskKey

POLL_SECONDS = 1.0
STATUS_SECONDS = 30.0
DRIVER_TAG = "seedvar.driver"  # on every seed run: the driver that runs it (see `driver_id`)
# where seeds train: in this process; as the machine (or the cluster at ray.address) holds; Ray
Where = Literal["here", "auto", "ray"]


class DriverRunning(SeedvarError):
    """Another driver works on the same study right now."""


def driver_id(pid: int | None = None) -> str:
    """`host:pid:start` of a process (this one by default): names it beyond its pid's reuse."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{started_at(pid) or '?'}"


@contextmanager
def lease(folder: Path, study: str, command: str) -> Iterator[Path]:
    """Hold the lease of study `study` (its hash) in `folder` while the block runs, else
    DriverRunning naming `command`, what the holder runs. Ends what a killed driver's local Ray
    left running; yields where a local Ray records its processes."""
    folder.mkdir(parents=True, exist_ok=True)
    holder = folder / f"driver-{study}.json"
    try:
        locked = FileLock(folder / f"driver-{study}.lock", blocking=False).acquire()
    except Timeout:
        try:
            found = json.loads(holder.read_text())
            who = "`{command}` (pid {pid} on {host}, since {since})".format(**found)
        except (OSError, ValueError, KeyError):
            who = f"another process (it holds {holder.with_suffix('.lock')})"
        raise DriverRunning(
            f"this study is being trained by {who}; wait for it to finish, or stop it, "
            "then run this command again"
        ) from None
    with locked:
        holding = {"host": socket.gethostname(), "pid": os.getpid(), "command": command}
        write_atomically(
            holder, json.dumps({**holding, "since": time.strftime("%Y-%m-%d %H:%M:%S")})
        )
        record = folder / f"ray-{study}.json"
        end_recorded(record)
        try:
            yield record
        finally:
            holder.unlink(missing_ok=True)


def task_config(config: Config) -> Config:
    """The config for the seeds, its tracking store's URI resolved here (a task's node would
    resolve a relative SQLite path against its own folder)."""
    uri = tracking.tracking_uri(config.tracking)
    return config.model_copy(update={"tracking": config.tracking.model_copy(update={"uri": uri})})


def seed_task(key: TaskKey, config: Config, **more: Any) -> tasks.SeedTask:
    """A seed of this driver, run in the project folder, its run tagged with the driver."""
    tags = {DRIVER_TAG: driver_id(), **more.pop("run_tags", {})}
    keep = str(keep_of(Path(config.output_dir)).resolve())
    project = config.ray.project_dir or str(Path.cwd())
    return tasks.SeedTask(key, config, project, keep, run_tags=tags, **more)


@contextmanager
def backend(
    config: Config, where: Where, seeds: int, record: Path, echo: Callable[[str], None]
) -> Iterator[InProcess]:
    """The scheduler of `seeds` tasks (each a seed, or a group of seeds trained stacked): this
    process, one after another, where `where` is "here" (or "auto" and the machine holds one
    task at a time, or Ray is not installed); else Ray (at ray.address, or a local Ray whose
    processes are listed in `record`)."""
    tracking.check_reachable(config)
    with ExitStack() as stack:
        scheduler = InProcess(config.ray, None, echo)  # "here": torch's own thread count
        if where == "auto" and config.ray.address is None:
            machine = this_machine()
            resources = seed_resources(config, machine)
            scheduler = InProcess(config.ray, resources.cpus, echo)
            at_once = seeds > 1 and machine.slots(resources) > 1
            where = "ray" if at_once and _ray_installed(echo) else "here"
        if where != "here":
            ray, cluster = import_ray(), stack.enter_context(ray_session(config.ray, record))
            resources = seed_resources(config, cluster)
            echo(f"{cluster.describe()}, {resources.describe()}")
            slots, one_gpu = cluster.slots(resources), cluster.one_gpu_per_node
            tracking.check_writers(config, min(seeds, slots))
            scheduler = tasks.Scheduler(ray, config.ray, resources, echo, one_gpu, slots)
            if cluster.address is not None:  # machines of their own, perhaps with their own disks
                shared = nodes_share_folders(ray, config, resources, echo)
                scheduler.token = stack.enter_context(shared)
        end_orphaned(config)
        try:
            yield scheduler
        finally:
            scheduler.cancel_all()
            end_orphaned(config, driver_id())  # this driver's cancelled seeds' runs


def nodes_share_folders(
    ray: Any, config: Config, resources: SeedResources, echo: Callable[[str], None]
) -> AbstractContextManager[Token]:
    """ConfigError, before any seed trains, where a node that can run a seed (`resources`) does
    not see the keep and output_dir as this driver does (scale/folders.py); yields the token the
    seeds' tasks check again as they start."""
    keep = keep_of(Path(config.output_dir)).resolve()
    project = config.ray.project_dir or str(Path.cwd())  # as `seed_task` gives it
    cpus, gpus = resources.cpus, resources.gpus
    return shared_with_nodes(ray, cpus, gpus, project, keep, config.output_dir, echo)


def _ray_installed(echo: Callable[[str], None]) -> bool:
    try:
        import_ray()
    except RayUnavailableError:
        echo(f"Ray is not installed: seeds train one at a time ({INSTALL} trains them at once)")
        return False
    return True


def end_orphaned(config: Config, driver: str | None = None) -> None:
    """End KILLED the seed runs left RUNNING by attempts that no longer run: those of `driver`,
    else those of every driver on this host that is gone. A seed resumed continues its run."""
    database = tracking.sqlite_file(tracking.tracking_uri(config.tracking))
    if database is not None and not database.is_file():
        return  # a new store (made by the first seed, once it has loaded its model and sets)
    store = tracking.open_store(config)
    running = store.client.search_runs(
        [store.experiment_id],
        f"tags.`{DRIVER_TAG}` LIKE '%:%' and attributes.status = 'RUNNING'",
    )
    for run in running:
        held_by = run.data.tags[DRIVER_TAG]  # a `driver_id`: gone if of this host, not running
        host, pid, _ = held_by.rsplit(":", 2)
        gone = host == socket.gethostname() and driver_id(int(pid)) != held_by
        if held_by == driver or (driver is None and gone):
            tracking.TrackedRun(store.client, run.info.run_id).end(
                tracking.KILLED, {"seedvar.interrupted": "true"}
            )


@dataclass
class LaunchReport:
    """What a launch did, seed by seed (`as_dict`: as `seedvar launch --report` writes it)."""

    finished: list[int] = field(default_factory=list)  # trained (or completed) now
    already: list[int] = field(default_factory=list)  # finished before this launch
    failed: dict[int, SeedResult] = field(default_factory=dict)
    not_run: list[int] = field(default_factory=list)  # stopped after a failure of the study
    retried: dict[int, list[tasks.Cause]] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        lists = {name: sorted(getattr(self, name)) for name in ("finished", "already", "not_run")}
        failed = {s: {"error": r.error, "error_type": r.error_type} for s, r in self.failed.items()}
        retried = dict(sorted(self.retried.items()))
        ordered = {"failed": dict(sorted(failed.items())), "retried": retried}
        return {**lists, **ordered, "seconds": round(self.seconds, 1)}

    @property
    def ok(self) -> bool:
        return not self.failed and not self.not_run

    def failure_lines(self) -> list[str]:
        """One line per error (its seeds together), then the seeds not run."""
        by_error: dict[str, list[int]] = {}
        for seed, result in sorted(self.failed.items()):
            by_error.setdefault(result.error or "unknown error", []).append(seed)
        lines = [f"{_seeds(seeds)}: {error}" for error, seeds in by_error.items()]
        if self.not_run:
            lines.append(f"{_seeds(self.not_run)}: not run (stopped after the failure above)")
        return lines


def _seeds(seeds: list[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def launch(
    config: Config,
    prepared: Path | None = None,
    echo: Callable[[str], None] = print,
    command: str = "seedvar launch",
    seeds: list[int] | None = None,
    where: Where = "auto",
    if_finished: IfFinished = "reuse",
) -> LaunchReport:
    """Train every seed of `seeds` (default: `config.seeds`) not finished with this recipe and
    publish them all into output_dir; `command`: what the user ran. `if_finished`, for a seed
    finished with this recipe: "reuse" (publish it), "refuse" (OutputExistsError), "replace"
    (train it again). Seeds of another recipe stay kept, for when that recipe comes back. With
    `train.seeds_per_process` K > 1, each task trains K of them stacked (`groups`)."""
    started = time.monotonic()
    seeds = config.seeds if seeds is None else seeds
    require_stackable(config)
    if config.ray.address is not None and where != "here":
        import_ray()  # one line before any work where the cluster cannot be used
    report = LaunchReport()
    config = task_config(config)
    keep = keep_of(Path(config.output_dir)).resolve()
    SeedJob(Path(config.output_dir), seeds[0], keep=keep).check_writable()
    data = prepared_data(prepared)  # the sets' fingerprints: a seed on other data is another
    with lease(keep, config.study_hash(), command) as record:
        for seed in seeds:
            job = SeedJob(Path(config.output_dir), seed, keep=keep, data=data)
            entry = job.finished_dir(config.with_seed(seed)) or adopt(job, config.with_seed(seed))
            if entry is not None and if_finished != "replace":
                job.refuse_finished(config.with_seed(seed), force=if_finished == "reuse")
                job.publish_view(entry)
                report.already.append(seed)
        todo = [seed for seed in seeds if seed not in report.already]
        if not todo:
            return report
        together = groups(todo, config.train.seeds_per_process)
        with backend(config, where, len(together), record, echo) as scheduler:
            config, study_run = scheduler.resolved(config), None
            require_stackable(config)  # its precision as chosen where the seeds train
            if scheduler.at_once > 1:  # else each seed, one after another, finds or makes it
                study_run = tracking.study_run_id(tracking.open_store(config), config)
            per_process = config.train.seeds_per_process
            stacked = f" ({per_process} a process, stacked)" if per_process > 1 else ""
            echo(
                f"{len(todo)} of {len(seeds)} seeds to train ({len(report.already)} finished "
                f"before), up to {scheduler.at_once * per_process} at once{stacked}; outputs in "
                f"{config.output_dir}, MLflow {config.tracking.uri}"
                + (f" (study run {study_run})" if study_run else "")
            )
            more = {"prepared": prepared and str(prepared), "if_finished": if_finished}
            for first, *rest in together:
                group = tuple((TaskKey(seed), config.with_seed(seed)) for seed in rest)
                task = seed_task(
                    TaskKey(first),
                    config.with_seed(first),
                    parent_run_id=study_run,
                    group=group,
                    **more,
                )
                scheduler.submit(task)
            take = partial(_take, scheduler, report, echo)
            drive(scheduler, take, lambda: len(todo), primary_column(config.task), echo)
            report.retried = {key.seed: why for key, why in scheduler.retried.items()}
    report.seconds = time.monotonic() - started
    return report


def groups(seeds: list[int], size: int) -> list[list[int]]:
    """`seeds` in groups of `size` (the last may be smaller), in their order: one task each."""
    return [seeds[start : start + size] for start in range(0, len(seeds), size)]


def _take(
    scheduler: InProcess, report: LaunchReport, echo: Callable[[str], None], result: SeedResult
) -> None:
    """Count a seed's result in `report`; after a failure that would hit every seed (bad data,
    bad config), cancel the seeds that have not started."""
    seed = result.key.seed
    if result.status.done:
        report.finished.append(seed)
        return
    report.failed[seed] = result
    echo(f"seed {seed} FAILED: {result.error}")
    if result.detail:
        echo(result.detail.rstrip())
    if result.stops_launch and not report.not_run:
        waiting = scheduler.cancel_waiting(list(scheduler.running))
        report.not_run += [key.seed for key in waiting]
        if waiting:
            echo(f"stopping: {len(waiting)} seeds that had not started are not run")


def drive(
    scheduler: InProcess,
    take: Callable[[SeedResult], None],
    total: Callable[[], int],
    column: str,
    echo: Callable[[str], None],
) -> None:
    """Until no seed runs: show each seed's result as it comes back (a finished one with its
    `column`) and hand it to `take`; every STATUS_SECONDS, a status line (`total`: the seeds to
    run, those ended included)."""
    started = last_status = time.monotonic()
    first_steps: dict[tuple[TaskKey, int], int] = {}
    ended: Counter[Status] = Counter()
    while scheduler.running:
        for result in map(published_here, scheduler.wait(POLL_SECONDS)):
            ended[result.status] += 1
            if result.status.done:
                echo(finished_line(result, column))
            take(result)
        if time.monotonic() - last_status >= STATUS_SECONDS and scheduler.running:
            last_status = time.monotonic()
            echo(_status(scheduler, ended, total(), last_status - started, first_steps))


def published_here(result: SeedResult) -> SeedResult:
    """`result`; but a seed its task says is finished and that this driver does not see
    published where the task published it (its folder, from the same MLflow run), as failed: a
    node with a disk of its own published it there (scale/folders.py checks the nodes first)."""
    if not result.status.done or result.seed_dir is None:
        return result
    try:
        recorded = json.loads((result.seed_dir / RUN_STATE).read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded is not None and recorded == (result.run_id or recorded):
        return result
    error = (
        f"{result.key} finished on its node, but this driver does not see it in "
        f"{result.seed_dir} (the node published it on a disk of its own); {FIX}"
    )
    return replace(result, status=Status.FAILED, error=error, error_type="ConfigError")


def finished_line(result: SeedResult, column: str) -> str:
    """`seed 3 finished in 700 s, MNLI dev acc. 0.8412` (or `was found finished`)."""
    accuracy = (result.metrics or {}).get(column)
    score = f", {column} {accuracy:.4f}" if accuracy is not None else ""
    how = "was found finished" if result.status is Status.REUSED else "finished"
    return f"{result.key} {how} in {result.wall_seconds:.0f} s{score}"


def _status(
    scheduler: InProcess,
    ended: Counter[Status],
    total: int,
    elapsed: float,
    first_steps: dict[tuple[TaskKey, int], int],
) -> str:
    """One line: seeds ended (`ended`: by how), running (with steps), waiting, the time so far and
    left; the pace counts only steps trained since this driver began (`first_steps`: each
    submission's first)."""
    activity = scheduler.activity()
    size = {key: scheduler.size(key) for key in scheduler.running}  # a group's seeds, at once
    shown = []
    for key, found in sorted(activity.items(), key=lambda item: item[0].seed)[:4]:
        steps = f" {found.step}/{found.total}" if found.phase == "training" else ""
        together = f" (+{size[key] - 1} stacked)" if size[key] > 1 else ""
        shown.append(f"{key}{together} {found.phase}{steps}")
    more = f", +{len(activity) - 4} more" if len(activity) > 4 else ""
    running = f" ({'; '.join(shown)}{more})" if shown else ""
    waiting = sum(size[key] for key in scheduler.running if key not in activity)
    done, finished = sum(ended.values()), ended[Status.FINISHED] + ended[Status.REUSED]
    failed, stopped = ended[Status.FAILED] + ended[Status.SUPERSEDED], done - finished
    stopped -= failed  # pruned, or their trial ended on another seed
    trained = {key: p for key, p in activity.items() if p.total}  # evaluating keeps its steps
    first = {key: first_steps.setdefault((key, p.submission), p.step) for key, p in trained.items()}
    # seeds' worth of work done here and still to do (training steps stand for it); a seed
    # found finished took none
    here: float = done - ended[Status.REUSED]
    here += sum((p.step - first[key]) / p.total * size[key] for key, p in trained.items())
    to_do = total - done - sum(p.step / p.total * size[key] for key, p in trained.items())
    estimate = here >= 0.25 and to_do > 0  # none while the last seeds evaluate
    left = f", about {_duration(elapsed * to_do / here)} left" if estimate else ""
    return (
        f"[{time.strftime('%H:%M:%S')}] {finished}/{total} finished, "
        f"{sum(size[key] for key in activity)} running"
        f"{running}, {waiting} waiting, {failed} failed"
        + (f", {stopped} stopped" if stopped else "")
        + f"; {_duration(elapsed)} so far{left}"
    )


def _duration(seconds: float) -> str:
    """`42 s`, `17 min`, `2 h 5 min`."""
    minutes = round(seconds / 60)
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60} min"
