"""A sweep trial: k seeds of one configuration through the same seed job as a study, so every
configuration gets both an accuracy and a spread across seeds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import lightning as L
import optuna
import pandas as pd
from optuna.storages import BaseStorage

from seedvar import tracking
from seedvar.config import Config
from seedvar.metrics import (
    HANS_NON_ENTAILED,
    MNLI_MATCHED,
    MNLI_MISMATCHED,
    PAPER_COLUMNS,
    VAL_ACCURACY,
    hans_non_entailed,
    mlflow_key,
)
from seedvar.study.job import SeedJob
from seedvar.study.seed import run_seed
from seedvar.sweep.space import suggest, trial_config

SUMMARIZED = [*PAPER_COLUMNS, MNLI_MISMATCHED, HANS_NON_ENTAILED]
SWEEP_TAG = "seedvar.sweep"
OUTPUT_DIR_ATTR, SEEDS_ATTR = "output_dir", "seeds"  # where a trial's seed folders are
MLFLOW_RUN_ATTR = "mlflow_run_id"  # the trial's MLflow run


class PrunedSeed(tracking.RunStopped):
    """The sweep's pruner stopped this trial while one of its seeds trained."""

    tag = "seedvar.pruned"


class PruneOnValidation(L.Callback):
    """Reports the first seed's MNLI-m validation accuracy after every epoch (step = epoch, so
    the pruner compares the same seed and epoch across trials); prunes if told to."""

    def __init__(self, trial: optuna.Trial) -> None:
        self.trial = trial

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or VAL_ACCURACY not in trainer.callback_metrics:
            return
        epoch = trainer.current_epoch
        self.trial.report(float(trainer.callback_metrics[VAL_ACCURACY]), epoch)
        if self.trial.should_prune():
            raise PrunedSeed(f"pruned after epoch {epoch}")


class StopWithTrial(L.Callback):
    """Stops a seed once its trial has ended on another seed (seeds of a trial that run in
    parallel, on Ray): PrunedSeed when the trial was pruned, RunStopped when it failed. The
    trial's state is read from the study's storage before a training batch, at most every
    `every_seconds`."""

    def __init__(self, storage: BaseStorage, trial_id: int, every_seconds: float = 2.0) -> None:
        self.storage = storage
        self.trial_id = trial_id
        self.every_seconds = every_seconds
        self.checked = time.monotonic()

    def on_train_batch_start(self, *args: object) -> None:
        if time.monotonic() - self.checked < self.every_seconds:
            return
        self.checked = time.monotonic()
        state = self.storage.get_trial(self.trial_id).state
        if state == optuna.trial.TrialState.PRUNED:
            raise PrunedSeed("the trial was pruned on its first seed's validation accuracy")
        if state == optuna.trial.TrialState.FAIL:
            raise tracking.RunStopped("the trial failed on another seed")


def seed_summary(per_seed: list[dict[str, float]]) -> dict[str, float]:
    """Mean and std across seeds of every paper column and of HANS non-entailed accuracy."""
    table = pd.DataFrame([{**m, HANS_NON_ENTAILED: hans_non_entailed(m)} for m in per_seed])
    summary = {}
    for column in SUMMARIZED:
        summary[f"mean/{column}"] = float(table[column].mean())
        summary[f"std/{column}"] = float(table[column].std(ddof=1))
    return summary


def objective(trial: optuna.Trial, base: Config) -> float | tuple[float, float]:
    """Train k seeds of one configuration; score it by mean MNLI-m accuracy (and HANS spread)."""
    sweep = base.sweep
    params = {key: suggest(trial, key, spec) for key, spec in sweep.space.items()}
    config = trial_config(base, params)
    prune = sweep.pruner == "median" and sweep.mode == "accuracy"
    try:
        with trial_run(config, sweep.study_name, trial.number, params) as parent:
            trial.set_user_attr(MLFLOW_RUN_ATTR, parent.run_id)
            per_seed = [
                _seed_metrics(
                    config.with_seed(index), trial if prune and index == 0 else None, parent.run_id
                )
                for index in range(sweep.seeds_per_trial)
            ]
            summary = seed_summary(per_seed)
            for key, value in summary.items():
                trial.set_user_attr(key, value)
            trial.set_user_attr(OUTPUT_DIR_ATTR, config.output_dir)
            trial.set_user_attr(SEEDS_ATTR, list(range(sweep.seeds_per_trial)))
            parent.log_raw_metrics({tracking_key(key): value for key, value in summary.items()})
    except PrunedSeed as pruned:  # the seed and trial runs ended KILLED; now tell Optuna
        raise optuna.TrialPruned(str(pruned)) from None
    accuracy = summary[f"mean/{MNLI_MATCHED}"]
    if sweep.mode == "accuracy":
        return accuracy
    return accuracy, summary[f"std/{HANS_NON_ENTAILED}"]


def _seed_metrics(
    config: Config, pruned_by: optuna.Trial | None, parent_run_id: str
) -> dict[str, float]:
    """A seed's metrics: read back if it already finished, else trained now (its MLflow run
    tagged with the sweep, like its trial's)."""
    metrics = SeedJob.of(config).finished_metrics()
    if metrics is not None:
        return metrics
    callbacks = [PruneOnValidation(pruned_by)] if pruned_by else []
    tags = {SWEEP_TAG: config.sweep.study_name}
    return run_seed(config, callbacks=callbacks, parent_run_id=parent_run_id, run_tags=tags).metrics


def tracking_key(summary_key: str) -> str:
    """`mean/Lexical (nonent)` -> `mean/hans/lexical_nonent` (MLflow-safe)."""
    statistic, column = summary_key.split("/", 1)
    return f"{statistic}/{mlflow_key(column)}"


@contextmanager
def trial_run(
    config: Config, sweep_name: str, trial_number: int, params: dict[str, Any]
) -> Iterator[tracking.TrackedRun]:
    """The parent MLflow run of one sweep trial; its seeds become its children."""
    tags = {
        tracking.ROLE_TAG: "trial",
        SWEEP_TAG: sweep_name,
        "optuna.trial_number": str(trial_number),
    }
    tags[tracking.DESCRIPTION_TAG] = (
        f"Trial {trial_number} of sweep {sweep_name}: the configuration {params}, trained with "
        f"seeds 0-{config.sweep.seeds_per_trial - 1} (its child runs)."
    )
    recipe = config.recipe(per_seed=False)
    with tracking.open_run(config, f"trial {trial_number}", tags=tags) as run:
        run.log_params({**{f"trial.{k}": v for k, v in params.items()}, **recipe})
        yield run
