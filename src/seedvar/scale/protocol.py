"""What a driver and the task of one seed say to each other: which seed it is and how its
attempt ended (how far it has got: its progress.json, seedvar/progress.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from seedvar.config import Config
from seedvar.seeds.job import IfFinished


class Status(StrEnum):
    """How one attempt at a seed ended."""

    FINISHED = "finished"  # trained and published now
    REUSED = "reused"  # found finished with this recipe
    PRUNED = "pruned"  # its sweep trial was pruned
    STOPPED = "stopped"  # its sweep trial failed on another seed
    SUPERSEDED = "superseded"  # another attempt took its work over
    FAILED = "failed"

    @property
    def done(self) -> bool:
        """Whether the seed is published."""
        return self in (Status.FINISHED, Status.REUSED)


class Cause(StrEnum):
    """Why the driver submitted a seed again."""

    LOST = "lost"  # its worker process or its node died
    STALLED = "stalled"  # no batch for ray.stall_seconds while its process lived
    TRANSIENT = "transient"  # a passing error (a locked tracking store, a dropped connection)


@dataclass(frozen=True)
class TaskKey:
    """A seed of a launch (`trial` None) or of a sweep trial."""

    seed: int
    trial: int | None = None

    def __str__(self) -> str:
        return f"seed {self.seed}" if self.trial is None else f"trial {self.trial} seed {self.seed}"


@dataclass(frozen=True)
class TrialLink:
    """The sweep trial a seed belongs to: every seed stops once the trial is pruned; its first
    seed (`reports`) reports validation accuracy to it for pruning."""

    number: int
    reports: bool


@dataclass(frozen=True)
class SeedTask:
    """One seed for a task to run: the same `run_seed` as `seedvar train`, its work kept in
    `store` (an absolute path, as the driver sees it). `submission` counts the driver's
    submissions of this seed (1 for the first); `threads` (torch's; None: its own) is set by
    the scheduler."""

    key: TaskKey
    config: Config
    project_dir: str
    store: str
    prepared: str | None = None
    parent_run_id: str | None = None
    run_tags: dict[str, str] = field(default_factory=dict)
    trial: TrialLink | None = None
    if_finished: IfFinished = "reuse"
    submission: int = 1
    threads: int | None = 1


@dataclass(frozen=True)
class TaskResult:
    """How one attempt at a seed ended: a task's return value (a task never raises)."""

    key: TaskKey
    status: Status
    attempt: str = ""
    node: str = ""
    run_id: str | None = None
    metrics: dict[str, float] | None = None
    error: str | None = None  # the error's first line
    error_type: str | None = None
    stops_launch: bool = False  # the failure would recur in every seed
    transient: bool = False  # a passing error: the same attempt again may well succeed
    detail: str | None = None  # the traceback of an error seedvar did not expect
    seconds: float = 0.0
