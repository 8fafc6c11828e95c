"""The sets one study uses, loaded as its declaration says: train, per-epoch validation, and the
evaluation sets (the task's in-distribution sets, then the diagnostic sets)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from seedvar.config import Config
from seedvar.data.io import fingerprint, subsample
from seedvar.data.sources import canonical, check_groups, read_source
from seedvar.declared import Diagnostic, Task
from seedvar.errors import DataError
from seedvar.metrics import diagnostic_columns

AUGMENTED_ID_PREFIX = "augment-"  # keeps added rows apart from the task's ids


@dataclass(frozen=True)
class StudySets:
    """Canonical DataFrames for training, validation during training, and final evaluation."""

    train: pd.DataFrame
    validation: pd.DataFrame
    evaluation: dict[str, pd.DataFrame]  # by set name: the task's sets, then the diagnostics

    def named(self) -> dict[str, pd.DataFrame]:
        """Every set by name: train, validation, and the evaluation sets."""
        return {"train": self.train, "validation": self.validation, **self.evaluation}

    @classmethod
    def from_named(cls, frames: dict[str, pd.DataFrame]) -> StudySets:
        """The inverse of `named`."""
        evaluation = {k: v for k, v in frames.items() if k not in ("train", "validation")}
        return cls(frames["train"], frames["validation"], evaluation)

    def fingerprints(self) -> dict[str, str]:
        """Content hashes of every set, for tracking and cache keys."""
        return {name: fingerprint(frame) for name, frame in self.named().items()}


def load_study_sets(config: Config) -> StudySets:
    """Load (and subsample, if configured) every set; raises DataError before any training."""
    task, data = config.task, config.data
    evaluation, whole = load_evaluation_sets(config)
    validation = subsample(whole[task.validation], data.max_val_examples)
    train = subsample(load_task_set(config, task.train), data.max_train_examples)
    if data.augment_examples:
        diagnostics = {name: whole[name] for name in config.diagnostics}
        train = pd.concat([train, augmentation(config, diagnostics)], ignore_index=True)
    return StudySets(train, validation, evaluation)


def load_evaluation_sets(
    config: Config,
) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """The evaluation sets as evaluated (the task's, then the diagnostics: subsampled), and
    the same sets whole (validation draws from them; augmentation must be disjoint from
    them)."""
    task, data = config.task, config.data
    downloads = Path(data.cache_dir) / "downloads"
    whole = {
        name: load_task_set(config, declared.source, declared.fields)
        for name, declared in task.evaluation.items()
    }
    evaluation = {
        name: subsample(frame, task.evaluation[name].max_examples or data.max_eval_examples)
        for name, frame in whole.items()
    }
    for name, diagnostic in config.diagnostics.items():
        frame, origin = read_source(diagnostic.source, downloads)
        groups = {group: declared.optional for group, declared in diagnostic.groups.items()}
        fields = merged_fields(task, diagnostic.fields)
        whole[name] = canonical(frame, fields, task.text, diagnostic.labels, origin, groups)
        check_groups(whole[name], diagnostic, origin)
        check_headline(whole[name], diagnostic, name)
        limit = diagnostic.max_examples or data.max_eval_examples
        evaluation[name] = subsample(whole[name], limit, diagnostic.stratify)
    return evaluation, whole


def merged_fields(task: Task, fields: dict[str, list[str]] | None) -> dict[str, list[str]]:
    """A set's `fields` over the task's: a field the set maps is its own, any other is the
    task's (a set that names only its label column keeps the task's text columns)."""
    return {**task.fields, **(fields or {})}


def load_task_set(
    config: Config, source: str, fields: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    """One set of the task (its labels and text fields), from `source`, in canonical form."""
    task = config.task
    frame, origin = read_source(source, Path(config.data.cache_dir) / "downloads")
    fields = merged_fields(task, fields)
    return canonical(frame, fields, task.text, task.labels, origin, None, task.drop_labels)


def check_headline(examples: pd.DataFrame, diagnostic: Diagnostic, name: str) -> None:
    """DataError unless every headline and highlighted column is a column of the set."""
    columns = [column.name for column, _ in diagnostic_columns(name, diagnostic, examples)]
    for declared in (*diagnostic.headline, *diagnostic.highlight):
        if declared not in columns:
            raise DataError(
                f"diagnostics.{name}: {declared!r} is not a column of {name}; its columns: "
                f"{', '.join(columns[:12])}{', ...' if len(columns) > 12 else ''}"
            )


def augmentation(config: Config, diagnostics: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """`data.augment_examples` pairs of the task's augmentation set (even over its `stratify`
    groups) as task examples, their labels mapped by `to_task`. Refuses any pair that is also
    in the diagnostic set it must be disjoint from."""
    task, declared = config.task, config.task.augmentation
    assert declared is not None  # the config's checks: augment_examples needs an augmentation
    frame, origin = read_source(declared.source, Path(config.data.cache_dir) / "downloads")
    groups = {declared.stratify: False} if declared.stratify else None
    fields = merged_fields(task, declared.fields)
    examples = canonical(frame, fields, task.text, declared.labels, origin, groups)
    chosen = subsample(examples, config.data.augment_examples, stratify=declared.stratify)
    if declared.disjoint_from:
        held_out = diagnostics[declared.disjoint_from]
        leaked = set(_pairs(chosen, task.text)) & set(_pairs(held_out, task.text))
        if leaked:
            raise DataError(
                f"{origin}: {len(leaked)} of its pairs are in the diagnostic set "
                f"{declared.disjoint_from}; point task.augmentation.source at a set disjoint "
                "from it"
            )
    to_task = {
        index: task.labels.index(declared.to_task[label])
        for index, label in enumerate(declared.labels)
    }
    result = chosen[["id", *task.text]].copy()
    result["id"] = AUGMENTED_ID_PREFIX + result["id"]
    result["label"] = chosen["label"].map(to_task)
    return result


def _pairs(frame: pd.DataFrame, text: list[str]) -> list[tuple[str, ...]]:
    return list(zip(*(frame[column] for column in text), strict=True))
