"""Sees seed tasks through, so that each seed ends once: finished (or found finished), pruned,
or failed with its first error line. `Scheduler` runs them as Ray tasks, `InProcess` one after
another in the driver's own process (no Ray, or a machine that holds one seed at a time).

Retries (at most `ray.max_retries` per seed):
- lost: the task's worker process or its node died. Ray itself runs the task again (its
  `max_retries`); the new attempt takes the work over and resumes from the last checkpoint.
- stalled: no batch trained or predicted for `ray.stall_seconds` (the attempt's progress.json
  stands still) while its process lives (frozen, paused, blocked in a system call), which Ray
  would wait for forever: the scheduler force-cancels it (Ray kills the process as soon as it
  can) and submits it again. Should the stalled attempt wake, it finds its work taken over and
  stops without touching the seed (seeds/job.py).
- transient: the attempt failed with an error that passes (a tracking store still locked
  after the write's own retries, tracking/retry.py): submitted again, and it resumes. A last
  resort: a locked write is tried again for minutes before its seed is.
An attempt whose work was taken over (`Superseded`: another process works on the seed, which
the driver's lease rules out for seedvar's own commands) is reported, not retried.

The progress is read by the driver and timed by the driver's clock alone, so no two machines'
clocks are compared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from seedvar import progress
from seedvar.config import RayConfig
from seedvar.errors import first_line
from seedvar.progress import Progress
from seedvar.scale.cluster import SeedResources
from seedvar.scale.protocol import Cause, SeedTask, Status, TaskKey, TaskResult
from seedvar.scale.task import run_on_ray, run_seed_task
from seedvar.seeds.job import PROGRESS

# A task's output reaches the driver's terminal: its warnings and errors do, progress bars and
# MLflow's notes do not (the driver's status line says how far each seed has got).
QUIET = {"TQDM_DISABLE": "1", "MLFLOW_LOGGING_LEVEL": "WARNING"}


@dataclass
class Submission:
    """A seed in the scheduler's hands: its task as last submitted, that task's reference,
    and the last progress seen with the driver's time it was first seen."""

    task: SeedTask
    ref: Any
    seen: tuple[str, int] | None = None
    since: float = 0.0
    progress: Progress | None = None


class Scheduler:
    """Submits seed tasks to Ray and collects their results, retrying what a retry can fix."""

    def __init__(
        self,
        ray: Any,
        settings: RayConfig,
        resources: SeedResources,
        echo: Callable[[str], None],
        reuse_workers: bool = True,
    ) -> None:
        self.ray, self.settings, self.resources, self.echo = ray, settings, resources, echo
        # a worker process runs seed after seed (no 30-60 s of imports per seed) unless its
        # seeds use GPUs on a node of several: CUDA keeps the GPU of a process's first task
        fresh = resources.gpus > 0 and not reuse_workers
        self.remote = ray.remote(max_calls=1 if fresh else 0)(run_on_ray)
        self.running: dict[TaskKey, Submission] = {}
        self.retried: dict[TaskKey, list[Cause]] = {}  # seeds the scheduler submitted again

    def submit(self, task: SeedTask) -> None:
        """Run `task` (its key must not be running already)."""
        task = replace(task, threads=self.resources.threads)
        self.running[task.key] = Submission(task, self._remote(task))

    def _remote(self, task: SeedTask) -> Any:
        return self.remote.options(
            num_cpus=self.resources.cpus,
            num_gpus=self.resources.gpus,
            max_retries=self.settings.max_retries,  # a lost worker or node: Ray runs it again
            retry_exceptions=False,  # a task returns its errors; it raises only on interrupt
            name=f"seedvar {task.key}",
            runtime_env={"env_vars": QUIET},
        ).remote(task)

    def cancel(self, key: TaskKey) -> None:
        """Stop `key` now (its work in progress stays, for a later command to resume)."""
        self.ray.cancel(self.running.pop(key).ref, force=True)

    def cancel_all(self) -> None:
        for key in list(self.running):
            self.cancel(key)

    def activity(self) -> dict[TaskKey, Progress]:
        """The progress of every running seed whose current submission has started."""
        return {key: s.progress for key, s in self.running.items() if s.progress is not None}

    def wait(self, timeout: float) -> list[TaskResult]:
        """Results of the seeds that ended within `timeout` seconds (each seed's only one);
        meanwhile, stalled attempts and passing errors are submitted again."""
        refs = {submission.ref: key for key, submission in self.running.items()}
        ready: list[Any] = []
        if refs:
            first, _ = self.ray.wait(list(refs), num_returns=1, timeout=timeout)
            if first:
                ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=0)
        else:
            time.sleep(timeout)
        ended = {refs[ref]: self._result(refs[ref], ref) for ref in ready}
        for key in set(self.running) - set(ended):
            ended[key] = self._stalled(key)
        results = [result for result in ended.values() if result is not None]
        for result in results:
            self.running.pop(result.key)
        return results

    def _result(self, key: TaskKey, ref: Any) -> TaskResult | None:
        try:
            result: TaskResult = self.ray.get(ref)
        except self.ray.exceptions.RayError as error:  # lost more often than Ray retries
            why = f"its worker or node was lost ({type(error).__name__}: {first_line(error)})"
            return TaskResult(key, Status.FAILED, error=f"{why}; no retries left")
        if result.transient:
            return self._again(key, Cause.TRANSIENT, f"attempt {result.attempt}: {result.error}")
        return result

    def _stalled(self, key: TaskKey) -> TaskResult | None:
        """Cancel and submit again an attempt whose progress has stood still for too long."""
        submission = self.running[key]
        now, found = time.monotonic(), self._progress(submission.task)
        if found is None:
            return None
        if submission.seen != (found.attempt, found.batches):
            submission.seen, submission.since, submission.progress = (
                (found.attempt, found.batches),
                now,
                found,
            )
            return None
        still = now - submission.since
        if found.phase == "loading" or still <= self.settings.stall_seconds:
            return None
        self.ray.cancel(submission.ref, force=True)
        why = (
            f"attempt {found.attempt} has not finished a batch for {still:.0f} s while "
            f"{found.phase} (frozen or hung); cancelled"
        )
        return self._again(key, Cause.STALLED, why)

    def _progress(self, task: SeedTask) -> Progress | None:
        """The progress of `task`'s current submission, from its attempt's work folder."""
        pattern = f"seed-{task.key.seed}.partial.*/{PROGRESS}"
        found = [progress.read(path) for path in Path(task.store).glob(pattern)]
        current = [p for p in found if p is not None and p.submission == task.submission]
        return max(current, key=lambda p: p.batches, default=None)

    def _again(self, key: TaskKey, cause: Cause, why: str) -> TaskResult | None:
        """Submit `key` once more, unless it has used up its retries (then: failed)."""
        submission = self.running[key]
        self.retried.setdefault(key, []).append(cause)
        if submission.task.submission > self.settings.max_retries:
            self.echo(f"{key}: {why}; no retries left (ray.max_retries)")
            return TaskResult(key, Status.FAILED, error=f"{why}; no retries left")
        self.echo(f"{key}: {why}; submitted again")
        task = replace(submission.task, submission=submission.task.submission + 1)
        self.running[key] = Submission(task, self._remote(task))
        return None


class InProcess:
    """The scheduler's interface over the driver's own process: one seed after another, each
    retried after a passing error."""

    def __init__(
        self, settings: RayConfig, threads: int | None, echo: Callable[[str], None]
    ) -> None:
        self.settings, self.threads, self.echo = settings, threads, echo
        self.running: dict[TaskKey, SeedTask] = {}
        self.retried: dict[TaskKey, list[Cause]] = {}

    def submit(self, task: SeedTask) -> None:
        self.running[task.key] = replace(task, threads=self.threads)

    def cancel(self, key: TaskKey) -> None:
        self.running.pop(key)

    def cancel_all(self) -> None:
        self.running.clear()

    def activity(self) -> dict[TaskKey, Progress]:
        return {}

    def wait(self, timeout: float) -> list[TaskResult]:
        """Run the next seed to its end (`timeout` does not apply: it runs here)."""
        key, task = next(iter(self.running.items()))
        result = run_seed_task(task)
        while result.transient and task.submission <= self.settings.max_retries:
            self.retried.setdefault(key, []).append(Cause.TRANSIENT)
            self.echo(f"{key}: {result.error}; trying again")
            task = replace(task, submission=task.submission + 1)
            result = run_seed_task(task)
        del self.running[key]
        return [result]
