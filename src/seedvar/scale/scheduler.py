"""Sees seed tasks through on Ray, so that each seed ends once: finished (or found finished),
pruned, or failed with its first error line.

- A node or a worker process that dies: Ray retries the task (up to `ray.max_retries`; with
  `retry_exceptions=False`, never for an error of the task's own). The retry takes the seed's
  work over and resumes from its last checkpoint, in the same MLflow run.
- An attempt that stops beating while its node is alive (a frozen process, a paused VM, a process
  hung in a system call): Ray would wait for it forever. After `ray.stall_seconds` without a
  heartbeat the scheduler force-cancels it (Ray kills the process as soon as the process can
  answer) and submits the seed again (at most `ray.max_retries` times). The new attempt takes
  the work over, so if the stalled one ever runs again it finds its work gone and stops without
  touching the seed or its MLflow run (study/job.py).
- An attempt whose work another process took over (a second `seedvar launch` on the same
  study, say) is submitted again; the new attempt returns at once if the seed is published.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

from seedvar.config import RayConfig
from seedvar.errors import first_line
from seedvar.scale.ray_tasks import (
    HEARTBEATS_PER_STALL,
    Outcome,
    SeedResources,
    SeedTask,
    alive_nodes,
    remote_seed_task,
    start_board,
)

ENDED = ("finished", "reused", "pruned", "stopped", "superseded", "failed")
BOARD_TIMEOUT = 30.0


@dataclass
class Running:
    """A seed in the scheduler's hands: its task, the Ray reference of its current submission,
    and the attempts it has seen and given up on."""

    task: SeedTask
    ref: Any
    submissions: int = 1
    announced: set[str] = field(default_factory=set)
    abandoned: set[str] = field(default_factory=set)
    retries: list[str] = field(default_factory=list)  # why it was run again, in order


class Scheduler:
    """Submits seed tasks and collects their outcomes, retrying what a retry can fix."""

    def __init__(
        self,
        ray: Any,
        settings: RayConfig,
        resources: SeedResources,
        echo: Callable[[str], None],
    ) -> None:
        self.ray = ray
        self.settings = settings
        self.resources = resources
        self.echo = echo
        self.board = start_board(ray)
        self.remote = remote_seed_task(ray)
        self.running: dict[str, Running] = {}
        self.beats: dict[str, dict[str, dict[str, Any]]] = {}
        self.retried: dict[str, list[str]] = {}  # key -> why, for every seed run again

    def __len__(self) -> int:
        return len(self.running)

    def submit(self, task: SeedTask) -> None:
        """Run `task` (its key must not be running already)."""
        task = replace(
            task,
            threads=self.resources.threads,
            heartbeat_seconds=max(0.5, self.settings.stall_seconds / HEARTBEATS_PER_STALL),
        )
        self.running[task.key] = Running(task, self._submit(task))

    def _submit(self, task: SeedTask) -> Any:
        options = {
            "num_cpus": self.resources.cpus,
            "num_gpus": self.resources.gpus,
            "max_retries": self.settings.max_retries,
            "retry_exceptions": False,
            "name": f"seedvar {task.key}",
        }
        return self.remote.options(**options).remote(task, self.board)

    def started(self) -> set[str]:
        """The running keys that any attempt has begun (beaten at least once), as of now."""
        with suppress(Exception):  # a board being restarted: what was last seen
            self.beats = self.ray.get(self.board.snapshot.remote(), timeout=BOARD_TIMEOUT)[1]
        return {key for key in self.running if self.beats.get(key)}

    def cancel(self, key: str) -> None:
        """Stop `key` now (its work in progress stays, for a later command to resume)."""
        running = self.running.pop(key)
        self.ray.cancel(running.ref, force=True)

    def cancel_all(self) -> None:
        for key in list(self.running):
            self.cancel(key)

    def activity(self) -> dict[str, dict[str, Any]]:
        """The latest heartbeat of each running key's current attempt (none: still waiting)."""
        found = {}
        for key, running in self.running.items():
            current = self._current(key, running)
            if current is not None:
                found[key] = current[1]
        return found

    def wait(self, timeout: float) -> list[Outcome]:
        """Outcomes of the keys that ended within `timeout` seconds (each key's only one);
        meanwhile, stalled attempts are replaced and node losses reported."""
        refs = {running.ref: key for key, running in self.running.items()}
        ready: list[Any] = []
        if refs:
            first, _ = self.ray.wait(list(refs), num_returns=1, timeout=timeout)
            if first:
                ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=0)
        else:
            time.sleep(timeout)
        outcomes = []
        for ref in ready:
            key = refs[ref]
            outcome = self._resolve(key, ref)
            if outcome is not None:
                self.running.pop(key)
                outcomes.append(outcome)
        return outcomes + self._watch()

    def _resolve(self, key: str, ref: Any) -> Outcome | None:
        running = self.running[key]
        seed = running.task.config.train.seed
        try:
            outcome: Outcome = self.ray.get(ref)
        except Exception as error:  # Ray gave up: node or worker lost more often than allowed
            name = type(error).__name__
            return Outcome(
                key,
                seed,
                "failed",
                attempt="",
                node="",
                error=f"{name} after {self.settings.max_retries} retries: {first_line(error)}",
                error_type=name,
            )
        if outcome.status != "superseded":
            return outcome
        running.abandoned.add(outcome.attempt)
        return self._again(
            key,
            f"attempt {outcome.attempt} found its work taken over by another process "
            "(another `seedvar launch` on this study?)",
        )

    def _again(self, key: str, why: str) -> Outcome | None:
        """Submit `key` once more, unless it has used up its retries (then: failed)."""
        running = self.running[key]
        running.retries.append(why)
        self.retried.setdefault(key, []).append(why)
        if running.submissions > self.settings.max_retries:
            self.echo(f"{key}: {why}; no retries left (ray.max_retries)")
            seed = running.task.config.train.seed
            return Outcome(key, seed, "failed", "", "", error=why, error_type="Retries")
        self.echo(f"{key}: {why}; submitted again")
        running.submissions += 1
        running.ref = self._submit(running.task)
        return None

    def _attempts(self, key: str, running: Running) -> dict[str, dict[str, Any]]:
        """The attempts at `key` seen on the board and not given up on."""
        beats = self.beats.get(key, {})
        return {a: info for a, info in beats.items() if a not in running.abandoned}

    def _current(self, key: str, running: Running) -> tuple[str, dict[str, Any]] | None:
        """The newest attempt at `key` not given up on."""
        attempts = self._attempts(key, running)
        if not attempts:
            return None
        return max(attempts.items(), key=lambda item: item[1]["first"])

    def _watch(self) -> list[Outcome]:
        """Read the board: announce new attempts; give up on attempts whose node is gone (Ray
        retries those); replace attempts that stopped beating on a live node. Returns the
        outcomes of seeds that stalled once more than their retries allow."""
        given_up: list[Outcome] = []
        try:
            now, self.beats = self.ray.get(self.board.snapshot.remote(), timeout=BOARD_TIMEOUT)
        except Exception:  # the board is being restarted: look again next time
            return given_up
        alive = set(alive_nodes(self.ray))
        for key, running in list(self.running.items()):
            current = self._current(key, running)
            if current is None:
                continue
            for attempt, info in self._attempts(key, running).items():
                # an attempt that a newer one (Ray's retry) followed, or whose node is gone
                lost = attempt != current[0] or info["node"] not in alive
                if lost and info["phase"] not in ENDED:
                    running.abandoned.add(attempt)
                    cause = "its node is gone" if info["node"] not in alive else "its worker died"
                    why = (
                        f"attempt {attempt} on node {info['node'][:8]} stopped ({cause}); Ray "
                        "retries the seed, which resumes from its work"
                    )
                    self.retried.setdefault(key, []).append(why)
                    self.echo(f"{key}: {why}")
            current = self._current(key, running)
            if current is None:
                continue
            attempt, info = current
            if attempt not in running.announced:
                running.announced.add(attempt)
                again = " (a retry)" if len(running.announced) > 1 else ""
                self.echo(
                    f"{key}: attempt {attempt}{again} started on node {info['node'][:8]} "
                    f"({info['host']}, pid {info['pid']})"
                )
            silent = now - info["last"]
            if info["phase"] not in ENDED and silent > self.settings.stall_seconds:
                running.abandoned.add(attempt)
                self.ray.cancel(running.ref, force=True)
                why = (
                    f"attempt {attempt} on node {info['node'][:8]} (pid {info['pid']}) sent no "
                    f"heartbeat for {silent:.0f} s while its node is alive (frozen or hung); "
                    "cancelled"
                )
                outcome = self._again(key, why)
                if outcome is not None:  # no retries left
                    self.running.pop(key)
                    given_up.append(outcome)
        return given_up
