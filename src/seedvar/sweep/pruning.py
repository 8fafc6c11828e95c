"""The Lightning callbacks that stop a sweep trial's seeds where they train: its first seed
reports validation accuracy to the trial and is pruned when the pruner says so; every seed
stops once its trial has ended on another seed."""

from __future__ import annotations

import time

import lightning as L
import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from seedvar import tracking


class PruneOnValidation(L.Callback):
    """Reports the seed's validation accuracy (`key`) after every epoch (step = epoch, so the
    pruner compares the same seed and epoch across trials); prunes if told to. Not
    optuna-integration's callback: pruning raises RunPruned, so that the seed's MLflow run ends
    KILLED and tagged, not FAILED."""

    def __init__(self, trial: optuna.Trial, key: str) -> None:
        self.trial, self.key = trial, key

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or self.key not in trainer.callback_metrics:
            return
        epoch = trainer.current_epoch
        self.trial.report(float(trainer.callback_metrics[self.key]), epoch)
        if self.trial.should_prune():
            raise tracking.RunPruned(f"pruned after epoch {epoch}")


class StopWithTrial(L.Callback):
    """Stops a seed once its trial has been pruned (RunPruned) or has failed (RunStopped) on
    another seed, as the study's storage says before a training batch, at most every
    `every_seconds`."""

    def __init__(self, storage: BaseStorage, trial_id: int, every_seconds: float = 2.0) -> None:
        self.storage, self.trial_id, self.every_seconds = storage, trial_id, every_seconds
        self.checked = time.monotonic()

    def on_train_batch_start(self, *args: object) -> None:
        if time.monotonic() - self.checked < self.every_seconds:
            return
        self.checked = time.monotonic()
        state = self.storage.get_trial(self.trial_id).state
        if state == TrialState.PRUNED:
            raise tracking.RunPruned("the trial was pruned on its first seed's validation accuracy")
        if state == TrialState.FAIL:
            raise tracking.RunStopped("the trial failed on another seed")
