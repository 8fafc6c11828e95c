"""What stops a sweep trial's seeds: the first reports validation accuracy and is pruned when the
pruner says so (a Lightning callback); every seed stops once its trial ended on another (a
check run every few seconds)."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from seedvar import tracking


class PruneOnValidation(L.Callback):
    """Reports the seed's validation accuracy (`key`) after every epoch (step = epoch: the pruner
    compares the same seed and epoch across trials); prunes if told to, raising RunPruned (not
    optuna-integration's callback: the seed's run ends KILLED and tagged, not FAILED)."""

    def __init__(self, trial: optuna.Trial, key: str) -> None:
        self.trial, self.key = trial, key

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or self.key not in trainer.callback_metrics:
            return
        epoch = trainer.current_epoch
        self.trial.report(float(trainer.callback_metrics[self.key]), epoch)
        if self.trial.should_prune():
            raise tracking.RunPruned(f"pruned after epoch {epoch}")


def stop_with_trial(storage: BaseStorage, trial_id: int) -> Callable[[], None]:
    """A check (`seeds.seed.Every`'s) that stops a seed once its trial was pruned (RunPruned) or
    failed (RunStopped) on another seed, as the storage says."""

    def check() -> None:
        state = storage.get_trial(trial_id).state
        if state == TrialState.PRUNED:
            raise tracking.RunPruned("the trial was pruned on its first seed's validation accuracy")
        if state == TrialState.FAIL:
            raise tracking.RunStopped("the trial failed on another seed")

    return check
