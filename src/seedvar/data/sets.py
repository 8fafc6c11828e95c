"""The sets one study uses, loaded from the config: train, per-epoch validation, evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from seedvar.config import DataConfig
from seedvar.data.hans import load_hans
from seedvar.data.io import fingerprint, subsample
from seedvar.data.mnli import load_mnli
from seedvar.errors import DataError
from seedvar.metrics import ENTAILMENT, EvalSet

NEUTRAL = 1
HANS_TRAIN_ID_PREFIX = "hans-train-"  # keeps added HANS rows apart from MNLI ids


@dataclass(frozen=True)
class StudySets:
    """Canonical DataFrames for training, validation during training, and final evaluation."""

    train: pd.DataFrame
    validation: pd.DataFrame
    evaluation: dict[EvalSet, pd.DataFrame]

    def named(self) -> dict[str, pd.DataFrame]:
        """Every set by name: train, validation, and the evaluation sets."""
        evaluation = {str(name): frame for name, frame in self.evaluation.items()}
        return {"train": self.train, "validation": self.validation, **evaluation}

    @classmethod
    def from_named(cls, frames: dict[str, pd.DataFrame]) -> StudySets:
        """The inverse of `named`."""
        evaluation = {name: frames[name] for name in EvalSet}
        return cls(frames["train"], frames["validation"], evaluation)

    def fingerprints(self) -> dict[str, str]:
        """Content hashes of every set, for tracking and cache keys."""
        return {name: fingerprint(frame) for name, frame in self.named().items()}


def load_study_sets(data: DataConfig) -> StudySets:
    """Load (and subsample, if configured) every set; raises DataError before any training."""
    matched = load_mnli(data.mnli_validation_matched, "validation_matched")
    mismatched = load_mnli(data.mnli_validation_mismatched, "validation_mismatched")
    hans = load_hans(data.hans, Path(data.cache_dir) / "downloads")
    train = subsample(load_mnli(data.mnli_train, "train"), data.max_train_examples)
    if data.hans_train_examples:
        train = pd.concat([train, hans_for_training(data, hans)], ignore_index=True)
    return StudySets(
        train=train,
        validation=subsample(matched, data.max_val_examples),
        evaluation={
            EvalSet.MNLI_MATCHED: subsample(matched, data.max_eval_examples),
            EvalSet.MNLI_MISMATCHED: subsample(mismatched, data.max_eval_examples),
            EvalSet.HANS: subsample(hans, data.max_eval_examples, stratify="subcase"),
        },
    )


def hans_for_training(data: DataConfig, hans_evaluation: pd.DataFrame) -> pd.DataFrame:
    """`data.hans_train_examples` HANS-like training pairs (balanced over subcases) as MNLI
    rows: entailment stays entailment, non-entailment becomes neutral. Refuses any pair that
    is also in the HANS evaluation set."""
    hans_train = load_hans(data.hans_train, Path(data.cache_dir) / "downloads")
    chosen = subsample(hans_train, data.hans_train_examples, stratify="subcase")
    evaluation_pairs = set(_pairs(hans_evaluation))
    leaked = sum(pair in evaluation_pairs for pair in _pairs(chosen))
    if leaked:
        raise DataError(
            f"{data.hans_train}: {leaked} of its pairs are in the HANS evaluation set "
            f"({data.hans}); point data.hans_train at the HANS training set"
        )
    return pd.DataFrame(
        {
            "id": HANS_TRAIN_ID_PREFIX + chosen["id"],
            "premise": chosen["premise"],
            "hypothesis": chosen["hypothesis"],
            "label": chosen["label"].map({0: ENTAILMENT, 1: NEUTRAL}),
        }
    )


def _pairs(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return list(zip(frame["premise"], frame["hypothesis"], strict=True))
