"""MLflow: the store, runs opened and ended by outcome, params, metrics, artifacts, provenance,
and the Lightning logger that sends a seed's training curves to its run."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
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
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from seedvar.config import Config, TrackingConfig
from seedvar.errors import TrackingError
from seedvar.metrics import mlflow_key

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
DATASET_ATTEMPTS = 3  # log_inputs tries: a race with a seed logging the same sets loses once
DEFAULT_ARTIFACT_ROOT = Path("mlruns/artifacts")
PACKAGES = ("seedvar", "torch", "transformers", "lightning", "datasets", "mlflow")
PARAMS_PER_BATCH, METRICS_PER_BATCH = 100, 1000  # MLflow's limits per log_batch call
STUDY_TAG = "seedvar.study"
RUNNING, FINISHED, KILLED, FAILED = (
    RunStatus.to_string(status)
    for status in (RunStatus.RUNNING, RunStatus.FINISHED, RunStatus.KILLED, RunStatus.FAILED)
)
ROLE_TAG = "seedvar.role"
PARENT_TAG = "mlflow.parentRunId"
DESCRIPTION_TAG = "mlflow.note.content"
UI_HOST, UI_PORT = "http://127.0.0.1", 5000  # where `mlflow ui` serves by default
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
    # a model-training experiment; MLflow 3.17's UI picks its pages by its own workflow
    # switch, not by this tag: seedvar's link says which (see runs_table_url)
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

    def set_tags(self, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(self.run_id, key, value)

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

    def lightning_logger(
        self, guard: Callable[[], None] | None = None, after_step: int | None = None
    ) -> MLFlowLogger:
        """A Lightning logger that writes into this run and leaves ending it to us. `guard` is
        called before everything it logs (and may raise to stop a process that lost the run);
        steps up to `after_step` are not logged again (a resumed attempt retraces the steps
        between its checkpoint and the point where the earlier attempt stopped)."""
        return RunLogger(
            tracking_uri=self.client.tracking_uri,
            run_id=self.run_id,
            guard=guard,
            after_step=after_step,
        )


class RunLogger(MLFlowLogger):
    """Lightning's MLFlowLogger on a run that seedvar opened: training curves and Lightning's
    metrics go to it; the run's end (FINISHED only after evaluation) stays with its opener."""

    def __init__(
        self,
        *args: Any,
        guard: Callable[[], None] | None = None,
        after_step: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._guard = guard or (lambda: None)
        self._after_step = after_step

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self._guard()
        if self._after_step is not None and step is not None and step <= self._after_step:
            return
        super().log_metrics(metrics, step)

    def log_hyperparams(self, params: Any) -> None:
        self._guard()
        super().log_hyperparams(params)

    def finalize(self, status: str = "success") -> None:
        """Leave the run open: evaluation and publishing still follow training."""


def _duplicate_key(error: MlflowException) -> bool:
    """Whether the store refused a row whose unique key exists (SQLite or PostgreSQL)."""
    message = str(error).lower()
    return "unique constraint" in message or "duplicate key" in message


def open_store(config: Config) -> tuple[MlflowClient, str]:
    """A client for the configured store and the id of the study's experiment."""
    client = MlflowClient(tracking_uri(config.tracking))
    return client, experiment_id(client, config.tracking.experiment)


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
        run_name=f"study {study_label(config)}",
        tags={**context_tags(config), ROLE_TAG: "study", DESCRIPTION_TAG: description},
    )
    recipe = config.recipe(per_seed=False)
    TrackedRun(client, run.info.run_id).log_params({**recipe, "seeds": config.seeds})
    # no process of its own runs it: it holds the recipe now and the results after `report`
    client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run.info.run_id


def start_run(
    config: Config,
    run_name: str,
    tags: dict[str, str] | None = None,
    parent_run_id: str | None = None,
    resume_run_id: str | None = None,
) -> TrackedRun:
    """Start a run (a child of `parent_run_id` if given), or reopen `resume_run_id`, the run of
    an interrupted attempt at the same work (tagged `seedvar.resumed`). Its opener ends it."""
    client, experiment = open_store(config)
    if resume_run_id:
        client.update_run(resume_run_id, status=RUNNING)
        client.set_tag(resume_run_id, "seedvar.resumed", "true")
        for key, value in (tags or {}).items():
            client.set_tag(resume_run_id, key, value)
        return TrackedRun(client, resume_run_id)
    all_tags = {**context_tags(config), **(tags or {})}
    if parent_run_id:
        all_tags[PARENT_TAG] = parent_run_id
    run = client.create_run(experiment, run_name=run_name, tags=all_tags)
    return TrackedRun(client, run.info.run_id)


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


def log_study_results(config: Config, metrics: dict[str, float], folders: list[Path]) -> str:
    """Log the study's aggregate metrics and files (results, report) on its parent run."""
    client, experiment = open_store(config)
    study = TrackedRun(client, study_run_id(client, experiment, config))
    study.log_raw_metrics(metrics)
    for folder in folders:
        study.log_folder(folder, folder.name)
    client.set_terminated(study.run_id, FINISHED)
    return study.run_id
