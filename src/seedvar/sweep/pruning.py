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
    """Reports the seed's validation accuracy (`key`) after every validation, at its epoch, or
    `by_step` at its training step (the pruner compares the same seed and step across trials);
    prunes if told to, raising RunPruned (not optuna-integration's callback: the seed's run ends
    KILLED and tagged, not FAILED)."""

    def __init__(self, trial: optuna.Trial, key: str, by_step: bool = False) -> None:
        self.trial, self.key, self.by_step = trial, key, by_step

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or self.key not in trainer.callback_metrics:
            return
        unit, at = (
            ("step", trainer.global_step) if self.by_step else ("epoch", trainer.current_epoch)
        )
        self.trial.report(float(trainer.callback_metrics[self.key]), at)
        if self.trial.should_prune():
            raise tracking.RunPruned(f"pruned after {unit} {at}")


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
