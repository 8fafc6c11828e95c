"""Sees seed tasks through on Ray, so that each seed ends once: finished (or found finished),
pruned, or failed with its first error line.

Every retry is the scheduler's own resubmission (Ray's are off), counted against
`ray.max_retries` per seed, for one of three causes:
- lost: the task's worker process or its node died (ray.get raises);
- stalled: the attempt sent no heartbeat for `ray.stall_seconds` while its process lives (frozen,
  paused, hung in a system call), which Ray would wait for forever: it is force-cancelled (Ray
  kills the process as soon as the process can answer);
- taken over: another process took the attempt's work over (a second `seedvar launch`).
The new attempt takes the work over and resumes from its last checkpoint, so a stalled attempt
that runs again finds its work gone and stops without touching the seed (study/job.py).

Heartbeats go to a board (a Ray actor) and are stamped with its clock, so the driver never
compares the clocks of two machines; a beat carries its submission's number, so a late beat of
a replaced attempt is told apart from the current one's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from seedvar.config import RayConfig
from seedvar.errors import first_line
from seedvar.scale.cluster import SeedResources
from seedvar.scale.protocol import Beat, Cause, SeedTask, Status, TaskKey, TaskResult
from seedvar.scale.task import run_seed_task

BEATS_PER_STALL = 5  # an attempt beats this many times within ray.stall_seconds
PROGRESS_SECONDS = 15.0  # and at least this often, so that a status line's steps are recent


class Board:
    """The latest heartbeat of each seed's newest submission (a Ray actor)."""

    def __init__(self) -> None:
        self.beats: dict[TaskKey, Beat] = {}

    def beat(self, key: TaskKey, beat: Beat) -> None:
        held = self.beats.get(key)
        if held is None or beat.submission >= held.submission:
            beat.at = time.monotonic()
            self.beats[key] = beat

    def read(self) -> tuple[float, dict[TaskKey, Beat]]:
        return time.monotonic(), self.beats


@dataclass
class Submission:
    """A seed in the scheduler's hands: its task as last submitted and that task's reference."""

    task: SeedTask
    ref: Any


class Scheduler:
    """Submits seed tasks and collects their results, retrying what a retry can fix."""

    def __init__(
        self,
        ray: Any,
        settings: RayConfig,
        resources: SeedResources,
        echo: Callable[[str], None],
    ) -> None:
        self.ray, self.settings, self.resources, self.echo = ray, settings, resources, echo
        self.board = _start_board(ray)
        self.remote = ray.remote(run_seed_task)
        self.running: dict[TaskKey, Submission] = {}
        self.retried: dict[TaskKey, list[Cause]] = {}  # every seed submitted again, and why
        self.board_time = 0.0
        self.beats: dict[TaskKey, Beat] = {}

    def submit(self, task: SeedTask) -> None:
        """Run `task` (its key must not be running already)."""
        beat_seconds = max(
            0.5, min(PROGRESS_SECONDS, self.settings.stall_seconds / BEATS_PER_STALL)
        )
        task = replace(task, threads=self.resources.threads, beat_seconds=beat_seconds)
        self.running[task.key] = Submission(task, self._remote(task))

    def _remote(self, task: SeedTask) -> Any:
        return self.remote.options(
            num_cpus=self.resources.cpus,
            num_gpus=self.resources.gpus,
            max_retries=0,  # retries are the scheduler's: see the module's docstring
            name=f"seedvar {task.key}",
        ).remote(task, self.board)

    def cancel(self, key: TaskKey) -> None:
        """Stop `key` now (its work in progress stays, for a later command to resume)."""
        self.ray.cancel(self.running.pop(key).ref, force=True)

    def cancel_all(self) -> None:
        for key in list(self.running):
            self.cancel(key)

    def activity(self) -> dict[TaskKey, Beat]:
        """The latest beat of every running seed whose current submission has started."""
        with suppress(Exception):  # a board being restarted: what was last read
            self.board_time, self.beats = self.ray.get(self.board.read.remote(), timeout=30)
        return {
            key: beat
            for key, submission in self.running.items()
            if (beat := self.beats.get(key)) and beat.submission == submission.task.submission
        }

    def wait(self, timeout: float) -> list[TaskResult]:
        """Results of the seeds that ended within `timeout` seconds (each seed's only one);
        meanwhile, lost, stalled and taken-over attempts are submitted again."""
        refs = {submission.ref: key for key, submission in self.running.items()}
        ready: list[Any] = []
        if refs:
            first, _ = self.ray.wait(list(refs), num_returns=1, timeout=timeout)
            if first:
                ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=0)
        else:
            time.sleep(timeout)
        ended = {refs[ref]: self._result(refs[ref], ref) for ref in ready}
        for key, beat in self.activity().items():
            if key not in ended:
                ended[key] = self._stalled(key, beat)
        results = [result for result in ended.values() if result is not None]
        for result in results:
            self.running.pop(result.key)
        return results

    def _result(self, key: TaskKey, ref: Any) -> TaskResult | None:
        try:
            result: TaskResult = self.ray.get(ref)
        except self.ray.exceptions.RayError as error:
            lost = f"{type(error).__name__}: {first_line(error)}"
            return self._again(key, Cause.LOST, f"its worker or node was lost ({lost})")
        if result.status is Status.SUPERSEDED:
            why = "its work was taken over by another process (another `seedvar launch`?)"
            return self._again(key, Cause.TAKEN_OVER, f"attempt {result.attempt}: {why}")
        return result

    def _stalled(self, key: TaskKey, beat: Beat) -> TaskResult | None:
        """Cancel and submit again an attempt that has been silent for too long."""
        silent = self.board_time - beat.at
        if isinstance(beat.phase, Status) or silent <= self.settings.stall_seconds:
            return None
        self.ray.cancel(self.running[key].ref, force=True)
        why = (
            f"attempt {beat.attempt} on node {beat.node[:8]} (pid {beat.pid}) sent no heartbeat "
            f"for {silent:.0f} s while its process lives (frozen or hung); cancelled"
        )
        return self._again(key, Cause.STALLED, why)

    def _again(self, key: TaskKey, cause: Cause, why: str) -> TaskResult | None:
        """Submit `key` once more, unless it has used up its retries (then: failed)."""
        submission = self.running[key]
        self.retried.setdefault(key, []).append(cause)
        if submission.task.submission > self.settings.max_retries:
            self.echo(f"{key}: {why}; no retries left (ray.max_retries)")
            return TaskResult(key, Status.FAILED, error=f"{why}; no retries left")
        self.echo(f"{key}: {why}; submitted again")
        submission.task = replace(submission.task, submission=submission.task.submission + 1)
        submission.ref = self._remote(submission.task)
        return None


def _start_board(ray: Any) -> Any:
    """The board, on the driver's node where there is one (restarted elsewhere if that node
    dies; a driver connected through Ray Client leaves the choice to Ray)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(Board)
    try:
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    except Exception:
        return actor.remote()
    return actor.options(scheduling_strategy=here).remote()
