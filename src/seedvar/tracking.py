"""The only module that talks to MLflow: one run per seed, its params, metrics and artifacts."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import lightning as L
from mlflow.entities import Metric, Param, RunStatus
from mlflow.tracking import MlflowClient

from seedvar.config import Config, TrackingConfig
from seedvar.metrics import mlflow_key

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
DEFAULT_ARTIFACT_ROOT = Path("mlruns/artifacts")
PACKAGES = ("seedvar", "torch", "transformers", "lightning", "datasets", "mlflow")
BATCH = 100  # MLflow accepts at most 100 params (1000 metrics) per log_batch call


def tracking_uri(tracking: TrackingConfig) -> str:
    """Config value, else MLFLOW_TRACKING_URI, else the SQLite store under mlruns/."""
    return tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


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

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        """Log paper-named metrics under MLflow-safe keys."""
        now = int(time.time() * 1000)
        items = [Metric(mlflow_key(name), float(v), now, step) for name, v in metrics.items()]
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


@contextmanager
def seed_run(
    config: Config, run_name: str, tags: dict[str, str] | None = None
) -> Iterator[SeedRun]:
    """Open a run in the study's experiment; it ends FINISHED, FAILED or KILLED."""
    client = MlflowClient(tracking_uri(config.tracking))
    run = client.create_run(
        experiment_id(client, config.tracking.experiment),
        run_name=run_name,
        tags={
            "seedvar.config_hash": config.hash(),
            "seedvar.profile": config.profile,
            **(tags or {}),
        },
    )
    seed_run_ = SeedRun(client, run.info.run_id)
    try:
        yield seed_run_
    except KeyboardInterrupt:
        client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.KILLED))
        raise
    except BaseException:
        client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FINISHED))
