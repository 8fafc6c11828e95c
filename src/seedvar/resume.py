"""Resumable seeds: a checkpoint of everything training needs to continue exactly.

Every n optimizer steps the Trainer state (weights, optimizer, scheduler, loop progress) is
saved atomically, together with the position in the epoch's batches and the RNG state
(dropout). A seed started again with that checkpoint present continues from it; on CPU its
final predictions equal those of an uninterrupted run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import lightning as L
import torch

CHECKPOINT = "resume.ckpt"
PROGRESS = "resume.json"


def resume_checkpoint(directory: Path) -> Path | None:
    """The resumable checkpoint in `directory`, if one was completely written."""
    path = directory / CHECKPOINT
    return path if path.is_file() and (directory / PROGRESS).is_file() else None


class ResumeCheckpoint(L.Callback):
    """Saves `directory/resume.ckpt` every `every_n_steps` steps and restores what Lightning's
    own checkpoint leaves out: the batch position within the epoch and the RNG state."""

    def __init__(self, directory: Path, every_n_steps: int) -> None:
        self.directory = directory
        self.every_n_steps = every_n_steps
        self.skip_batches = 0

    def on_train_batch_start(self, trainer: L.Trainer, module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:  # fmt: skip
        # Saved before a batch rather than after one: by then the LR scheduler has stepped too,
        # so weights, optimizer, scheduler, RNG and batch position all describe step k.
        step = trainer.global_step
        if step == 0 or step % self.every_n_steps:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = self.directory / f"{CHECKPOINT}.partial"
        trainer.save_checkpoint(partial)
        os.replace(partial, self.directory / CHECKPOINT)
        progress = self.directory / f"{PROGRESS}.partial"
        progress.write_text(json.dumps({"step": step}))
        os.replace(progress, self.directory / PROGRESS)

    def on_save_checkpoint(self, trainer: L.Trainer, module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:  # fmt: skip
        checkpoint["seedvar"] = {
            "batches_done_in_epoch": trainer.fit_loop.epoch_loop.batch_progress.current.processed,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def on_load_checkpoint(self, trainer: L.Trainer, module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:  # fmt: skip
        state = checkpoint["seedvar"]
        self.skip_batches = state["batches_done_in_epoch"]
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"]:
            torch.cuda.set_rng_state_all(state["cuda_rng"])

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        # Lightning does not call on_train_epoch_start for an epoch resumed midway, and builds
        # the dataloader after restoring: here it exists, and no batch has been drawn yet.
        trainer.train_dataloader.batch_sampler.skip = self.skip_batches
        self.skip_batches = 0
