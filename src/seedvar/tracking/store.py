"""The MLflow store: its URI, whether it answers, the study's experiment, the UI's address."""

from __future__ import annotations

import os
import shlex
import sqlite3
import urllib.request
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mlflow.tracking import MlflowClient

from seedvar.config import Config, TrackingConfig
from seedvar.errors import TrackingError
from seedvar.project import project_root
from seedvar.tracking.retry import RetryingClient

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
ARTIFACTS = "artifacts"  # a SQLite store's artifacts: mlruns/artifacts beside mlruns/mlflow.db
UI_HOST, UI_PORT = "http://127.0.0.1", 5000  # where `mlflow ui` serves by default
EXPERIMENT_TAGS = {
    # a model-training experiment; MLflow 3.17's UI picks its pages by its own workflow
    # switch, not by this tag: seedvar's link says which (see runs_table_url)
    "mlflow.experimentKind": "custom_model_development",
    "mlflow.note.content": "A seedvar seed-variance study: one parent run per study (its "
    "results and report), one child run per seed (its training curves, its metrics on the "
    "task's and the diagnostic sets, predictions). Compare seeds by adding the diagnostic "
    "sets' columns to the runs table.",
}


@dataclass(frozen=True)
class Store:
    """A client of the configured store and the id of the study's experiment in it."""

    client: RetryingClient
    experiment_id: str


def tracking_uri(tracking: TrackingConfig) -> str:
    """Config value, else MLFLOW_TRACKING_URI, else the SQLite store under mlruns/; a relative
    SQLite path is made absolute against the project root (project.py: the workspace also for
    DVC's temporary and queued experiments; MLflow caches stores by URI, not by folder)."""
    uri = tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = f"sqlite:///{project_root() / uri.removeprefix('sqlite:///')}"
    return uri


def sqlite_file(uri: str) -> Path | None:
    """The database file of a SQLite store's URI (None for other stores)."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:////") else None


@cache
def write_ahead(database: Path) -> None:
    """Put a SQLite store in write-ahead-log mode (once; the file keeps it): readers (an
    `mlflow ui`) never block the seeds' writes, nor writes the readers. A write that meets
    another writer's lock waits MLflow's 20 s, then is tried again (retry.py); one that
    outlasts those tries fails, and its seed is tried again (scale/scheduler.py)."""
    database.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(database, timeout=60)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def check_reachable(config: Config) -> None:
    """Stop in seconds, before any work, if a tracking server does not answer."""
    uri = tracking_uri(config.tracking)
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=5):
            pass
    except OSError as error:
        raise TrackingError(
            f"cannot reach the MLflow tracking server at {uri} ({error}); start it "
            "(see README, Scale out) or point tracking.uri / MLFLOW_TRACKING_URI elsewhere"
        ) from None


def open_store(config: Config) -> Store:
    """The configured store, with the study's experiment created if new (a new SQLite store
    in write-ahead-log mode)."""
    uri = tracking_uri(config.tracking)
    if (database := sqlite_file(uri)) is not None:
        write_ahead(database)
    client = RetryingClient(uri)
    return Store(client, experiment_id(client, config.tracking.experiment))


def experiment_id(client: MlflowClient, name: str) -> str:
    """The id of experiment `name`, created (a SQLite store's artifacts beside it) if new,
    tagged as a model-training experiment with a description."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = None
        if client.tracking_uri.startswith("sqlite:////"):  # beside the database
            database = Path(client.tracking_uri.removeprefix("sqlite:///"))
            location = (database.parent / ARTIFACTS / name).as_uri()
        return client.create_experiment(name, location, tags=EXPERIMENT_TAGS)
    for key, value in EXPERIMENT_TAGS.items():
        if key not in experiment.tags:
            client.set_experiment_tag(experiment.experiment_id, key, value)
    return experiment.experiment_id


def runs_table_url(config: Config, host: str | None = None) -> str:
    """The MLflow UI's runs table of the study's experiment, as a fresh browser opens it.

    MLflow 3.17's UI does not choose its pages by the experiment's `mlflow.experimentKind`
    tag but by a browser-wide switch, "GenAI" unless the browser's localStorage or the URL's
    `workflowType` says otherwise: a bare `#/experiments/<id>` opens on the GenAI Overview.
    This link names the runs page and the model-training workflow. `host`: where the UI is
    served; by default the tracking server itself for an http(s) store, else `mlflow ui`'s
    default address (see `ui_command`)."""
    uri = tracking_uri(config.tracking)
    if host is None:
        host = uri if uri.startswith(("http://", "https://")) else f"{UI_HOST}:{UI_PORT}"
    experiment = MlflowClient(uri).get_experiment_by_name(config.tracking.experiment)
    if experiment is None:
        raise TrackingError(
            f"no MLflow experiment {config.tracking.experiment!r} in {uri} yet: train a seed first"
        )
    route = f"/experiments/{experiment.experiment_id}/runs"
    return f"{host.rstrip('/')}/#{route}?workflowType=machine_learning"


def ui_command(config: Config, port: int = UI_PORT) -> str | None:
    """The command that serves the MLflow UI of a local SQLite store on `port` (None for
    other stores: a tracking server serves its own UI; a database's URI may hold a password)."""
    uri = tracking_uri(config.tracking)
    if not uri.startswith("sqlite:///"):
        return None
    return f"mlflow ui --backend-store-uri {shlex.quote(uri)} --port {port}"
