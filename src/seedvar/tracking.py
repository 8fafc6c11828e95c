"""The only module that talks to MLflow: one run per seed, its params, metrics and artifacts."""

from __future__ import annotations

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

import lightning as L
from mlflow.entities import Metric, Param, RunStatus
from mlflow.tracking import MlflowClient
from optuna import TrialPruned

from seedvar.config import Config, TrackingConfig
from seedvar.errors import TrackingError
from seedvar.metrics import mlflow_key

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
DEFAULT_ARTIFACT_ROOT = Path("mlruns/artifacts")
PACKAGES = ("seedvar", "torch", "transformers", "lightning", "datasets", "mlflow")
BATCH = 100  # MLflow accepts at most 100 params (1000 metrics) per log_batch call


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


def experiment_id(client: MlflowClient, name: str) -> str:
    """The id of experiment `name`, created (artifacts under mlruns/ for local stores) if new."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    location = None
    if client.tracking_uri.startswith("sqlite:"):
        location = (DEFAULT_ARTIFACT_ROOT.resolve() / name).as_uri()
    return client.create_experiment(name, artifact_location=location)


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


class SeedRun:
    """An open MLflow run for one seed."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def log_params(self, params: dict[str, Any]) -> None:
        items = [Param(key, str(value)) for key, value in params.items()]
        for start in range(0, len(items), BATCH):
            self.client.log_batch(self.run_id, params=items[start : start + BATCH])

    def log_metrics(self, metrics: dict[str, float], step: int = 0, prefix: str = "") -> None:
        """Log paper-named metrics under MLflow-safe keys (after `prefix`)."""
        now = int(time.time() * 1000)
        items = [
            Metric(prefix + mlflow_key(name), float(v), now, step) for name, v in metrics.items()
        ]
        for start in range(0, len(items), BATCH):
            self.client.log_batch(self.run_id, metrics=items[start : start + BATCH])

    def log_artifacts(self, seed_dir: Path) -> None:
        """Predictions, metrics and the resolved config (not the weights: DVC keeps those)."""
        self.client.log_artifacts(self.run_id, str(seed_dir / "predictions"), "predictions")
        for name in ("metrics.json", "config.yaml"):
            self.client.log_artifact(self.run_id, str(seed_dir / name))

    def callback(self, every_n_steps: int) -> L.Callback:
        return TrainingCurveCallback(self.client, self.run_id, every_n_steps)


class TrainingCurveCallback(L.Callback):
    """Logs the training loss and learning rate every n steps, validation accuracy per epoch."""

    def __init__(self, client: MlflowClient, run_id: str, every_n_steps: int) -> None:
        self.client = client
        self.run_id = run_id
        self.every_n_steps = every_n_steps

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        step = trainer.global_step
        if step % self.every_n_steps:
            return
        now = int(time.time() * 1000)
        learning_rate = trainer.optimizers[0].param_groups[0]["lr"]
        self.client.log_batch(
            self.run_id,
            metrics=[
                Metric("train/loss", float(outputs["loss"].item()), now, step),
                Metric("train/learning_rate", float(learning_rate), now, step),
            ],
        )

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or "val_accuracy" not in trainer.callback_metrics:
            return
        accuracy = float(trainer.callback_metrics["val_accuracy"])
        self.client.log_metric(
            self.run_id, "val/mnli_matched_accuracy", accuracy, step=trainer.current_epoch
        )


STUDY_TAG = "seedvar.study"
SWEEP_TAG = "seedvar.sweep"
ROLE_TAG = "seedvar.role"
PARENT_TAG = "mlflow.parentRunId"


def open_store(config: Config) -> tuple[MlflowClient, str]:
    """A client for the configured store and the id of the study's experiment."""
    client = MlflowClient(tracking_uri(config.tracking))
    return client, experiment_id(client, config.tracking.experiment)


def context_tags(config: Config) -> dict[str, str]:
    """Tags every run of a study carries: recipe hash, profile, DVC experiment if any."""
    tags = {STUDY_TAG: config.study_hash(), "seedvar.profile": config.profile}
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
    run = client.create_run(
        experiment,
        run_name=f"study {config.profile} {config.study_hash()}",
        tags={**context_tags(config), ROLE_TAG: "study"},
    )
    recipe = {k: v for k, v in config.flat().items() if not k.startswith("train.seed")}
    SeedRun(client, run.info.run_id).log_params({**recipe, "seeds": config.seeds})
    return run.info.run_id


@contextmanager
def seed_run(
    config: Config,
    run_name: str,
    tags: dict[str, str] | None = None,
    in_study: bool = True,
    parent_run_id: str | None = None,
    resume_run_id: str | None = None,
) -> Iterator[SeedRun]:
    """Open a run, a child of `parent_run_id` or (when `in_study`) of the study's run; or
    reopen `resume_run_id`, the run of an interrupted attempt at the same seed.

    It ends FINISHED; KILLED when interrupted or pruned; FAILED on any other error."""
    client, experiment = open_store(config)
    if resume_run_id:
        client.update_run(resume_run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        client.set_tag(resume_run_id, "seedvar.resumed", "true")
        run_id = resume_run_id
    else:
        all_tags = {**context_tags(config), "seedvar.config_hash": config.hash(), **(tags or {})}
        if parent_run_id or in_study:
            all_tags[PARENT_TAG] = parent_run_id or study_run_id(client, experiment, config)
            all_tags[ROLE_TAG] = "seed"
        run_id = client.create_run(experiment, run_name=run_name, tags=all_tags).info.run_id
    with ended_by_outcome(client, run_id):
        yield SeedRun(client, run_id)


@contextmanager
def ended_by_outcome(client: MlflowClient, run_id: str) -> Iterator[None]:
    """End `run_id` FINISHED, or KILLED (interrupted; pruned, tagged so), or FAILED."""
    try:
        yield
    except (KeyboardInterrupt, TrialPruned) as stop:
        if isinstance(stop, TrialPruned):
            client.set_tag(run_id, "seedvar.pruned", "true")
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.KILLED))
        raise
    except BaseException:
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))


@contextmanager
def trial_run(config: Config, sweep_name: str, trial_number: int, params: dict[str, Any]
              ) -> Iterator[SeedRun]:  # fmt: skip
    """The parent run of one sweep trial; its seeds become its children."""
    client, experiment = open_store(config)
    run = client.create_run(
        experiment,
        run_name=f"trial {trial_number}",
        tags={
            **context_tags(config),
            ROLE_TAG: "trial",
            SWEEP_TAG: sweep_name,
            "optuna.trial_number": str(trial_number),
        },  # fmt: skip
    )
    opened = SeedRun(client, run.info.run_id)
    opened.log_params({**{f"trial.{k}": v for k, v in params.items()}, **config.flat()})
    with ended_by_outcome(client, run.info.run_id):
        yield opened


def log_study_results(config: Config, metrics: dict[str, float], folders: list[Path]) -> str:
    """Log the study's aggregate metrics and files (results, report) on its parent run."""
    client, experiment = open_store(config)
    run_id = study_run_id(client, experiment, config)
    items = [Metric(key, float(v), int(time.time() * 1000), 0) for key, v in metrics.items()]
    for start in range(0, len(items), 1000):
        client.log_batch(run_id, metrics=items[start : start + 1000])
    for folder in folders:
        client.log_artifacts(run_id, str(folder), folder.name)
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run_id
