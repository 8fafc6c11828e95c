"""MLflow runs: opened, logged to and ended by outcome; the study's parent run; provenance."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.entities import (
    Dataset,
    DatasetInput,
    InputTag,
    LoggedModelOutput,
    Metric,
    Param,
    RunStatus,
    RunTag,
)
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from seedvar.config import Config
from seedvar.metrics import Column
from seedvar.tracking.store import Store, open_store

DATASET_ATTEMPTS = 3  # log_inputs tries: a race with a seed logging the same sets loses once
PACKAGES = ("seedvar", "torch", "transformers", "lightning", "datasets", "mlflow")
RUNNING, FINISHED, KILLED, FAILED = (
    RunStatus.to_string(status)
    for status in (RunStatus.RUNNING, RunStatus.FINISHED, RunStatus.KILLED, RunStatus.FAILED)
)
STUDY_TAG = "seedvar.study"
ROLE_TAG = "seedvar.role"
PARENT_TAG = "mlflow.parentRunId"
DESCRIPTION_TAG = "mlflow.note.content"
DATA_CONTEXT = {"train": "training", "validation": "validation"}  # the rest: evaluation


class RunStopped(Exception):
    """Raised to stop a run on purpose (a sweep pruning it, say): the run ends KILLED and
    carries the tag `tag` = "true"."""

    tag = "seedvar.stopped"


class TrackedRun:
    """An open MLflow run (MLflow's `log_batch` splits what it is given into its own limits)."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def log_params(self, params: dict[str, Any]) -> None:
        self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def log_metrics(self, metrics: dict[str, float], columns: list[Column]) -> None:
        """Log metrics named by their columns under the columns' MLflow keys."""
        keys = {column.name: column.key for column in columns}
        self.log_raw_metrics({keys[name]: value for name, value in metrics.items()})

    def log_raw_metrics(self, metrics: dict[str, float]) -> None:
        """Log metrics under the keys given."""
        now = int(time.time() * 1000)
        items = [Metric(key, float(value), now, 0) for key, value in metrics.items()]
        self.client.log_batch(self.run_id, metrics=items)

    def set_tags(self, tags: dict[str, str]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def log_folder(self, folder: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifacts(self.run_id, str(folder), artifact_path)

    def log_file(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def log_datasets(self, frames: dict[str, pd.DataFrame], fingerprints: dict[str, str]) -> None:
        """Each set as an MLflow dataset input (the runs table's Dataset column), with its
        content fingerprint as digest and its use (training, validation, evaluation)."""
        inputs = []
        for name, frame in frames.items():
            dataset = Dataset(
                name=name,
                digest=fingerprints[name],
                source_type="seedvar",
                source=json.dumps({"set": name}),
                profile=json.dumps({"num_rows": len(frame)}),
            )
            use = DATA_CONTEXT.get(name, "evaluation")
            inputs.append(DatasetInput(dataset, [InputTag("mlflow.data.context", use)]))
        for attempt in range(DATASET_ATTEMPTS):
            try:
                self.client.log_inputs(self.run_id, datasets=inputs)
                return
            except MlflowException as error:
                # Seeds that start together race to add the same dataset to the experiment
                # (MLflow looks it up, then inserts it): the loser's insert breaks the unique
                # key and rolls back; again, it finds the winner's dataset and reuses it.
                if attempt + 1 == DATASET_ATTEMPTS or not _duplicate_key(error):
                    raise
                time.sleep(0.2 * (attempt + 1))

    def log_weights(self, model_dir: Path, published: Path, upload: bool) -> str:
        """A logged model for the run (the Models column) pointing at the folder the weights
        are published to; with `upload`, the weights themselves too (else DVC keeps them).
        Returns its id."""
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
        self.client.log_outputs(self.run_id, [LoggedModelOutput(model.model_id, step=0)])
        return model.model_id

    def end(self, status: str, tags: dict[str, str] | None = None) -> None:
        """End the run FINISHED, KILLED or FAILED, with `tags`."""
        self.set_tags(tags or {})
        self.client.set_terminated(self.run_id, status)

    def last_step(self) -> int | None:
        """The latest training step logged so far (an earlier attempt's, when resumed); MLflow's
        system metrics count their own samples, not steps, and are left out."""
        metrics = self.client.get_run(self.run_id).data.metrics
        keys = [key for key in metrics if not key.startswith("system/")]
        steps = [p.step for key in keys for p in self.client.get_metric_history(self.run_id, key)]
        return max(steps, default=None)


def _duplicate_key(error: MlflowException) -> bool:
    """Whether the store refused a row whose unique key exists (SQLite or PostgreSQL)."""
    message = str(error).lower()
    return "unique constraint" in message or "duplicate key" in message


def start_run(
    config: Config,
    run_name: str,
    tags: dict[str, str] | None = None,
    parent_run_id: str | None = None,
    resume_run_id: str | None = None,
) -> TrackedRun:
    """Start a run (a child of `parent_run_id` if given), or reopen `resume_run_id`, the run of
    an interrupted attempt at the same work (tagged `seedvar.resumed`). Its opener ends it."""
    store = open_store(config)
    if resume_run_id:
        store.client.update_run(resume_run_id, status=RUNNING)
        resumed = TrackedRun(store.client, resume_run_id)
        resumed.set_tags({"seedvar.resumed": "true", **(tags or {})})
        return resumed
    all_tags = {**context_tags(config), **(tags or {})}
    if parent_run_id:
        all_tags[PARENT_TAG] = parent_run_id
    run = store.client.create_run(store.experiment_id, run_name=run_name, tags=all_tags)
    return TrackedRun(store.client, run.info.run_id)


@contextmanager
def open_run(
    config: Config,
    run_name: str,
    tags: dict[str, str] | None = None,
    parent_run_id: str | None = None,
    resume_run_id: str | None = None,
    holds: Callable[[], bool] | None = None,
) -> Iterator[TrackedRun]:
    """`start_run` as a context: the run ends by its outcome (`ended_by_outcome`)."""
    run = start_run(config, run_name, tags, parent_run_id, resume_run_id)
    with ended_by_outcome(run.client, run.run_id, holds):
        yield run


@contextmanager
def ended_by_outcome(
    client: MlflowClient, run_id: str, holds: Callable[[], bool] | None = None
) -> Iterator[None]:
    """End `run_id` FINISHED, or KILLED (interrupted or stopped on purpose), or FAILED.

    `holds`: whether this process still holds the work the run records. Once it does not
    (another attempt took the work over, run included, and will end the run itself), the run is
    left as it is, whatever happens here."""
    held = holds or (lambda: True)
    try:
        yield
    except (KeyboardInterrupt, RunStopped) as stop:
        if held():
            if isinstance(stop, RunStopped):
                client.set_tag(run_id, stop.tag, "true")
            client.set_terminated(run_id, KILLED)
        raise
    except BaseException:
        if held():
            client.set_terminated(run_id, FAILED)
        raise
    if held():
        client.set_terminated(run_id, FINISHED)


def context_tags(config: Config) -> dict[str, str]:
    """Tags every run of a study carries: recipe hash, profile, MLflow's source tags (the
    Source and Version columns), DVC experiment if any."""
    tags = {STUDY_TAG: config.study_hash(), "seedvar.profile": config.profile}
    tags |= {"mlflow.source.name": "seedvar", "mlflow.source.type": "LOCAL"}
    commit = _git("rev-parse", "HEAD")
    if commit:
        tags["mlflow.source.git.commit"] = commit
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc.exp_name"] = os.environ["DVC_EXP_NAME"]
    return tags


def study_label(config: Config) -> str:
    """The study a run belongs to, in run names: profile and recipe hash (a sweep trial's
    configuration has its own)."""
    return f"{config.profile} {config.study_hash()}"


def seed_run_name(config: Config, seed: int) -> str:
    """A seed's run name: the seed, then its study."""
    return f"seed-{seed} of {study_label(config)}"


def study_run_id(store: Store, config: Config) -> str:
    """The parent run of the study (same recipe, any seeds), created on first use."""
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
    run = store.client.create_run(
        store.experiment_id,
        run_name=f"study {study_label(config)}",
        tags={**context_tags(config), ROLE_TAG: "study", DESCRIPTION_TAG: description},
    )
    study = TrackedRun(store.client, run.info.run_id)
    study.log_params({**config.recipe(per_seed=False), "seeds": config.seeds})
    # no process of its own runs it: it holds the recipe now and the results after `report`
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
