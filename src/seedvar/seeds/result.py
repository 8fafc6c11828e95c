"""How an attempt at a seed ended: the result `run_seed` returns and a scheduler reports for each
task (scale/scheduler.py). Read without the heavy libraries, so that the driver, which never
trains, imports it without Lightning."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Status(StrEnum):
    """How one attempt at a seed ended."""

    FINISHED = "finished"  # trained and published now
    REUSED = "reused"  # found finished with this recipe
    PRUNED = "pruned"  # its sweep trial was pruned
    STOPPED = "stopped"  # its sweep trial ended on another seed
    SUPERSEDED = "superseded"  # another attempt took its work over
    FAILED = "failed"

    @property
    def done(self) -> bool:
        return self in (Status.FINISHED, Status.REUSED)


@dataclass(frozen=True)
class TaskKey:
    """Which seed a task runs: a seed of a launch (`trial` None) or of a sweep trial."""

    seed: int
    trial: int | None = None

    def __str__(self) -> str:
        return f"seed {self.seed}" if self.trial is None else f"trial {self.trial} seed {self.seed}"


@dataclass(frozen=True)
class SeedResult:
    """How the attempt `attempt` at the seed `key` ended; once done (`status.done`), where the
    finished seed is published (`seed_dir`), its MLflow run and what it scored; else the error."""

    key: TaskKey
    status: Status
    attempt: str = ""
    metrics: dict[str, float] | None = None
    seed_dir: Path | None = None  # the published view, runs/seed-N
    run_id: str | None = None  # the seed's MLflow run
    error: str | None = None  # the error's first line
    error_type: str | None = None
    stops_launch: bool = False  # the failure would recur in every seed
    transient: bool = False  # a passing error: the same attempt again may well succeed
    detail: str | None = None  # the traceback of an error seedvar did not expect
    wall_seconds: float = 0.0

    @property
    def reused(self) -> bool:
        """Whether the seed had finished before (found with this recipe, or published by
        another attempt meanwhile), not trained by this attempt."""
        return self.status is Status.REUSED
