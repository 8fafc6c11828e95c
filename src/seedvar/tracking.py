"""MLflow: the store, runs opened and ended by outcome, params, metrics, artifacts, provenance,
and the Lightning logger that sends a seed's training curves to its run."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd
from lightning.pytorch.loggers import MLFlowLogger
from mlflow.entities import (
    Dataset,
    DatasetInput,
    InputTag,
    LoggedModelOutput,
    Metric,
    Param,
    RunStatus,
)
from mlflow.tracking import MlflowClient

from seedvar.config import Config, TrackingConfig
from seedvar.errors import TrackingError
from seedvar.metrics import mlflow_key

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
DEFAULT_ARTIFACT_ROOT = Path("mlruns/artifacts")
PACKAGES = ("seedvar", "torch", "transformers", "lightning", "datasets", "mlflow")
PARAMS_PER_BATCH, METRICS_PER_BATCH = 100, 1000  # MLflow's limits per log_batch call
STUDY_TAG = "seedvar.study"
ROLE_TAG = "seedvar.role"
PARENT_TAG = "mlflow.parentRunId"
DESCRIPTION_TAG = "mlflow.note.content"
DATA_CONTEXT = {"train": "training", "validation": "validation"}  # the rest: evaluation


def tracking_uri(tracking: TrackingConfig) -> str:
    """Config value, else MLFLOW_TRACKING_URI, else the SQLite store under mlruns/; a relative
    SQLite path is made absolute (MLflow caches stores by URI, not by working directory)."""
    uri = tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = f"sqlite:///{Path(uri.removeprefix('sqlite:///')).resolve()}"
    return uri


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


EXPERIMENT_TAGS = {
    # MLflow 3's UI opens a model-training experiment on its runs table, not the GenAI pages
    "mlflow.experimentKind": "custom_model_development",
    "mlflow.note.content": "A seedvar seed-variance study: one parent run per study (its "
    "results and report), one child run per seed (its training curves, MNLI and HANS metrics, "
    "predictions). Compare seeds by adding hans/... columns to the runs table.",
}


def experiment_id(client: MlflowClient, name: str) -> str:
    """The id of experiment `name`, created (artifacts under mlruns/ for local stores) if new,
    tagged as a model-training experiment with a description."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = None
        if client.tracking_uri.startswith("sqlite:"):
            location = (DEFAULT_ARTIFACT_ROOT.resolve() / name).as_uri()
        return client.create_experiment(name, location, tags=EXPERIMENT_TAGS)
    for key, value in EXPERIMENT_TAGS.items():
        if key not in experiment.tags:
            client.set_experiment_tag(experiment.experiment_id, key, value)
    return experiment.experiment_id


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


class RunStopped(Exception):
    """Raised to stop a run on purpose (a sweep pruning it, say): the run ends KILLED and
    carries the tag `tag` = "true"."""

    tag = "seedvar.stopped"


class TrackedRun:
    """An open MLflow run."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def log_params(self, params: dict[str, Any]) -> None:
        items = [Param(key, str(value)) for key, value in params.items()]
        for start in range(0, len(items), PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[start : start + PARAMS_PER_BATCH])

    def log_metrics(self, metrics: dict[str, float], prefix: str = "") -> None:
        """Log paper-named metrics under MLflow-safe keys (after `prefix`)."""
        self.log_raw_metrics({prefix + mlflow_key(name): v for name, v in metrics.items()})

    def log_raw_metrics(self, metrics: dict[str, float]) -> None:
        """Log metrics under the keys given."""
        now = int(time.time() * 1000)
        items = [Metric(key, float(value), now, 0) for key, value in metrics.items()]
        for start in range(0, len(items), METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=items[start : start + METRICS_PER_BATCH])

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
        self.client.log_inputs(self.run_id, datasets=inputs)

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

    def lightning_logger(self) -> MLFlowLogger:
        """A Lightning logger that writes into this run and leaves ending it to us."""
        return RunLogger(tracking_uri=self.client.tracking_uri, run_id=self.run_id)


class RunLogger(MLFlowLogger):
    """Lightning's MLFlowLogger on a run that seedvar opened: training curves and Lightning's
    metrics go to it; the run's end (FINISHED only after evaluation) stays with its opener."""

    def finalize(self, status: str = "success") -> None:
        """Leave the run open: evaluation and publishing still follow training."""


def open_store(config: Config) -> tuple[MlflowClient, str]:
    """A client for the configured store and the id of the study's experiment."""
    client = MlflowClient(tracking_uri(config.tracking))
    return client, experiment_id(client, config.tracking.experiment)


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


def study_run_id(client: MlflowClient, experiment: str, config: Config) -> str:
    """The parent run of the study (same recipe, any seeds), created on first use."""
    found = client.search_runs(
        [experiment],
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
    run = client.create_run(
        experiment,
        run_name=f"study {config.profile} {config.study_hash()}",
        tags={**context_tags(config), ROLE_TAG: "study", DESCRIPTION_TAG: description},
    )
    recipe = {k: v for k, v in config.flat().items() if not k.startswith("train.seed")}
    TrackedRun(client, run.info.run_id).log_params({**recipe, "seeds": config.seeds})
    # no process of its own runs it: it holds the recipe now and the results after `report`
    client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run.info.run_id


@contextmanager
def open_run(
    config: Config,
    run_name: str,
    tags: dict[str, str] | None = None,
    parent_run_id: str | None = None,
    resume_run_id: str | None = None,
) -> Iterator[TrackedRun]:
    """Open a run (a child of `parent_run_id` if given), or reopen `resume_run_id`, the run of
    an interrupted attempt at the same work. It ends by its outcome (`ended_by_outcome`)."""
    client, experiment = open_store(config)
    if resume_run_id:
        client.update_run(resume_run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        client.set_tag(resume_run_id, "seedvar.resumed", "true")
        run_id = resume_run_id
    else:
        all_tags = {**context_tags(config), **(tags or {})}
        if parent_run_id:
            all_tags[PARENT_TAG] = parent_run_id
        run_id = client.create_run(experiment, run_name=run_name, tags=all_tags).info.run_id
    with ended_by_outcome(client, run_id):
        yield TrackedRun(client, run_id)


@contextmanager
def ended_by_outcome(client: MlflowClient, run_id: str) -> Iterator[None]:
    """End `run_id` FINISHED, or KILLED (interrupted or stopped on purpose), or FAILED."""
    try:
        yield
    except (KeyboardInterrupt, RunStopped) as stop:
        if isinstance(stop, RunStopped):
            client.set_tag(run_id, stop.tag, "true")
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.KILLED))
        raise
    except BaseException:
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))


def log_study_results(config: Config, metrics: dict[str, float], folders: list[Path]) -> str:
    """Log the study's aggregate metrics and files (results, report) on its parent run."""
    client, experiment = open_store(config)
    study = TrackedRun(client, study_run_id(client, experiment, config))
    study.log_raw_metrics(metrics)
    for folder in folders:
        study.log_folder(folder, folder.name)
    client.set_terminated(study.run_id, RunStatus.to_string(RunStatus.FINISHED))
    return study.run_id
