"""Errors a user can cause and fix; the CLI prints them as one line, without a trace."""

from typing import ClassVar


class SeedvarError(Exception):
    """Base class: the message names the problem and the fix. `stops_launch`: a failure of
    this kind would recur in every seed (bad input, a store or disk out of reach), so a launch
    or a sweep stops instead of trying the other seeds."""

    stops_launch: ClassVar[bool] = False


class ConfigError(SeedvarError):
    """The configuration (params.yaml or --set) is invalid."""

    stops_launch = True


class DataError(SeedvarError):
    """A data file or data source cannot be used."""

    stops_launch = True


class ModelError(SeedvarError):
    """A model cannot be loaded."""

    stops_launch = True


class OutputExistsError(SeedvarError):
    """Finished work would be overwritten."""


class TrackingError(SeedvarError):
    """The MLflow tracking store cannot be reached."""

    stops_launch = True


class DiskError(SeedvarError):
    """The output folder cannot be written, or its disk filled up during a run."""

    stops_launch = True


class DeviceError(SeedvarError):
    """The accelerator the study asks for cannot be used here."""

    stops_launch = True


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


TRANSIENT_TEXT = ("database is locked", "database table is locked", "Connection reset", "timed out")


def transient(error: BaseException) -> bool:
    """Whether an error is likely to pass by itself (a tracking store locked by another writer
    past its timeout, a dropped connection): the same attempt again may well succeed."""
    if isinstance(error, ConnectionError | TimeoutError):
        return True
    return any(text in str(error) for text in TRANSIENT_TEXT)
