"""Errors a user can cause and fix; the CLI prints them as one line, without a trace."""


class SeedvarError(Exception):
    """Base class: the message names the problem and the fix."""


class ConfigError(SeedvarError):
    """The configuration (params.yaml or --set) is invalid."""


class DataError(SeedvarError):
    """A data file or data source cannot be used."""


class ModelError(SeedvarError):
    """A model cannot be loaded."""


class OutputExistsError(SeedvarError):
    """Finished work would be overwritten."""


class TrackingError(SeedvarError):
    """The MLflow tracking store cannot be reached."""


class DiskError(SeedvarError):
    """The output folder cannot be written, or its disk filled up during a run."""


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
