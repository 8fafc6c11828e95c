"""A seed job owns one seed's work and its finished results for their whole life.

Everything but the published view lives outside DVC's outputs, in the keep (`.seedvar/runs` for
output_dir `runs`, see project.py), so that no DVC checkout can destroy a finished seed or an
attempt's work:

.seedvar/runs/seed-N.partial.<attempt>/  the work in progress of one attempt: attempt.json (who
                                         works on it), config.yaml, run.json (its MLflow run),
                                         progress.json, checkpoints/ (while training), model/,
                                         predictions/, metrics.json
.seedvar/runs/seed-N/<recipe hash>/      the finished seed of one recipe, moved into place by one
                                         rename; another recipe's finished seed stays beside it
runs/seed-N/                             the published view: hard links to one finished seed
                                         (what `dvc repro` records, aggregates and pushes)

Attempts and fencing. Every attempt at a seed (a `seedvar train` process, a Ray task, a retry of
either) has its own id and works in a folder named by it. An attempt that continues interrupted
work of its recipe takes the earlier attempt's folder over by renaming it to its own name: one
atomic step, after which the earlier attempt, should it still be alive (frozen, or cut off from
the cluster rather than dead), can neither write into that work nor publish it, since every path
it holds names a folder that no longer exists. It notices at its next check (before every
training batch, every logged metric, every step that writes) and stops without touching the seed
or its MLflow run (`Superseded`). Publishing renames the attempt's own folder, so only the
attempt that holds the work can publish it, and never onto a finished seed (the rename fails
when the target exists). Exactly-once therefore rests on renames within one folder, which are
atomic on local and network file systems, not on file locks.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from seedvar.config import Config
from seedvar.errors import DiskError, OutputExistsError, Superseded, first_line
from seedvar.files import link_or_copy, remove_temporaries, temporary, write_atomically
from seedvar.project import keep_of
from seedvar.seeds.finished import (
    CONFIG,
    DATA,
    MANIFEST,
    METRICS,
    RUN_STATE,
    FinishedSeed,
    damaged_files,
    manifest_of,
    read_config,
)

if TYPE_CHECKING:  # not imported at run time: a finished seed is found without transformers
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

ATTEMPT = "attempt.json"
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
FULL_DISK_TEXT = ("No space left on device", "file write failed")  # torch and safetensors
CHECKPOINT = "checkpoints/resume.ckpt"  # a work folder's resumable training checkpoint
PROGRESS = "progress.json"  # how far the attempt has got (seedvar/progress.py)
CLAIM_TRIES = 5
IfFinished = Literal["refuse", "reuse", "replace"]  # what to do with a seed finished before


class AlreadyPublished(Superseded):
    """The seed was published by another attempt that worked beside this one unseen."""


@dataclass(frozen=True)
class Resumable:
    """What an earlier, interrupted attempt at the same seed and recipe left to continue: its
    MLflow run and a training checkpoint (saved before training step `step`) or finished
    weights; or only a run (`stale_run_id`) with nothing to continue from."""

    run_id: str | None = None
    checkpoint: Path | None = None
    stale_run_id: str | None = None
    step: int | None = None

    @property
    def continues(self) -> str:
        """How the attempt goes on, in a few words: `resuming from its checkpoint at step 400`."""
        if self.checkpoint is not None:
            at = f" at step {self.step}" if self.step is not None else ""
            return f"resuming from its checkpoint{at}"
        if self.run_id is not None:
            return "going straight to evaluation (its weights were saved)"
        return "starting over (no checkpoint to resume from)"


@dataclass(frozen=True)
class SeedJob:
    """The folders and files of seed `seed` published under `output_dir` and kept in the keep
    `keep` (by default `keep_of(output_dir)`), as seen by the attempt `attempt_id`; `note`: what
    the attempt's attempt.json records of where it runs (a scheduler's: its Ray node and task)."""

    output_dir: Path
    seed: int
    attempt_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12], compare=False)
    keep: Path | None = None
    data: dict[str, str] | None = None  # the fingerprints of the sets it is to use, if known
    note: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def of(
        cls,
        config: Config,
        keep: Path | None = None,
        data: dict[str, str] | None = None,
        note: dict[str, Any] | None = None,
    ) -> SeedJob:
        seed = config.train.seed
        return cls(Path(config.output_dir), seed, keep=keep, data=data, note=note or {})

    @property
    def keep_dir(self) -> Path:
        """The keep: where the seed's attempts work and its finished recipes are kept."""
        return self.keep or keep_of(self.output_dir)

    @property
    def folder(self) -> Path:
        """Where the finished seed is published (a view of one finished recipe)."""
        return self.output_dir / f"seed-{self.seed}"

    @property
    def recipes(self) -> Path:
        """The folder of the seed's finished recipes, one folder per recipe hash."""
        return self.keep_dir / f"seed-{self.seed}"

    @property
    def work_dir(self) -> Path:
        """This attempt's work in progress."""
        return self.keep_dir / f"seed-{self.seed}.partial.{self.attempt_id}"

    @property
    def checkpoint(self) -> Path:
        """Where training saves its resumable checkpoint."""
        return self.work_dir / CHECKPOINT

    @property
    def finished(self) -> FinishedSeed:
        """The published seed, read only."""
        return FinishedSeed(self.output_dir, self.seed)

    @property
    def model_dir(self) -> Path:
        return self.work_dir / "model"

    def work_dirs(self, config: Config) -> list[Path]:
        """The work folders of every attempt at this seed with `config`'s recipe (this one's,
        if it exists, too)."""
        found = sorted(self.keep_dir.glob(f"seed-{self.seed}.partial.*"))
        return [f for f in found if _recipe_hash(f) == config.hash()]

    def finished_dir(self, config: Config) -> Path | None:
        """The kept finished seed of this very recipe (an "auto" precision: with what it chose
        where it was trained), or None."""
        if not self.recipes.is_dir():
            return None
        for entry in sorted(self.recipes.iterdir()):
            if "." in entry.name or not (entry / METRICS).is_file():
                continue  # a replaced seed being removed
            if damaged_files(entry):
                continue  # damaged after it was published: trained again
            if trained_as(read_config(entry / CONFIG), config) and self.same_data(data_of(entry)):
                return entry
        return None

    def same_data(self, recorded: dict[str, str] | None) -> bool:
        """Whether a seed made from the sets `recorded` (its DATA) was made from this job's
        data: a changed declared file is another seed. Where either is unknown (a seed kept
        before DATA was recorded, or a job that has not loaded its sets yet): yes."""
        return self.data is None or recorded is None or recorded == self.data

    def publish_view(self, entry: Path) -> None:
        """Publish the finished seed `entry` as the seed's view in output_dir (hard links, so
        no copy; a copy across file systems), replacing the view of another recipe."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        partial = temporary(self.folder)
        shutil.copytree(entry, partial, copy_function=link_or_copy)
        old = temporary(self.folder)
        if self.folder.exists():
            self.folder.rename(old)
        os.rename(partial, self.folder)
        shutil.rmtree(old, ignore_errors=True)

    def refuse_finished(self, config: Config, force: bool) -> None:
        """OutputExistsError if the seed has finished with this recipe (unless `force`)."""
        if self.finished_dir(config) is not None and not force:
            raise OutputExistsError(
                f"seed {self.seed} is already finished with this recipe in {self.folder}; "
                "use another seed or output_dir, or --force to retrain it"
            )

    def check_writable(self) -> None:
        """DiskError, before any work, if the output folder (or, while it does not exist yet,
        the folder it will be made in) cannot be written."""
        for name, wanted in (("output_dir", self.output_dir), ("the seeds' keep", self.keep_dir)):
            folder = wanted
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            try:
                with tempfile.TemporaryFile(dir=folder):
                    pass
            except OSError as error:
                raise DiskError(
                    f"cannot write to {name} {wanted} ({error.strerror or error}); make it "
                    "writable or choose another output_dir"
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

    def holds(self) -> bool:
        """Whether this attempt still holds the seed's work: its folder is there and names it
        (a folder recreated by a late `mkdir -p` after a takeover names nobody)."""
        return _recorded(self.work_dir / ATTEMPT, "attempt") == self.attempt_id

    def check_held(self) -> None:
        """Superseded if another attempt has taken this attempt's work over."""
        if not self.holds():
            raise Superseded(
                f"seed {self.seed}: attempt {self.attempt_id} was taken over by a newer attempt, "
                "which continues the seed; this one stops without touching it"
            )

    def claim(self, config: Config) -> Resumable:
        """Make this attempt the one that works on the seed: take over the most advanced work
        folder of an earlier attempt at this recipe by renaming it (older ones are removed,
        another recipe's stay), or start an empty one. Returns what the earlier attempt left to
        continue from. The job's `note` is recorded in attempt.json, with the attempt taken over
        (its own attempt.json, as `took_over`) and how this one `continues`
        (`Resumable.continues`), for a driver to tell. A seed whose earlier attempt left nothing
        to continue from says in one line that it starts over."""
        for _ in range(CLAIM_TRIES):
            if self._take_over(config):
                break
        earlier = attempt_record(self.work_dir) if self.work_dir.is_dir() else None
        if earlier:
            earlier.pop("took_over", None)  # what that one took over is no longer of interest
        self.work_dir.mkdir(parents=True, exist_ok=True)
        remove_temporaries(self.work_dir)
        resumable, told = self._resumable(config)
        who = {"attempt": self.attempt_id, "host": socket.gethostname(), "pid": os.getpid()}
        who["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        said = {"took_over": earlier, "continues": resumable.continues}
        write_atomically(self.work_dir / ATTEMPT, json.dumps({**who, **self.note, **said}))
        if resumable.stale_run_id and not told:  # else it said why itself
            print(
                f"seedvar: warning: seed {self.seed} starts over: {_attempt(earlier)} left no "
                f"training checkpoint to resume from ({_checkpoints(config)})",
                file=sys.stderr,
            )
        return resumable

    def _take_over(self, config: Config) -> bool:
        """One pass over the other attempts' folders; False if another attempt took the one
        to continue from under our hands (then look again)."""
        ours = [folder for folder in self.work_dirs(config) if folder != self.work_dir]
        ours.sort(key=_progress, reverse=True)
        if ours and not self.work_dir.exists():
            try:
                os.rename(ours[0], self.work_dir)
            except FileNotFoundError:
                return False
            ours.pop(0)
        for folder in ours:  # older: nothing to continue from (another recipe's work stays)
            shutil.rmtree(folder, ignore_errors=True)
        return True

    def _resumable(self, config: Config) -> tuple[Resumable, bool]:
        """What the work folder holds to continue from; and whether it said itself why there is
        nothing (an unreadable checkpoint set aside; a stacked group's checkpoint where seeds
        now train alone)."""
        if _recipe_hash(self.work_dir) != config.hash():
            return Resumable(), False
        run_id = _recorded(self.work_dir / RUN_STATE, "run_id")
        if self.trained():
            return Resumable(run_id=run_id), False
        if not self.checkpoint.is_file():
            return Resumable(stale_run_id=run_id), False
        if not self.checkpoint_readable():
            return Resumable(stale_run_id=run_id), True
        from seedvar.training.resume import saved_at  # torch: only where a checkpoint exists

        step, group = saved_at(self.checkpoint)
        if group and config.train.seeds_per_process == 1:
            print(
                f"seedvar: warning: seed {self.seed} starts over: its training checkpoint is "
                f"of seeds {group} trained stacked, and train.seeds_per_process is now 1",
                file=sys.stderr,
            )
            return Resumable(stale_run_id=run_id), True
        return Resumable(run_id, self.checkpoint, step=step), False

    def checkpoint_readable(self) -> bool:
        """Whether the training checkpoint can be read. One that cannot (truncated by a full
        disk or a copy, damaged on disk) is set aside beside the seeds' work with a one-line
        warning, and the seed starts over rather than failing on every rerun."""
        from seedvar.training.resume import readable  # torch: only where a checkpoint exists

        if readable(self.checkpoint):
            return True
        aside = self.keep_dir / f"seed-{self.seed}.unreadable-checkpoint.{self.attempt_id}.ckpt"
        os.replace(self.checkpoint, aside)
        print(
            f"seedvar: warning: seed {self.seed}'s training checkpoint cannot be read (truncated "
            f"or damaged); set aside as {aside} (delete it when you like): the seed starts over",
            file=sys.stderr,
        )
        return False

    def begin(self, config: Config, run_id: str, data: dict[str, str]) -> None:
        """Start afresh in this attempt's folder: the recipe, the fingerprints of its sets
        (DATA) and its MLflow run, nothing else."""
        self.check_held()
        for entry in self.work_dir.iterdir():
            if entry.name not in (ATTEMPT, PROGRESS):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        config.save(self.work_dir / CONFIG)
        write_atomically(self.work_dir / DATA, json.dumps(data, sort_keys=True))
        state = {"config_hash": config.hash(), "run_id": run_id}
        write_atomically(self.work_dir / RUN_STATE, json.dumps(state))

    def trained(self) -> bool:
        """True once the fine-tuned weights are saved: training never needs to run again."""
        return (self.model_dir / "config.json").is_file()

    def save_model(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        """Save weights and tokenizer (atomically), then drop the training checkpoints."""
        self.check_held()
        partial = temporary(self.model_dir)
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        os.replace(partial, self.model_dir)
        shutil.rmtree(self.checkpoint.parent, ignore_errors=True)

    def keep_weights_as(self, dtype: str) -> None:
        """Rewrite the saved weights' floating-point tensors in `dtype` (float32: as saved),
        atomically: the kept seed then takes half the disk in bfloat16 or float16."""
        if dtype == "float32":
            return
        import torch
        from safetensors.torch import load_file, save_file

        self.check_held()
        for weights in sorted(self.model_dir.glob("*.safetensors")):
            tensors = load_file(weights)
            wanted = getattr(torch, dtype)
            cast = {k: t.to(wanted) if t.is_floating_point() else t for k, t in tensors.items()}
            partial = temporary(weights)
            save_file(cast, partial, metadata={"format": "pt"})
            os.replace(partial, weights)

    def publish(self, force: bool = False) -> Path:
        """Move this attempt's finished work into place with one rename, so no reader sees
        half a seed, and publish its view in output_dir; returns where it is kept. Superseded
        if another attempt took the work over; AlreadyPublished if the seed was finished with
        this recipe meanwhile by an attempt that worked unseen beside this one; a finished seed
        of this recipe is replaced only when `force`."""
        self.check_held()
        remove_temporaries(self.work_dir)
        (self.work_dir / PROGRESS).unlink(missing_ok=True)
        manifest = json.dumps(manifest_of(self.work_dir), indent=1)
        write_atomically(self.work_dir / MANIFEST, manifest)
        entry = self.recipes / entry_name(str(_recipe_hash(self.work_dir)), data_of(self.work_dir))
        entry.parent.mkdir(parents=True, exist_ok=True)
        replaced = entry.with_name(f"{entry.name}.replaced.{self.attempt_id}")
        if force and entry.exists():
            with suppress(FileNotFoundError):
                entry.rename(replaced)
        try:
            os.rename(self.work_dir, entry)
        except FileNotFoundError:
            self.check_held()
            raise
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise AlreadyPublished(
                f"seed {self.seed} was published by another attempt while attempt "
                f"{self.attempt_id} worked on it; the published seed stays"
            ) from None
        for leftover in self.recipes.glob("*.replaced.*"):  # this one's, or an interrupted one's
            shutil.rmtree(leftover, ignore_errors=True)
        self.publish_view(entry)
        return entry


def attempt_record(folder: Path) -> dict[str, Any]:
    """What an attempt's work folder says of the attempt that holds it (its attempt.json: id,
    host, process, Ray node and task, what it took over, how it continues), or {}."""
    try:
        found = json.loads((folder / ATTEMPT).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _attempt(record: dict[str, Any] | None) -> str:
    """`attempt 3f2a9c1b7d4e (process 4321 on gpu-node-3)`, or `an earlier attempt`."""
    if not record or "attempt" not in record:
        return "an earlier attempt"
    where = f" (process {record['pid']} on {record.get('host', '?')})" if "pid" in record else ""
    return f"attempt {record['attempt']}{where}"


def _checkpoints(config: Config) -> str:
    """When a seed's training checkpoint is saved, as a reason for having none."""
    minutes, steps = config.train.checkpoint_every_minutes, config.train.checkpoint_every_n_steps
    every = [f"every {minutes:g} minutes of training"] if minutes else []
    every += [f"every {steps} steps"] if steps else []
    if not every:
        return "this recipe saves none: train.checkpoint_every_minutes is off"
    return f"one is saved {' and '.join(every)}; it stopped before its first"


def data_of(folder: Path) -> dict[str, str] | None:
    """The fingerprints a seed's folder records (DATA), or None."""
    path = folder / DATA
    return json.loads(path.read_text()) if path.is_file() else None


def entry_name(recipe: str, data: dict[str, str] | None) -> str:
    """The folder name of a finished seed in the keep: its recipe's hash, and a digest of its
    sets' fingerprints, so that a seed of the same recipe on changed data is kept beside it."""
    if data is None:
        return recipe
    return f"{recipe}-{hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]}"


def _recipe_hash(folder: Path) -> str | None:
    """The config hash an attempt's work folder was made for (None if it has no recipe yet)."""
    return _recorded(folder / RUN_STATE, "config_hash")


def _recorded(path: Path, key: str) -> str | None:
    """`key` of the JSON file `path` (an attempt's attempt.json or run.json), or None."""
    try:
        return json.loads(path.read_text())[key]
    except (OSError, ValueError, KeyError):
        return None


def _progress(folder: Path) -> tuple[bool, float, float]:
    """How far an attempt's work got: trained, else the time of its latest checkpoint (attempts
    of one recipe follow the same trajectory, so a later checkpoint is a later step)."""
    try:
        trained = (folder / "model" / "config.json").is_file()
        checkpoint = folder / CHECKPOINT
        when = checkpoint.stat().st_mtime if checkpoint.is_file() else 0.0
        return trained, when, (folder / RUN_STATE).stat().st_mtime
    except OSError:  # taken over by another attempt while we looked
        return False, 0.0, 0.0


def trained_as(trained: Config, config: Config) -> bool:
    """Whether a seed trained with `trained` (its recorded config) has `config`'s recipe (an
    "auto" precision: with what it chose where it was trained)."""
    return trained.hash() == config.with_precisions_of(trained).hash()
