"""MLflow tracking: the store (URI, reachability, the study's experiment, the UI's address), runs
opened, logged to and ended by outcome, the study's parent run, provenance. Writes that meet a
busy store are retried (retry.py); a seed's curves go through logger.py (it loads Lightning)."""

from __future__ import annotations

import json
import os
import platform
import shlex
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow import entities
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from seedvar.config import Config, TrackingConfig
from seedvar.errors import TrackingError
from seedvar.metrics import Column
from seedvar.project import project_root
from seedvar.tracking.retry import RetryingClient

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
ARTIFACTS = "artifacts"  # a SQLite store's artifacts: mlruns/artifacts beside mlruns/mlflow.db
UI_HOST, UI_PORT = "http://127.0.0.1", 5000  # where `mlflow ui` serves by default
EXPERIMENT_TAGS = {
    # MLflow 3.17's UI picks its pages by its own switch, not by this tag (see runs_table_url)
    "mlflow.experimentKind": "custom_model_development",
    "mlflow.note.content": "A seedvar seed-variance study: one parent run per study (its "
    "results and report), one child run per seed (its training curves, its metrics on the "
    "task's and the diagnostic sets, predictions). Compare seeds by adding the diagnostic "
    "sets' columns to the runs table.",
}
DATASET_ATTEMPTS = 3  # log_inputs tries: a race with a seed logging the same sets loses once
PACKAGES = ("seedvar", "torch", "transformers", "lightning", "datasets", "mlflow")
RUNNING, FINISHED, KILLED, FAILED = "RUNNING", "FINISHED", "KILLED", "FAILED"  # run statuses
STUDY_TAG, ROLE_TAG = "seedvar.study", "seedvar.role"
PARENT_TAG, DESCRIPTION_TAG = "mlflow.parentRunId", "mlflow.note.content"
DATA_CONTEXT = {"train": "training", "validation": "validation"}  # the rest: evaluation


@dataclass(frozen=True)
class Store:
    """The configured tracking store, opened: a client of it and the id of the study's
    experiment in it."""

    client: RetryingClient
    experiment_id: str


def tracking_uri(tracking: TrackingConfig) -> str:
    """Config value, else MLFLOW_TRACKING_URI, else the SQLite store under mlruns/; a relative
    SQLite path made absolute at the project root (DVC's temporary experiments; MLflow caches
    stores by URI, not by folder)."""
    uri = tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = f"sqlite:///{project_root() / uri.removeprefix('sqlite:///')}"
    return uri


def sqlite_file(uri: str) -> Path | None:
    """The database file of a SQLite store's URI (None for other stores)."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:////") else None


@cache
def write_ahead(database: Path) -> None:
    """Put a SQLite store in write-ahead-log mode (once; the file keeps it): readers (an `mlflow
    ui`) and the seeds' writes never block each other."""
    database.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(database, timeout=60)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def check_reachable(config: Config) -> None:
    """Stop in seconds, before any work, if a tracking server does not answer."""
    uri = tracking_uri(config.tracking)
    if not uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=5).close()
    except OSError as error:
        raise TrackingError(
            f"cannot reach the MLflow tracking server at {uri} ({error}); start it "
            "(see README, Scale out) or point tracking.uri / MLFLOW_TRACKING_URI elsewhere"
        ) from None


SQLITE_WRITERS = 8  # seeds at once from which one SQLite file holds them up (docs/mlflow.md)


def check_writers(config: Config, at_once: int) -> None:
    """TrackingError, before any training, when `at_once` seeds would write to one SQLite
    file: it takes one write at a time for the whole database."""
    database = sqlite_file(tracking_uri(config.tracking))
    if database is None or at_once < SQLITE_WRITERS:
        return
    raise TrackingError(
        f"{at_once} seeds at once would write to the SQLite store {database}, which takes one "
        f"write at a time; from {SQLITE_WRITERS} seeds at once use PostgreSQL (--set "
        "tracking.uri=postgresql://USER:PASSWORD@HOST/mlflow, set up as docs/mlflow.md "
        "says) or an `mlflow server` (--set tracking.uri=http://HOST:5000), or train fewer at "
        "once (raise ray.cpus_per_seed or ray.gpus_per_seed)"
    )


def open_store(config: Config) -> Store:
    """The configured store, the study's experiment created if new (with a SQLite store's
    artifacts beside it), tagged as a model-training experiment with a description."""
    uri = tracking_uri(config.tracking)
    if (database := sqlite_file(uri)) is not None:
        write_ahead(database)
    client, name = RetryingClient(uri), config.tracking.experiment
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = (database.parent / ARTIFACTS / name).as_uri() if database else None
        return Store(client, client.create_experiment(name, location, tags=EXPERIMENT_TAGS))
    for key, value in EXPERIMENT_TAGS.items():
        if key not in experiment.tags:
            client.set_experiment_tag(experiment.experiment_id, key, value)
    return Store(client, experiment.experiment_id)


def runs_table_url(config: Config, host: str | None = None) -> str:
    """The MLflow UI's runs table of the study's experiment, the model-training workflow named
    (MLflow 3.17's UI shows "GenAI" pages unless `workflowType` says otherwise). `host`: where the
    UI is served (default: an http(s) store, else `mlflow ui`'s address)."""
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
    """The command that serves the MLflow UI of a local SQLite store (None for other stores: a
    tracking server serves its own UI; a database's URI may hold a password)."""
    uri = tracking_uri(config.tracking)
    if not uri.startswith("sqlite:///"):
        return None
    return f"mlflow ui --backend-store-uri {shlex.quote(uri)} --port {port}"


class RunStopped(Exception):
    """Raised to stop a run on purpose: the run ends KILLED, tagged `tag` = "true"."""

    tag = "seedvar.stopped"


class RunPruned(RunStopped):
    """A sweep's pruner stopped the run's trial."""

    tag = "seedvar.pruned"


@dataclass(frozen=True)
class TrackedRun:
    """An open MLflow run (MLflow's `log_batch` splits what it is given into its own limits)."""

    client: MlflowClient
    run_id: str

    def log_params(self, params: dict[str, Any]) -> None:
        self.client.log_batch(
            self.run_id, params=[entities.Param(k, str(v)) for k, v in params.items()]
        )

    def log_metrics(self, metrics: dict[str, float], columns: list[Column]) -> None:
        """Log metrics named by their columns under the columns' MLflow keys."""
        keys = {column.name: column.key for column in columns}
        self.log_raw_metrics({keys[name]: value for name, value in metrics.items()})

    def log_raw_metrics(self, metrics: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        items = [entities.Metric(key, float(value), now, 0) for key, value in metrics.items()]
        self.client.log_batch(self.run_id, metrics=items)

    def set_tags(self, tags: dict[str, str]) -> None:
        self.client.log_batch(self.run_id, tags=[entities.RunTag(k, v) for k, v in tags.items()])

    def log_folder(self, folder: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifacts(self.run_id, str(folder), artifact_path)

    def log_file(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def log_datasets(self, frames: dict[str, pd.DataFrame], fingerprints: dict[str, str]) -> None:
        """Each set as a dataset input (the runs table's Dataset column), its content
        fingerprint as digest, its use (training, validation, evaluation) as context."""
        inputs = []
        for name, frame in frames.items():
            source, rows = json.dumps({"set": name}), json.dumps({"num_rows": len(frame)})
            dataset = entities.Dataset(name, fingerprints[name], "seedvar", source, profile=rows)
            use = entities.InputTag("mlflow.data.context", DATA_CONTEXT.get(name, "evaluation"))
            inputs.append(entities.DatasetInput(dataset, [use]))
        for attempt in range(1, DATASET_ATTEMPTS + 1):
            try:
                return self.client.log_inputs(self.run_id, datasets=inputs)
            except MlflowException as error:
                # Seeds that start together race to add the same dataset to the experiment
                # (MLflow looks it up, then inserts it): the loser's insert breaks the unique
                # key and rolls back; again, it finds the winner's dataset and reuses it.
                message = str(error).lower()
                duplicate = "unique constraint" in message or "duplicate key" in message
                if attempt == DATASET_ATTEMPTS or not duplicate:
                    raise
                time.sleep(0.2 * attempt)

    def log_weights(self, model_dir: Path, published: Path, upload: bool) -> str:
        """A logged model for the run (the Models column) pointing at the folder the weights
        are published to; with `upload`, the weights too (else DVC keeps them). Its id."""
        experiment = self.client.get_run(self.run_id).info.experiment_id
        model = self.client.create_logged_model(
            experiment,
            name=published.parent.name,
            source_run_id=self.run_id,
            tags={"seedvar.weights": str(published.resolve())},
            model_type="transformers sequence classifier",
        )
        if upload:
            self.client.log_model_artifacts(model.model_id, str(model_dir))
        self.client.finalize_logged_model(model.model_id, "READY")
        self.client.log_outputs(self.run_id, [entities.LoggedModelOutput(model.model_id, step=0)])
        return model.model_id

    def end(self, status: str, tags: dict[str, str] | None = None) -> None:
        """End the run FINISHED, KILLED or FAILED, with `tags`."""
        self.set_tags(tags or {})
        self.client.set_terminated(self.run_id, status)

    def last_step(self) -> int | None:
        """The latest training step logged so far (an earlier attempt's, when resumed); system
        metrics, which count samples, not steps, left out."""
        metrics = self.client.get_run(self.run_id).data.metrics
        keys = [key for key in metrics if not key.startswith("system/")]
        steps = [p.step for key in keys for p in self.client.get_metric_history(self.run_id, key)]
        return max(steps, default=None)


def start_run(
    config: Config,
    run_name: str,
    tags: dict[str, str] | None = None,
    parent_run_id: str | None = None,
    resume_run_id: str | None = None,
) -> TrackedRun:
    """Start a run (a child of `parent_run_id` if given), or reopen `resume_run_id`, an
    interrupted attempt's run (tagged `seedvar.resumed`). Its opener ends it."""
    store = open_store(config)
    if resume_run_id:
        store.client.update_run(resume_run_id, status=RUNNING)
        resumed = TrackedRun(store.client, resume_run_id)
        resumed.set_tags({"seedvar.resumed": "true", **(tags or {})})
        return resumed
    parent = {PARENT_TAG: parent_run_id} if parent_run_id else {}
    all_tags = {**context_tags(config), **(tags or {}), **parent}
    run = store.client.create_run(store.experiment_id, run_name=run_name, tags=all_tags)
    return TrackedRun(store.client, run.info.run_id)


@contextmanager
def ending(run: TrackedRun, holds: Callable[[], bool] = lambda: True) -> Iterator[TrackedRun]:
    """`run` for the block, then ended FINISHED, or KILLED (interrupted, or stopped on purpose),
    or FAILED; left as it is once `holds()` is false (another attempt took the work and its run
    over)."""
    try:
        yield run
    except BaseException as error:
        if holds():
            killed = isinstance(error, KeyboardInterrupt | RunStopped)
            tags = {error.tag: "true"} if isinstance(error, RunStopped) else None
            run.end(KILLED if killed else FAILED, tags)
        raise
    if holds():
        run.end(FINISHED)


def context_tags(config: Config) -> dict[str, str]:
    """Every run's tags: recipe hash, profile, MLflow's source tags (the Source and Version
    columns), the DVC experiment if any."""
    tags = {STUDY_TAG: config.study_hash(), "seedvar.profile": config.profile}
    tags |= {"mlflow.source.name": "seedvar", "mlflow.source.type": "LOCAL"}
    if commit := _git("rev-parse", "HEAD"):
        tags["mlflow.source.git.commit"] = commit
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc.exp_name"] = os.environ["DVC_EXP_NAME"]
    return tags


def study_label(config: Config) -> str:
    """The study a run belongs to, in run names: profile and recipe hash."""
    return f"{config.profile} {config.study_hash()}"


def seed_run_name(config: Config, seed: int) -> str:
    return f"seed-{seed} of {study_label(config)}"


def study_run_id(store: Store, config: Config) -> str:
    """The study's parent run (same recipe, any seeds), made on first use: it holds the recipe,
    and the results after `report`."""
    found = store.client.search_runs(
        [store.experiment_id],
        filter_string=f"tags.`{STUDY_TAG}` = '{config.study_hash()}' "
        f"and tags.`{ROLE_TAG}` = 'study'",
        max_results=1,
        order_by=["attributes.start_time ASC"],
    )
    if found:
        return found[0].info.run_id
    description = (
        f"The {config.profile} study {config.study_hash()}: {len(config.seeds)} seeds of "
        f"{config.model.name}; its children are the seeds, its artifacts results/ and report/."
    )
    tags = {ROLE_TAG: "study", DESCRIPTION_TAG: description}
    study = start_run(config, f"study {study_label(config)}", tags)
    study.log_params({**config.recipe(per_seed=False), "seeds": config.seeds})
    study.end(FINISHED)
    return study.run_id


def log_study_results(config: Config, metrics: dict[str, float], folders: list[Path]) -> str:
    """Log the study's aggregate metrics and files (results, report) on its parent run."""
    store = open_store(config)
    study = TrackedRun(store.client, study_run_id(store, config))
    study.log_raw_metrics(metrics)
    for folder in folders:
        study.log_folder(folder, folder.name)
    study.end(FINISHED)
    return study.run_id


def provenance() -> dict[str, str]:
    """Package versions, git commit and dirtiness, host: what it takes to reproduce a run."""
    info = {f"version.{name}": _package_version(name) for name in PACKAGES}
    info["python"] = platform.python_version()
    info["git.commit"] = _git("rev-parse", "HEAD") or "unknown"
    status = _git("status", "--porcelain", "--untracked-files=no")
    info["git.dirty"] = "unknown" if status is None else str(bool(status))
    return info


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None
