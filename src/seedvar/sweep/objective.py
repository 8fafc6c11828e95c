"""The serial sweep's objective: k seeds of one configuration through the same seed job as a
study, so every configuration gets both an accuracy and a spread across seeds; and the
callbacks that prune a trial's seeds."""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import optuna
from optuna.storages import BaseStorage

from seedvar import tracking
from seedvar.config import Config
from seedvar.metrics import validation_key
from seedvar.seeds.finished import FinishedSeed
from seedvar.seeds.seed import run_seed
from seedvar.sweep.space import drawn, trial_config
from seedvar.sweep.trial import prunes, record_trial, seed_tags, start_trial_run


class PrunedSeed(tracking.RunStopped):
    """The sweep's pruner stopped this trial while one of its seeds trained."""

    tag = "seedvar.pruned"


class PruneOnValidation(L.Callback):
    """Reports the first seed's validation accuracy (`key`) after every epoch (step = epoch,
    so the pruner compares the same seed and epoch across trials); prunes if told to. seedvar's
    own rather than optuna-integration's Lightning callback: pruning must raise PrunedSeed, so
    that the seed's MLflow run ends KILLED and tagged, not FAILED."""

    def __init__(self, trial: optuna.Trial, key: str) -> None:
        self.trial, self.key = trial, key

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or self.key not in trainer.callback_metrics:
            return
        epoch = trainer.current_epoch
        self.trial.report(float(trainer.callback_metrics[self.key]), epoch)
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


def objective(trial: optuna.Trial, base: Config) -> float | list[float]:
    """Train k seeds of one configuration; score it by its mean primary accuracy (and the
    spread of the first diagnostic set's headline mean)."""
    params = drawn(trial, base.sweep.space)
    config = trial_config(base, params)
    run = start_trial_run(trial, config, params)
    try:
        with tracking.ended_by_outcome(run.client, run.run_id):
            per_seed = {}
            for seed in range(base.sweep.seeds_per_trial):
                reports = seed == 0 and prunes(base.sweep)
                per_seed[seed] = _seed_metrics(config.with_seed(seed), trial, reports, run.run_id)
            values = record_trial(trial, config, per_seed, run)
    except PrunedSeed as pruned:  # the seed and trial runs ended KILLED; now tell Optuna
        raise optuna.TrialPruned(str(pruned)) from None
    return values[0] if len(values) == 1 else values


def _seed_metrics(
    config: Config, trial: optuna.Trial, reports: bool, parent_run_id: str
) -> dict[str, float]:
    """A seed's metrics: read back if it already finished, else trained now (reporting to
    `trial` for pruning if `reports`)."""
    metrics = FinishedSeed(Path(config.output_dir), config.train.seed).metrics()
    if metrics is not None:
        return metrics
    key = validation_key(config.task.validation)
    callbacks: list[L.Callback] = [PruneOnValidation(trial, key)] if reports else []
    tags = seed_tags(config)
    return run_seed(config, callbacks=callbacks, parent_run_id=parent_run_id, run_tags=tags).metrics
