"""Resumable seeds: a checkpoint of everything training needs to continue exactly.

Every n optimizer steps the Trainer state (weights, optimizer, scheduler, loop progress, the
training loader's position in the epoch via its `state_dict`) and the RNG state (dropout) are
saved atomically. A seed started again with that checkpoint present continues from it; on
CPU its final predictions equal those of an uninterrupted run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning as L
import torch

from seedvar.files import temporary


def batches_done_in_epoch(trainer: L.Trainer) -> int:
    """How many batches of the current epoch training has finished.

    Lightning keeps this count in its loop progress, which has no public accessor: this is
    the one place seedvar reads it (tests/test_resume.py fails if Lightning changes it)."""
    return trainer.fit_loop.epoch_loop.batch_progress.current.processed  # type: ignore[attr-defined]


class ResumeCheckpoint(L.Callback):
    """Saves the checkpoint at `path` every `every_n_steps` steps; its own state (saved in the
    checkpoint by Lightning) is the RNG state, which Lightning's checkpoint leaves out.
    seedvar's own rather than Lightning's ModelCheckpoint: that one saves after a step (the
    step's RNG draws already spent), into a folder it creates with parents, and without the
    RNG state, so a resumed seed would not retrace the same dropout masks."""

    def __init__(self, path: Path, every_n_steps: int) -> None:
        self.path = path
        self.every_n_steps = every_n_steps

    def on_train_batch_start(
        self, trainer: L.Trainer, module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        # Saved before a batch rather than after one: by then the LR scheduler has stepped too,
        # so weights, optimizer, scheduler, RNG and batch position all describe step k.
        step = trainer.global_step
        if step == 0 or step % self.every_n_steps:
            return
        # not parents=True: a work folder taken over by another attempt must not come back
        self.path.parent.mkdir(exist_ok=True)
        partial = temporary(self.path)
        trainer.save_checkpoint(partial)
        os.replace(partial, self.path)

    def state_dict(self) -> dict[str, Any]:
        return {
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        torch.set_rng_state(state_dict["torch_rng"])
        if state_dict["cuda_rng"]:
            torch.cuda.set_rng_state_all(state_dict["cuda_rng"])
