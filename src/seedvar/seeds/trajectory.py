"""When seeds part ways: every diagnostic set evaluated during training, on a fixed subsample.

Each diagnostic set keeps `train.trajectory_examples` of its evaluation examples (evenly over
its `stratify` group; the same examples for every seed). Before the first step, every
`train.trajectory_every_n_steps` steps (or at the end of each epoch) and after the last step,
the model predicts them in evaluation mode, without gradients and without drawing random
numbers, so the trained model is bit for bit the one trained without it. Each point's
accuracies go to the seed's trajectory.csv and to MLflow as curves (`trajectory/<key>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import datasets
import lightning as L
import numpy as np
import pandas as pd

from seedvar.config import Config
from seedvar.data.io import subsample
from seedvar.data.prepared import StudyInputs
from seedvar.files import write_atomically
from seedvar.seeds.evaluate import prediction_frame, set_columns
from seedvar.training.device import autocast_dtype
from seedvar.training.module import seed_key
from seedvar.training.predict import predict_logits
from seedvar.training.stacked_module import StackedClassifier

KEY_PREFIX = "trajectory/"


@dataclass(frozen=True)
class Probe:
    """One diagnostic set's fixed subsample: its examples and their tokens."""

    name: str
    frame: pd.DataFrame
    tokens: datasets.Dataset


def probes(config: Config, inputs: StudyInputs) -> list[Probe]:
    """The fixed subsample of every diagnostic set (empty when trajectories are off)."""
    size = config.train.trajectory_examples
    if not size:
        return []
    found = []
    for name, declared in config.diagnostics.items():
        frame = inputs.sets.evaluation[name]
        chosen = subsample(frame.assign(_row=np.arange(len(frame))), size, declared.stratify)
        rows = chosen.pop("_row").to_list()
        found.append(Probe(name, chosen, inputs.tokenized[name].select(rows)))
    return found


def accuracies(config: Config, probe: Probe, logits: np.ndarray) -> list[tuple[str, str, float]]:
    """(column, MLflow key, accuracy) of every column of one probe's predictions."""
    predictions = prediction_frame(config, probe.name, probe.frame, logits)
    hits = (predictions["gold"] == predictions["predicted"]).to_numpy()
    return [
        (column.name, column.key, float(hits[mask].mean()))
        for column, mask in set_columns(config, probe.name, predictions)
        if mask.any()
    ]


def append_whole(path: Path, frame: pd.DataFrame) -> None:
    """Add `frame`'s rows to the CSV at `path` by writing the whole file anew under a temporary
    name, then renaming it: a kill or a full disk leaves the old file, never half a line. A
    torn last line of a file written otherwise (an append cut short) is dropped first."""
    kept = ""
    if path.is_file():
        text = path.read_text()
        kept = text[: text.rfind("\n") + 1]
    write_atomically(path, kept + frame.to_csv(header=not kept, index=False))


class Trajectory(L.Callback):
    """Evaluates the probes before training, every `every_n_steps` steps (None: at each
    epoch's end) and at the end; appends to `paths` and logs to the trainer's logger. One path
    for a seed trained alone; for K seeds trained stacked (StackedClassifier), each seed's, in
    the module's order, its curves marked with its seed (`seed_key`)."""

    def __init__(
        self, config: Config, found: list[Probe], pad_token_id: int, paths: list[Path]
    ) -> None:
        self.config, self.probes, self.pad_token_id = config, found, pad_token_id
        self.paths = paths
        self.every = config.train.trajectory_every_n_steps
        self.done: set[int] = set()

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.global_step == 0:
            self._point(trainer, module)

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *_: object) -> None:
        if self.every and trainer.global_step % self.every == 0:
            self._point(trainer, module)

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if not self.every:
            self._point(trainer, module)

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self._point(trainer, module)

    def _point(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        step = trainer.global_step
        if step in self.done:
            return
        self.done.add(step)
        was_training = module.training
        stacked = module if isinstance(module, StackedClassifier) else None
        logits = {probe.name: self._logits(module, probe, stacked) for probe in self.probes}
        module.train(was_training)
        curves = {}
        for index, path in enumerate(self.paths):
            rows = []
            for probe in self.probes:
                for column, key, accuracy in accuracies(
                    self.config, probe, logits[probe.name][index]
                ):
                    rows.append((step, trainer.current_epoch, column, key, accuracy))
                    name = f"{KEY_PREFIX}{key}"
                    curves[seed_key(name, stacked.seeds[index]) if stacked else name] = accuracy
            frame = pd.DataFrame(rows, columns=["step", "epoch", "column", "key", "accuracy"])
            append_whole(path, frame)
        if trainer.logger is not None:
            trainer.logger.log_metrics(curves, step=step)

    def _logits(
        self, module: L.LightningModule, probe: Probe, stacked: StackedClassifier | None
    ) -> np.ndarray:
        """Each seed's logits of `probe`'s examples, shaped (seeds, examples, labels)."""
        logits = predict_logits(
            module.model,  # type: ignore[arg-type]
            probe.tokens,
            self.pad_token_id,
            self.config.train.eval_batch_size,
            f"trajectory {probe.name}",
            autocast_dtype(self.config),
            stacked.seed_logits if stacked else None,
        )
        return logits if stacked else logits[None]
