"""Errors a user can cause and fix; the CLI prints them as one line, without a trace."""

from typing import ClassVar


class SeedvarError(Exception):
    """Base class: the message names the problem and the fix. `stops_launch`: a failure of
    this kind would recur in every seed (bad input, a tracking store or disk out of reach), so a
    launch or a sweep stops instead of trying the other seeds."""

    stops_launch: ClassVar[bool] = False

    def __init_subclass__(cls, stops_launch: bool = False) -> None:
        super().__init_subclass__()
        cls.stops_launch = stops_launch or cls.stops_launch  # a stopping kind's subclass stops


class ConfigError(SeedvarError, stops_launch=True):
    """The configuration (params.yaml or --set) is invalid."""


class DataError(SeedvarError, stops_launch=True):
    """A data file or data source cannot be used."""


class ModelError(SeedvarError, stops_launch=True):
    """A model cannot be loaded."""


class OutputExistsError(SeedvarError):
    """Finished work would be overwritten."""


class TrackingError(SeedvarError, stops_launch=True):
    """The MLflow tracking store cannot be reached, or cannot serve the seeds as configured."""


class DiskError(SeedvarError, stops_launch=True):
    """The output folder cannot be written, or its disk filled up during a run."""


class DeviceError(SeedvarError, stops_launch=True):
    """The accelerator the study asks for cannot be used here."""


class DivergedError(SeedvarError):
    """Training produced a non-finite loss or non-finite predictions: the seed is not a result."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message, or its type when it has none."""
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


class Superseded(SeedvarError):
    """Another attempt at the same seed took its work over (this one was presumed dead):
    this attempt stops without touching the seed's folder or its MLflow run."""


class RayUnavailableError(SeedvarError):
    """Ray is not installed, or the Ray cluster cannot be reached or cannot run a seed."""


TRANSIENT_TEXT = (
    "database is locked",  # SQLite: another writer held the lock past the busy timeout
    "database table is locked",
    "lock timeout",  # PostgreSQL: a lock held past `lock_timeout`; a conflict with a writer
    "could not serialize access",
    "deadlock detected",
    "server closed the connection",  # a connection dropped (a server restarted)
    "terminating connection",
    "Connection reset",
    "timed out",
)


def transient(error: BaseException) -> bool:
    """Whether an error is likely to pass by itself (a tracking store locked by another writer
    past its timeout, a dropped connection): the same write again may well succeed
    (tracking/retry.py), and failing that, the same attempt at a seed (scale/scheduler.py)."""
    return transient_cause(error) is not None


def transient_cause(error: BaseException) -> str | None:
    """What makes an error `transient`, in a few words (its type, or the words of TRANSIENT_TEXT
    it says), or None."""
    if isinstance(error, ConnectionError | TimeoutError):
        return type(error).__name__
    return next((text for text in TRANSIENT_TEXT if text in str(error)), None)
