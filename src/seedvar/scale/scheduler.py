"""Seed tasks (an attempt at a seed, or at a group of seeds trained stacked; each seed's ending
returned as a SeedResult) and the schedulers that see each seed to one end: `InProcess` in the
driver, `Scheduler` on Ray. A seed runs again (and resumes) at most `ray.max_retries` times: lost
(Ray reruns it; the driver says so in one line as the new attempt takes the work over), stalled
(no batch in its progress for `ray.stall_seconds`: the longest stuck is cancelled, the others'
clocks restarted, as it may hold them up; should it wake, it finds its work taken over) or
failed with a passing error (a tracking store still locked after the write's own retries)."""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seedvar import progress, tracking
from seedvar.config import Config, RayConfig
from seedvar.errors import ConfigError, SeedvarError, Superseded, first_line, transient
from seedvar.progress import Progress
from seedvar.project import prepared_data
from seedvar.scale.cluster import SeedResources
from seedvar.scale.folders import Token, refusal, unseen
from seedvar.seeds.job import PROGRESS, IfFinished, SeedJob, attempt_record
from seedvar.seeds.result import SeedResult, Status, TaskKey
from seedvar.training.device import checked_on_this_machine, on_this_machine

if TYPE_CHECKING:  # the driver never trains: no Lightning there
    import lightning as L


class Cause(StrEnum):
    """Why the driver submitted a seed again (a lost one, Ray submits again itself)."""

    STALLED = "stalled"
    TRANSIENT = "transient"


@dataclass(frozen=True)
class SeedTask:
    """One seed to run (`key`), its work kept in the keep `keep` (absolute); with a `group`, the
    seeds trained stacked with it in its process (`train.seeds_per_process`), each its key and
    config. `callbacks` makes more Lightning callbacks where it trains (a trial's); `threads`:
    torch's (None: its own)."""

    key: TaskKey
    config: Config
    project_dir: str
    keep: str
    prepared: str | None = None
    parent_run_id: str | None = None
    run_tags: dict[str, str] = field(default_factory=dict)
    callbacks: Callable[[], list[L.Callback]] | None = None
    if_finished: IfFinished = "reuse"
    submission: int = 1  # the driver's submissions of this seed so far
    threads: int | None = 1
    token: Token | None = None  # on a cluster: what the driver wrote into the keep
    group: tuple[tuple[TaskKey, Config], ...] = ()

    @property
    def members(self) -> list[tuple[TaskKey, Config]]:
        """Its seeds, each its key and config: its own, then its group's."""
        return [(self.key, self.config), *self.group]

    @property
    def keys(self) -> list[TaskKey]:
        return [key for key, _ in self.members]

    def only(self, keys: Iterable[TaskKey]) -> SeedTask:
        """This task for those of its seeds that `keys` names."""
        wanted = set(keys)
        (key, config), *group = [member for member in self.members if member[0] in wanted]
        return replace(self, key=key, config=config, group=tuple(group))

    def __str__(self) -> str:
        """`seed 3`, or a group's `seed 3, seed 4`."""
        return ", ".join(map(str, self.keys))


def run_task(task: SeedTask, where: dict[str, str] | None = None) -> list[SeedResult]:
    """One attempt at a task's seeds, in the project folder: its seed alone (`run_seed`), or
    its group's trained stacked (seeds/group.py); each seed's result, its errors included;
    `where`: its Ray node and task (None: the driver's process), noted in each attempt.json."""
    import torch

    started = time.perf_counter()
    prepared = Path(task.prepared) if task.prepared else None
    data, keep = prepared_data(prepared), Path(task.keep)
    jobs = [SeedJob.of(c, keep=keep, data=data, note=where or {}) for _, c in task.members]
    try:
        try:  # where the config's relative paths point on every node
            os.chdir(task.project_dir)
        except OSError as error:
            raise ConfigError(
                f"the project folder {task.project_dir} cannot be entered on node "
                f"{(where or {}).get('ray_node', 'here')} ({error.strerror}); put the project "
                "on a file system that every node mounts at the same path, or set "
                "ray.project_dir to where the nodes see it"
            ) from None
        if task.token and (missing := unseen(task.token)):  # a node that joined since the check
            node = f"{socket.gethostname()} (Ray node {(where or {}).get('ray_node', '?')[:8]})"
            raise refusal([node], missing, task.token)
        if task.threads:
            torch.set_num_threads(task.threads)
        with progress.reporting(jobs[0].work_dir / PROGRESS, jobs[0].attempt_id, task.submission):
            outcomes = _outcomes(task, prepared, jobs)
    except Exception as error:
        outcomes = [error] * len(jobs)
    seconds = time.perf_counter() - started
    return [
        _result(key, job.attempt_id, outcome, seconds)
        for key, job, outcome in zip(task.keys, jobs, outcomes, strict=True)
    ]


def _outcomes(
    task: SeedTask, prepared: Path | None, jobs: list[SeedJob]
) -> list[SeedResult | BaseException]:
    """Its seed's result (`run_seed`), or each of its group's seeds' result or error."""
    from seedvar.seeds import seed  # `seed.run_seed` looked up as it runs
    from seedvar.seeds.group import live_together

    parent, tags = task.parent_run_id, task.run_tags
    if not task.group:
        callbacks = task.callbacks() if task.callbacks else None
        return [
            seed.run_seed(task.config, task.if_finished, prepared, callbacks, parent, tags, jobs[0])
        ]
    lives = [  # a caller's callbacks (a sweep's) are not for a group
        seed.seed_life(config, task.if_finished, prepared, None, parent, tags, job)
        for (_, config), job in zip(task.members, jobs, strict=True)
    ]
    return live_together(lives)


def _result(
    key: TaskKey, attempt: str, outcome: SeedResult | BaseException, seconds: float
) -> SeedResult:
    """How the attempt `attempt` at `key` ended: its result, or its error's."""
    if isinstance(outcome, SeedResult):
        return replace(outcome, key=key, wall_seconds=seconds)
    ended = partial(SeedResult, key, attempt=attempt, wall_seconds=seconds)
    if isinstance(outcome, tracking.RunStopped):  # its trial was pruned (or failed) elsewhere
        pruned = isinstance(outcome, tracking.RunPruned)
        return ended(Status.PRUNED if pruned else Status.STOPPED, error=first_line(outcome))
    if isinstance(outcome, Superseded):
        return ended(Status.SUPERSEDED, error=first_line(outcome))
    kind = type(outcome).__name__
    if isinstance(outcome, SeedvarError):  # a user's: `stops_launch` where it recurs in every seed
        stops = outcome.stops_launch
        return ended(Status.FAILED, error=first_line(outcome), error_type=kind, stops_launch=stops)
    # a bug, or this seed's own trouble (out of memory): its own
    detail = "".join(traceback.format_exception(outcome))
    line, passing = f"{kind}: {first_line(outcome)}", transient(outcome)
    return ended(Status.FAILED, error=line, error_type=kind, transient=passing, detail=detail)


def run_on_ray(task: SeedTask) -> list[SeedResult]:
    """The body of the Ray task."""
    import ray

    context = ray.get_runtime_context()
    where = {"ray_node": context.get_node_id(), "ray_task": context.get_task_id() or ""}
    return run_task(task, where)


@dataclass
class _Watched:
    """A task as the scheduler watches it: as last submitted, its Ray reference, its last
    progress and when first seen; the attempts seen at it (each one's attempt.json) and how many
    of them were lost (each run again by Ray)."""

    task: SeedTask
    ref: Any = None
    progress: Progress | None = None
    since: float = 0.0
    attempts: dict[str, dict[str, Any]] = field(default_factory=dict)
    lost: int = 0


class InProcess:
    """Seeds one after another in the driver's own process, each retried after a passing error."""

    def __init__(
        self, settings: RayConfig, cpus: float | None, echo: Callable[[str], None]
    ) -> None:
        """`cpus`: a seed's, which set torch's threads (None: torch's own count)."""
        self.settings, self.echo = settings, echo
        self.threads = None if cpus is None else max(1, int(cpus))
        self.at_once = 1  # seeds at once
        self.running: dict[TaskKey, _Watched] = {}
        self.retried: dict[TaskKey, list[Cause]] = {}  # seeds submitted again, and why
        self.token: Token | None = None  # what a task checks the driver's folders by

    def submit(self, task: SeedTask) -> None:
        """Run `task` (its key must not be running already)."""
        task = replace(task, threads=self.threads, token=self.token)
        self.running[task.key] = _Watched(task, self._start(task))

    def _start(self, task: SeedTask) -> Any:
        """Its Ray reference (here none: `wait` runs it)."""

    def cancel(self, key: TaskKey) -> None:
        """Stop `key` now (its work in progress stays, for a later command to resume)."""
        del self.running[key]

    def cancel_all(self) -> None:
        for key in list(self.running):
            self.cancel(key)

    def cancel_waiting(self, keys: Iterable[TaskKey]) -> list[TaskKey]:
        """Cancel the tasks of those of `keys` that have not started; returns their seeds."""
        begun = self.activity()
        waiting = [key for key in keys if key in self.running and key not in begun]
        cancelled = [seed for key in waiting for seed in self.running[key].task.keys]
        for key in waiting:
            self.cancel(key)
        return cancelled

    def size(self, key: TaskKey) -> int:
        """How many seeds the task `key` runs."""
        return len(self.running[key].task.keys)

    def activity(self) -> dict[TaskKey, Progress]:
        """The progress of every running seed whose current submission has started."""
        return {key: w.progress for key, w in self.running.items() if w.progress is not None}

    def resolved(self, config: Config) -> Config:
        """`config` with its "auto" precisions as they resolve where the seeds run."""
        return on_this_machine(config)

    def wait(self, timeout: float) -> list[SeedResult]:
        """Run the next task to its end (here `timeout` does not apply)."""
        key = next(iter(self.running))
        return self._ended({key: run_task(self.running[key].task)})

    def _ended(self, ended: dict[TaskKey, list[SeedResult]]) -> list[SeedResult]:
        """The results of the tasks that ended, no longer running; their seeds that failed with
        a passing error submitted again (as one task), or failed once out of retries."""
        results = []
        for key, found in ended.items():
            task = self.running.pop(key).task
            results += [result for result in found if not result.transient]
            if passing := [result for result in found if result.transient]:
                why = "; ".join(dict.fromkeys(f"attempt {r.attempt}: {r.error}" for r in passing))
                results += self._again(task.only(r.key for r in passing), Cause.TRANSIENT, why)
        return results

    def _again(self, task: SeedTask, cause: Cause, why: str) -> list[SeedResult]:
        """Submit `task` once more, unless it has used up its retries (then: its seeds failed)."""
        for key in task.keys:
            self.retried.setdefault(key, []).append(cause)
        if task.submission > self.settings.max_retries:
            self.echo(f"{task}: {why}; no retries left (ray.max_retries)")
            error = f"{why}; no retries left"
            return [SeedResult(key, Status.FAILED, error=error) for key in task.keys]
        self.echo(f"{task}: {why}; submitted again")
        self.submit(replace(task, submission=task.submission + 1))
        return []


class Scheduler(InProcess):
    """The same over Ray: seeds as Ray tasks, `at_once` at a time."""

    def __init__(
        self,
        ray: Any,
        settings: RayConfig,
        resources: SeedResources,
        echo: Callable[[str], None],
        reuse_workers: bool = True,
        at_once: int = 1,
    ) -> None:
        self.ray, self.resources = ray, resources
        super().__init__(settings, resources.cpus, echo)
        self.at_once = at_once
        # a worker process runs seed after seed (no 30-60 s of imports per seed) unless its
        # seeds use GPUs on a node of several: CUDA keeps the GPU of a process's first task
        fresh = resources.gpus > 0 and not reuse_workers
        self.remote = ray.remote(max_calls=1 if fresh else 0)(run_on_ray)

    def _start(self, task: SeedTask) -> Any:
        return self.remote.options(
            num_cpus=self.resources.cpus,
            num_gpus=self.resources.gpus,
            max_retries=self.settings.max_retries,  # a lost worker or node: Ray runs it again
            retry_exceptions=False,  # a task returns its errors; it raises only on interrupt
            name=f"seedvar {task.key}",
            # a task's warnings and errors reach the driver's terminal, its progress bars and
            # MLflow's notes do not (the driver's status line says how far each seed has got)
            runtime_env={"env_vars": {"TQDM_DISABLE": "1", "MLFLOW_LOGGING_LEVEL": "WARNING"}},
        ).remote(task)

    def cancel(self, key: TaskKey) -> None:
        self.ray.cancel(self.running.pop(key).ref, force=True)

    def resolved(self, config: Config) -> Config:
        """Checked and made concrete by a task where seeds run (the driver may have no GPU,
        another CPU): a GPU study whose node cannot run CUDA stops with that node's one line."""
        probe = self.ray.remote(num_cpus=self.resources.cpus, num_gpus=self.resources.gpus)
        try:
            return self.ray.get(probe(checked_on_this_machine).remote(config))
        except self.ray.exceptions.RayTaskError as error:
            if isinstance(error.cause, SeedvarError):
                raise error.cause from None
            raise

    def wait(self, timeout: float) -> list[SeedResult]:
        """Results of the seeds that ended within `timeout` seconds (each seed's only one);
        meanwhile, stalled attempts and passing errors are submitted again."""
        refs = {watched.ref: key for key, watched in self.running.items()}
        first, _ = self.ray.wait(list(refs), num_returns=1, timeout=timeout)
        ready = self.ray.wait(list(refs), num_returns=len(refs), timeout=0)[0] if first else []
        ended = {refs[ref]: self._results(refs[ref], ref) for ref in ready}
        still = {key: self._still(key) for key in set(self.running) - set(ended)}
        over = {key: s for key, s in still.items() if s > self.settings.stall_seconds}
        results = self._ended(ended)
        if over:  # the longest stuck; cancelling it may free the others (a lock it held)
            stuck = max(over, key=over.__getitem__)
            results += self._cancel(stuck, over[stuck])
            for key in still.keys() - {stuck}:
                self.running[key].since = time.monotonic()
        return results

    def _results(self, key: TaskKey, ref: Any) -> list[SeedResult]:
        try:
            results: list[SeedResult] = self.ray.get(ref)
        except self.ray.exceptions.RayError as error:  # lost more often than Ray retries
            why = f"its worker or node was lost ({type(error).__name__}: {first_line(error)})"
            error_line = f"{why}; no retries left"
            return [
                SeedResult(k, Status.FAILED, error=error_line) for k in self.running[key].task.keys
            ]
        return results

    def _still(self, key: TaskKey) -> float:
        """Seconds the attempt at `key` has stood still while training or evaluating (0: it
        moved since the last look, or is loading, or has reported nothing yet). An attempt seen
        for the first time is noted (`_new_attempt`)."""
        watched, now = self.running[key], time.monotonic()
        pattern = f"seed-{key.seed}.partial.*/{PROGRESS}"  # its current submission's progress
        current = []
        for path in Path(watched.task.keep).glob(pattern):
            found = progress.read(path)
            if found and found.submission == watched.task.submission:
                current.append(found)
                if found.attempt not in watched.attempts:
                    self._new_attempt(key, found.attempt, path.parent)
        if not (latest := max(current, key=lambda p: p.batches, default=None)):
            return 0.0
        if latest != watched.progress:  # it moved (it changes only with a batch)
            watched.progress, watched.since = latest, now
        return 0.0 if latest.phase == "loading" else now - watched.since

    def _new_attempt(self, key: TaskKey, attempt: str, folder: Path) -> None:
        """Note an attempt first seen at `key`'s current submission (working in `folder`). One
        that follows another attempt at the same Ray task is Ray's own retry of a task whose
        worker died (or its node): say so in one line, with how the seed goes on."""
        watched = self.running[key]
        record = attempt_record(folder)
        if record.get("attempt") != attempt:  # not claimed yet, or taken over meanwhile
            return
        seen = list(watched.attempts.values())
        watched.attempts[attempt] = record
        took_over = record.get("took_over") or {}
        if took_over.get("ray_task") and took_over.get("ray_task") == record.get("ray_task"):
            lost = took_over  # the attempt whose work it took over: the same task, run again
        elif seen:  # the one seen before it, which left nothing to take over
            lost = seen[-1]
        else:
            return
        watched.lost += 1
        left = max(0, self.settings.max_retries - watched.lost)
        retries = {0: "its last retry", 1: "1 retry left"}.get(left, f"{left} retries left")
        where = ", ".join(filter(None, [f"attempt {lost.get('attempt', '?')}", _process(lost)]))
        how = f", {record['continues']}" if record.get("continues") else ""
        self.echo(f"{key}: its worker died ({where}); Ray retries it ({retries}){how}")

    def _cancel(self, key: TaskKey, still: float) -> list[SeedResult]:
        """Cancel and submit again an attempt whose progress has stood still for too long."""
        watched = self.running.pop(key)
        self.ray.cancel(watched.ref, force=True)
        assert watched.progress is not None  # it has been seen
        attempt = watched.progress.attempt
        where = _process(watched.attempts.get(attempt))
        why = (
            f"attempt {attempt}{f' ({where})' if where else ''} has not finished a batch for "
            f"{still:.0f} s while {watched.progress.phase} (frozen or hung); cancelled"
        )
        return self._again(watched.task, Cause.STALLED, why)


def _process(record: dict[str, Any] | None) -> str:
    """`process 4321 on gpu-3, Ray node 5f3e9a12`: where an attempt ran (what is known of it)."""
    where = []
    if record and "pid" in record:
        where.append(f"process {record['pid']} on {record.get('host', '?')}")
    if record and record.get("ray_node"):
        where.append(f"Ray node {record['ray_node'][:8]}")
    return ", ".join(where)
