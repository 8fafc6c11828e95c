"""What a driver and the Ray task of one seed say to each other: which seed it is, how far it
has got (its heartbeat) and how its attempt ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from seedvar.config import Config


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
    STALLED = "stalled"  # no heartbeat for ray.stall_seconds while its process lived
    TAKEN_OVER = "taken over"  # another process took its work over


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
    """One seed for a Ray task to run: the same `run_seed` as `seedvar train`. `submission`
    counts the driver's submissions of this seed (1 for the first); `threads` and
    `beat_seconds` are set by the scheduler."""

    key: TaskKey
    config: Config
    project_dir: str
    prepared: str | None = None
    parent_run_id: str | None = None
    run_tags: dict[str, str] = field(default_factory=dict)
    trial: TrialLink | None = None
    submission: int = 1
    threads: int = 1
    beat_seconds: float = 10.0


@dataclass
class Beat:
    """A running attempt's heartbeat: who it is and how far it has got (`at`: the board's
    clock when the beat arrived)."""

    submission: int
    attempt: str
    node: str
    host: str
    pid: int
    phase: str = "loading"  # loading, training, evaluating; a Status once it has ended
    step: int = 0
    total: int = 0
    at: float = 0.0


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
    detail: str | None = None  # the traceback of an error seedvar did not expect
    seconds: float = 0.0
