"""The sets one study uses, loaded from the config: train, per-epoch validation, evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from seedvar.config import DataConfig
from seedvar.data.hans import load_hans
from seedvar.data.io import fingerprint, subsample
from seedvar.data.mnli import load_mnli

EVAL_SETS = ("mnli_matched", "mnli_mismatched", "hans")


@dataclass(frozen=True)
class StudySets:
    """Canonical DataFrames for training, validation during training, and final evaluation."""

    train: pd.DataFrame
    validation: pd.DataFrame
    evaluation: dict[str, pd.DataFrame]

    def named(self) -> dict[str, pd.DataFrame]:
        """Every set by name: train, validation, and the evaluation sets."""
        return {"train": self.train, "validation": self.validation, **self.evaluation}

    @classmethod
    def from_named(cls, frames: dict[str, pd.DataFrame]) -> StudySets:
        """The inverse of `named`."""
        evaluation = {name: frames[name] for name in EVAL_SETS}
        return cls(frames["train"], frames["validation"], evaluation)

    def fingerprints(self) -> dict[str, str]:
        """Content hashes of every set, for tracking and cache keys."""
        return {name: fingerprint(frame) for name, frame in self.named().items()}


def load_study_sets(data: DataConfig) -> StudySets:
    """Load (and subsample, if configured) every set; raises DataError before any training."""
    matched = load_mnli(data.mnli_validation_matched, "validation_matched")
    mismatched = load_mnli(data.mnli_validation_mismatched, "validation_mismatched")
    hans = load_hans(data.hans, Path(data.cache_dir) / "downloads")
    return StudySets(
        train=subsample(load_mnli(data.mnli_train, "train"), data.max_train_examples),
        validation=subsample(matched, data.max_val_examples),
        evaluation={
            "mnli_matched": subsample(matched, data.max_eval_examples),
            "mnli_mismatched": subsample(mismatched, data.max_eval_examples),
            "hans": subsample(hans, data.max_eval_examples, stratify="subcase"),
        },
    )
