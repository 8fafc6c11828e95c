"""A seed job owns one seed's folder for its whole life.

runs/seed-N.lock      held while a process works on the seed
runs/seed-N.partial/  the work in progress: config.yaml, run.json (its MLflow run),
                      checkpoints/ (while training), model/, predictions/, metrics.json
runs/seed-N/          the finished seed, moved into place by renames (never half a seed)
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from seedvar.config import Config, validate
from seedvar.errors import DiskError, OutputExistsError, first_line
from seedvar.training.resume import resume_checkpoint

RUN_STATE = "run.json"
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
FULL_DISK_TEXT = ("No space left on device", "file write failed")  # torch and safetensors
METRICS = "metrics.json"
CONFIG = "config.yaml"


@dataclass(frozen=True)
class Attempt:
    """What an earlier, interrupted attempt at the same seed and recipe left to continue:
    its MLflow run, and a training checkpoint or finished weights."""

    run_id: str | None = None
    checkpoint: Path | None = None


@dataclass(frozen=True)
class SeedJob:
    """The folders and files of seed `seed` under `output_dir`."""

    output_dir: Path
    seed: int

    @classmethod
    def of(cls, config: Config) -> SeedJob:
        return cls(Path(config.output_dir), config.train.seed)

    @property
    def folder(self) -> Path:
        """Where the finished seed lives."""
        return self.output_dir / f"seed-{self.seed}"

    @property
    def work_dir(self) -> Path:
        return self.folder.with_name(self.folder.name + ".partial")

    @property
    def checkpoints(self) -> Path:
        return self.work_dir / "checkpoints"

    @property
    def model_dir(self) -> Path:
        return self.work_dir / "model"

    def finished_metrics(self) -> dict[str, float] | None:
        """The seed's metrics if it has finished, else None."""
        path = self.folder / METRICS
        return json.loads(path.read_text()) if path.is_file() else None

    def finished_config(self) -> Config:
        """The recipe the finished seed was trained with (its config.yaml)."""
        path = self.folder / CONFIG
        return validate(yaml.safe_load(path.read_text()), source=str(path))

    def finished_run_id(self) -> str:
        """The MLflow run of the finished seed."""
        return json.loads((self.folder / RUN_STATE).read_text())["run_id"]

    def refuse_finished(self, force: bool) -> None:
        """OutputExistsError if the seed has finished (unless `force`)."""
        if self.finished_metrics() is not None and not force:
            raise OutputExistsError(
                f"seed {self.seed} is already finished in {self.folder}; "
                "use another seed or output_dir, or --force to retrain it"
            )

    def check_writable(self) -> None:
        """DiskError, before any work, if the output folder (or, while it does not exist yet,
        the folder it will be made in) cannot be written."""
        folder = self.output_dir
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as error:
            raise DiskError(
                f"cannot write to output_dir {self.output_dir} ({error.strerror or error}); "
                "make it writable or choose another output_dir"
            ) from None

    @contextmanager
    def disk_errors_explained(self) -> Iterator[None]:
        """Turn a full or read-only disk during the run into one DiskError line."""
        try:
            yield
        except Exception as error:
            code = error.errno if isinstance(error, OSError) else None
            if code not in DISK_ERRNOS and not any(text in str(error) for text in FULL_DISK_TEXT):
                raise
            problem = "is read-only now" if code == errno.EROFS else "has no space left"
            raise DiskError(
                f"the disk of {self.output_dir} {problem} ({first_line(error)}) while working "
                f"on seed {self.seed}; fix that and run the same command again: the seed "
                "resumes where it stopped"
            ) from None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive lock on the seed while this process works on it; a second process
        asking for the same seed stops at once (the OS drops the lock if we die)."""
        path = self.folder.with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OutputExistsError(
                    f"seed {self.seed} is being trained by another process right now "
                    f"({path} is locked); wait for it to finish or choose another seed"
                ) from None
            yield

    def resumable(self, config: Config) -> Attempt:
        """The interrupted attempt at this seed with the same recipe, or a fresh Attempt()."""
        state_path = self.work_dir / RUN_STATE
        if not state_path.is_file():
            return Attempt()
        state = json.loads(state_path.read_text())
        if state["config_hash"] != config.hash():
            return Attempt()
        if self.trained():
            return Attempt(run_id=state["run_id"])
        checkpoint = resume_checkpoint(self.checkpoints)
        return Attempt(state["run_id"], checkpoint) if checkpoint else Attempt()

    def begin(self, config: Config, run_id: str) -> None:
        """Start a fresh attempt: an empty work folder with the recipe and its MLflow run."""
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True)
        config.save(self.work_dir / CONFIG)
        state = {"config_hash": config.hash(), "run_id": run_id}
        (self.work_dir / RUN_STATE).write_text(json.dumps(state))

    def trained(self) -> bool:
        """True once the fine-tuned weights are saved: training never needs to run again."""
        return (self.model_dir / "config.json").is_file()

    def save_model(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        """Save weights and tokenizer (atomically), then drop the training checkpoints."""
        partial = self.model_dir.with_name("model.partial")
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        os.replace(partial, self.model_dir)
        shutil.rmtree(self.checkpoints, ignore_errors=True)

    def publish(self) -> None:
        """Move the finished seed into place with renames, so no reader sees half a seed."""
        replaced = self.folder.with_name(self.folder.name + ".replaced")
        if self.folder.exists():
            self.folder.rename(replaced)
        self.work_dir.rename(self.folder)
        shutil.rmtree(replaced, ignore_errors=True)
