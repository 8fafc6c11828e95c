"""The Lightning callback that keeps a Ray seed task's heartbeat up to date."""

from __future__ import annotations

import lightning as L

from seedvar.scale.protocol import Beat


class Progress(L.Callback):
    """Keeps the heartbeat's view of training up to date (phase, step, total)."""

    def __init__(self, beat: Beat) -> None:
        self.beat = beat

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.beat.phase, self.beat.total = "training", int(getattr(module, "total_steps", 0))

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        self.beat.step = trainer.global_step

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.beat.phase = "evaluating"
