"""Seed tasks (an attempt at a seed, every ending returned as a SeedResult) and the schedulers that
see each seed to one end: `InProcess` in the driver, `Scheduler` on Ray. A seed runs again (and
resumes) at most `ray.max_retries` times: lost (Ray reruns it; the driver says so in one line as
the new attempt takes the work over), stalled (no batch in its progress for `ray.stall_seconds`:
the longest stuck is cancelled, the others' clocks restarted, as it may hold them up; should it
wake, it finds its work taken over) or failed with a passing error (a tracking store still locked
after the write's own retries)."""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
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
    """One seed to run (`key`), its work kept in the keep `keep` (absolute). `callbacks` makes
    more Lightning callbacks where it trains (a trial's); `threads`: torch's (None: its own)."""

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


def run_seed_task(task: SeedTask, where: dict[str, str] | None = None) -> SeedResult:
    """One attempt at one seed, in the project folder; `where`: its Ray node and task (None: the
    driver's process), noted in its attempt.json."""
    import torch

    from seedvar.seeds.seed import run_seed

    started = time.perf_counter()
    prepared = Path(task.prepared) if task.prepared else None
    job = SeedJob.of(
        task.config, keep=Path(task.keep), data=prepared_data(prepared), note=where or {}
    )

    def ended(status: Status, **more: Any) -> SeedResult:
        seconds = time.perf_counter() - started
        return SeedResult(task.key, status, job.attempt_id, wall_seconds=seconds, **more)

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
        with progress.reporting(job.work_dir / PROGRESS, job.attempt_id, task.submission):
            result = run_seed(
                task.config,
                task.if_finished,
                prepared=prepared,
                callbacks=task.callbacks() if task.callbacks else None,
                parent_run_id=task.parent_run_id,
                run_tags=task.run_tags,
                job=job,
            )
        return replace(result, key=task.key, wall_seconds=time.perf_counter() - started)
    except tracking.RunStopped as stopped:  # its trial was pruned (or failed) on another seed
        status = Status.PRUNED if isinstance(stopped, tracking.RunPruned) else Status.STOPPED
        return ended(status, error=first_line(stopped))
    except Superseded as superseded:
        return ended(Status.SUPERSEDED, error=first_line(superseded))
    except SeedvarError as error:  # a user's: `stops_launch` where it would recur in every seed
        kind, stops = type(error).__name__, error.stops_launch
        return ended(Status.FAILED, error=first_line(error), error_type=kind, stops_launch=stops)
    except Exception as error:  # a bug, or this seed's own trouble (out of memory): its own
        kind, passing, detail = type(error).__name__, transient(error), traceback.format_exc()
        line = f"{kind}: {first_line(error)}"
        return ended(Status.FAILED, error=line, error_type=kind, transient=passing, detail=detail)


def run_on_ray(task: SeedTask) -> SeedResult:
    """The body of the Ray task."""
    import ray

    context = ray.get_runtime_context()
    where = {"ray_node": context.get_node_id(), "ray_task": context.get_task_id() or ""}
    return run_seed_task(task, where)


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
        """Cancel those of `keys` that have not started; returns them."""
        begun = self.activity()
        waiting = [key for key in keys if key in self.running and key not in begun]
        for key in waiting:
            self.cancel(key)
        return waiting

    def activity(self) -> dict[TaskKey, Progress]:
        """The progress of every running seed whose current submission has started."""
        return {key: w.progress for key, w in self.running.items() if w.progress is not None}

    def resolved(self, config: Config) -> Config:
        """`config` with its "auto" precisions as they resolve where the seeds run."""
        return on_this_machine(config)

    def wait(self, timeout: float) -> list[SeedResult]:
        """Run the next seed to its end (here `timeout` does not apply)."""
        key = next(iter(self.running))
        return self._ended({key: self._checked(key, run_seed_task(self.running[key].task))})

    def _checked(self, key: TaskKey, result: SeedResult) -> SeedResult | None:
        """`result`, or None where it is a passing error and `key` has been submitted again."""
        if result.transient:
            return self._again(key, Cause.TRANSIENT, f"attempt {result.attempt}: {result.error}")
        return result

    def _ended(self, ended: dict[TaskKey, SeedResult | None]) -> list[SeedResult]:
        """The results of the seeds that ended (None: submitted again), no longer running."""
        results = [result for result in ended.values() if result is not None]
        for result in results:
            del self.running[result.key]
        return results

    def _again(self, key: TaskKey, cause: Cause, why: str) -> SeedResult | None:
        """Submit `key` once more, unless it has used up its retries (then: failed)."""
        task = self.running[key].task
        self.retried.setdefault(key, []).append(cause)
        if task.submission > self.settings.max_retries:
            self.echo(f"{key}: {why}; no retries left (ray.max_retries)")
            return SeedResult(key, Status.FAILED, error=f"{why}; no retries left")
        self.echo(f"{key}: {why}; submitted again")
        self.submit(replace(task, submission=task.submission + 1))
        return None


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
        ended = {refs[ref]: self._result(refs[ref], ref) for ref in ready}
        still = {key: self._still(key) for key in set(self.running) - set(ended)}
        over = {key: s for key, s in still.items() if s > self.settings.stall_seconds}
        if over:  # the longest stuck; cancelling it may free the others (a lock it held)
            stuck = max(over, key=over.__getitem__)
            ended[stuck] = self._cancel(stuck, over[stuck])
            for key in still.keys() - {stuck}:
                self.running[key].since = time.monotonic()
        return self._ended(ended)

    def _result(self, key: TaskKey, ref: Any) -> SeedResult | None:
        try:
            result: SeedResult = self.ray.get(ref)
        except self.ray.exceptions.RayError as error:  # lost more often than Ray retries
            why = f"its worker or node was lost ({type(error).__name__}: {first_line(error)})"
            return SeedResult(key, Status.FAILED, error=f"{why}; no retries left")
        return self._checked(key, result)

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

    def _cancel(self, key: TaskKey, still: float) -> SeedResult | None:
        """Cancel and submit again an attempt whose progress has stood still for too long."""
        watched = self.running[key]
        self.ray.cancel(watched.ref, force=True)
        assert watched.progress is not None  # it has been seen
        attempt = watched.progress.attempt
        where = _process(watched.attempts.get(attempt))
        why = (
            f"attempt {attempt}{f' ({where})' if where else ''} has not finished a batch for "
            f"{still:.0f} s while {watched.progress.phase} (frozen or hung); cancelled"
        )
        return self._again(key, Cause.STALLED, why)


def _process(record: dict[str, Any] | None) -> str:
    """`process 4321 on gpu-3, Ray node 5f3e9a12`: where an attempt ran (what is known of it)."""
    where = []
    if record and "pid" in record:
        where.append(f"process {record['pid']} on {record.get('host', '?')}")
    if record and record.get("ray_node"):
        where.append(f"Ray node {record['ray_node'][:8]}")
    return ", ".join(where)
