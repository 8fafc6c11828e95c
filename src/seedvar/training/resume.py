"""Resumable seeds: a checkpoint of all training needs to continue exactly (weights, optimizer,
scheduler, loop progress, the training loader's position, the RNG), saved atomically every
`train.checkpoint_every_minutes` (or n steps); on a CPU a resumed seed's final predictions
equal those of an uninterrupted run."""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch

from seedvar.files import link_or_copy, temporary

GROUP = "seedvar_group"  # a stacked checkpoint's key for its seeds, in order


def batches_done_in_epoch(trainer: L.Trainer) -> int:
    """How many batches of the current epoch training has finished.

    Lightning keeps this count in its loop progress, which has no public accessor: this is
    the one place seedvar reads it (tests/test_resume.py fails if Lightning changes it)."""
    return trainer.fit_loop.epoch_loop.batch_progress.current.processed  # type: ignore[attr-defined]


class ResumeCheckpoint(L.Callback):
    """Saves the checkpoint at `path` once `every_minutes` of training have passed since the
    last save (or the start), and every `every_n_steps` steps where that is set; its own state
    (saved in the checkpoint by Lightning) is the RNG state, which Lightning's checkpoint leaves
    out. A save's seconds and bytes go to the logger (`checkpoint/seconds`, `checkpoint/bytes`).
    seedvar's own rather than Lightning's ModelCheckpoint: that one saves after a step (the
    step's RNG draws already spent), into a folder it creates with parents, and without the
    RNG state, so a resumed seed would not retrace the same dropout masks.

    `links`: more paths that get the same checkpoint once it is saved (seeds trained stacked:
    their group's checkpoint in each seed's own work folder, hard links where they can be)."""

    def __init__(
        self,
        path: Path,
        every_minutes: float | None,
        every_n_steps: int | None = None,
        links: Sequence[Path] = (),
    ) -> None:
        self.path, self.links = path, list(links)
        self.every_seconds = every_minutes * 60 if every_minutes else None
        self.every_n_steps = every_n_steps
        self.last_saved = time.monotonic()
        self.saves: list[tuple[float, int]] = []  # (seconds, bytes) of each save

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.last_saved = time.monotonic()

    def due(self, step: int) -> bool:
        """Whether to save before step `step`."""
        if step == 0:
            return False
        by_steps = self.every_n_steps is not None and step % self.every_n_steps == 0
        elapsed = time.monotonic() - self.last_saved
        return by_steps or (self.every_seconds is not None and elapsed >= self.every_seconds)

    def on_train_batch_start(
        self, trainer: L.Trainer, module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        # Saved before a batch rather than after one: by then the LR scheduler has stepped too,
        # so weights, optimizer, scheduler, RNG and batch position all describe step k.
        if not self.due(trainer.global_step):
            return
        started = time.monotonic()
        # not parents=True: a work folder taken over by another attempt must not come back
        self.path.parent.mkdir(exist_ok=True)
        partial = temporary(self.path)
        trainer.save_checkpoint(partial, weights_only=False)  # the whole state: resumable
        os.replace(partial, self.path)
        for link in self.links:
            link.parent.mkdir(exist_ok=True)
            linked = temporary(link)
            link_or_copy(str(self.path), str(linked))
            os.replace(linked, link)
        self.last_saved = time.monotonic()
        seconds, size = self.last_saved - started, self.path.stat().st_size
        self.saves.append((seconds, size))
        if trainer.logger:
            metrics = {"checkpoint/seconds": seconds, "checkpoint/bytes": float(size)}
            trainer.logger.log_metrics(metrics, step=trainer.global_step)

    def state_dict(self) -> dict[str, Any]:
        return {
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """The RNG states saved, each GPU's for the GPUs this process sees (a seed trains on
        its first): a checkpoint saved where 8 were visible resumes where 1 is."""
        torch.set_rng_state(state_dict["torch_rng"])
        present = torch.cuda.device_count() if torch.cuda.is_available() else 0
        for device, state in enumerate(state_dict["cuda_rng"][:present]):
            torch.cuda.set_rng_state(state, device)


def saved_at(checkpoint: Path) -> tuple[int | None, list[int] | None]:
    """The training step a resume checkpoint was saved before (Lightning's `global_step`) and,
    for seeds trained stacked, their seeds (`GROUP`), read without loading its tensors; a step
    of None where it cannot be told."""
    try:
        saved = torch.load(checkpoint, map_location="cpu", mmap=True, weights_only=False)
        return int(saved["global_step"]), saved.get(GROUP)
    except Exception:  # a checkpoint it cannot read resumes all the same (or fails there)
        return None, None


def readable(checkpoint: Path) -> bool:
    """Whether a checkpoint file is whole: torch saves a zip archive, whose every member's
    CRC is checked here (a truncated or damaged file is not; a second or two per GB)."""
    try:
        with zipfile.ZipFile(checkpoint) as archive:
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError):
        return False
