"""The sets one study uses, loaded as its declaration says: train, per-epoch validation, and the
evaluation sets (the task's in-distribution sets, then the diagnostic sets)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from seedvar.config import Config, remote
from seedvar.data.io import cheap_to_read_alone, fingerprint, read_header, read_table, subsample
from seedvar.data.sources import (
    canonical,
    check_groups,
    dropped,
    map_labels,
    needed_fields,
    read_source,
    require_columns,
    source_column,
)
from seedvar.declared import (
    SEED_COLUMN,
    Augmentation,
    Diagnostic,
    Fields,
    Task,
    in_distribution_name,
)
from seedvar.errors import DataError
from seedvar.metrics import diagnostic_columns, majority_share_column

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
        train = pd.concat([train, augmentation(config, whole)], ignore_index=True)
    return StudySets(train, validation, evaluation)


def load_evaluation_sets(config: Config) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """The evaluation sets as evaluated (the task's, then the diagnostics: subsampled), and
    whole (validation draws from them; augmentation must be disjoint from them)."""
    task, data = config.task, config.data
    whole: dict[str, pd.DataFrame] = {}
    evaluation: dict[str, pd.DataFrame] = {}
    for name, declared in task.evaluation.items():
        whole[name] = load_task_set(config, declared.source, declared.fields)
        evaluation[name] = subsample(whole[name], declared.max_examples or data.max_eval_examples)
    for name, diagnostic in config.diagnostics.items():
        reading = diagnostic_reading(task, diagnostic)
        whole[name] = reading.load(config)
        check_groups(whole[name], diagnostic, reading.source)
        check_headline(whole[name], diagnostic, name)
        limit = diagnostic.max_examples or data.max_eval_examples
        evaluation[name] = subsample(whole[name], limit, diagnostic.stratify)
    check_column_names(config, whole)
    return evaluation, whole


def merged_fields(task: Task, fields: dict[str, list[str]] | None) -> dict[str, list[str]]:
    """A set's `fields` over the task's: a field the set maps is its own, any other is the
    task's (a set that names only its label column keeps the task's text columns)."""
    return {**task.fields, **(fields or {})}


@dataclass(frozen=True)
class Reading:
    """How one declared set is read into the canonical schema (see sources.canonical)."""

    source: str
    fields: Fields  # merged over the task's
    text: list[str]
    labels: list[str]
    groups: list[str] | None = None  # its group columns, every one required
    drop_labels: list[str] | None = None

    def load(self, config: Config) -> pd.DataFrame:
        """The set, read from its source and brought to the canonical schema."""
        frame, origin = read_source(self.source, Path(config.data.cache_dir) / "downloads")
        return canonical(
            frame, self.fields, self.text, self.labels, origin, self.groups, self.drop_labels
        )

    def check_header(self, where: str) -> None:
        """DataError, from the file's header (and its label column, where that reads alone),
        for a column the set needs and the file lacks or a label value not of its labels.
        A source on the hub or the web, or a file not there, is checked when it loads."""
        path = Path(self.source)
        if remote(self.source) or not path.is_file():
            return
        origin = f"{where} ({self.source})"
        columns = read_header(path)
        require_columns(columns, self.fields, needed_fields(self.text, self.groups), origin)
        label = source_column(columns, self.fields, "label")
        if label is not None and cheap_to_read_alone(path):
            values = read_table(path, [label])[label].drop_duplicates()
            map_labels(values[~dropped(values, self.drop_labels or [])], self.labels, origin)


def task_reading(task: Task, source: str, fields: Fields | None = None) -> Reading:
    """How a set of the task (train, an evaluation set) is read."""
    fields = merged_fields(task, fields)
    return Reading(source, fields, task.text, task.labels, drop_labels=task.drop_labels)


def diagnostic_reading(task: Task, diagnostic: Diagnostic) -> Reading:
    """How a diagnostic set is read: its groups, the one it is drawn evenly over required."""
    groups = list(diagnostic.groups)
    fields = merged_fields(task, diagnostic.fields)
    return Reading(diagnostic.source, fields, task.text, diagnostic.labels, groups)


def augmentation_reading(task: Task, declared: Augmentation) -> Reading:
    """How the task's augmentation set is read (its stratify and held-out columns required)."""
    needed = [declared.stratify] if declared.stratify else []
    groups = [*needed, *declared.held_out] or None
    fields = merged_fields(task, declared.fields)
    return Reading(declared.source, fields, task.text, declared.labels, groups)


def check_headers(config: Config) -> None:
    """Before any set is loaded: DataError for the first local source whose header lacks a
    column its set needs (text, label, every declared group), or whose
    label column holds a value that is not a declared label (Reading.check_header)."""
    task = config.task
    task_reading(task, task.train).check_header("task.train")
    for name, declared in task.evaluation.items():
        task_reading(task, declared.source, declared.fields).check_header(f"task.evaluation.{name}")
    for name, diagnostic in config.diagnostics.items():
        diagnostic_reading(task, diagnostic).check_header(f"diagnostics.{name}")
    if task.augmentation and config.data.augment_examples:
        augmentation_reading(task, task.augmentation).check_header("task.augmentation")


def load_task_set(
    config: Config, source: str, fields: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    """One set of the task (its labels and text fields), from `source`, in canonical form."""
    return task_reading(config.task, source, fields).load(config)


def check_column_names(config: Config, examples: dict[str, pd.DataFrame]) -> None:
    """DataError for a seeds-table column that two sets or groups of the study, or a set and
    seedvar itself (the seed, a set's majority share), would name alike: one would overwrite
    the other. `examples`: the sets, whole."""
    taken = {SEED_COLUMN: "the seeds table's seed"}
    taken |= {majority_share_column(name): f"the majority share of {name}" for name in examples}
    evaluation = config.task.evaluation.items()
    named = [(f"task.evaluation.{n}", in_distribution_name(n, d)) for n, d in evaluation]
    for name, diagnostic in config.diagnostics.items():
        columns = diagnostic_columns(name, diagnostic, examples[name])
        named += [(f"diagnostics.{name}", column.name) for column, _ in columns]
    for where, column in named:
        if column in taken:
            raise DataError(
                f"{where}: its column {column!r} is also {taken[column]}; name them apart: put "
                '{group} in a group\'s column template (e.g. column: "{set}/{group}/{value}"), '
                "or give the set (or its overall) another column"
            )
        taken[column] = f"a column of {where}"


def check_headline(examples: pd.DataFrame, diagnostic: Diagnostic, name: str) -> None:
    """DataError unless every headline and highlighted column is a column of the set."""
    columns = [column.name for column, _ in diagnostic_columns(name, diagnostic, examples)]
    for declared in (*diagnostic.headline, *diagnostic.highlight):
        if declared not in columns:
            raise DataError(
                f"diagnostics.{name}: {declared!r} is not a column of {name}; its columns: "
                f"{', '.join(columns[:12])}{', ...' if len(columns) > 12 else ''}"
            )


def augmentation(config: Config, whole: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """`data.augment_examples` pairs of the task's augmentation set (even over its `stratify`
    groups) as task examples, their labels mapped by `to_task`. Refuses any pair that is also
    in the diagnostic set it must be disjoint from (`whole`: the study's sets by name, whole)."""
    task, declared = config.task, config.task.augmentation
    assert declared is not None  # the config's checks: augment_examples needs an augmentation
    examples = without_held_out(augmentation_reading(task, declared).load(config), declared)
    chosen = subsample(examples, config.data.augment_examples, stratify=declared.stratify)
    if declared.disjoint_from:
        held_out = whole[declared.disjoint_from]
        leaked = set(_pairs(chosen, task.text)) & set(_pairs(held_out, task.text))
        if leaked:
            raise DataError(
                f"{declared.source}: {len(leaked)} of its pairs are in the diagnostic set "
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


def without_held_out(examples: pd.DataFrame, declared: Augmentation) -> pd.DataFrame:
    """The augmentation set less its `held_out` groups; DataError for a held-out value the
    set does not hold (a misspelt one would hold nothing out)."""
    kept = pd.Series(True, index=examples.index)
    for column, values in declared.held_out.items():
        present = set(examples[column].astype(str))
        unknown = [value for value in values if value not in present]
        if unknown:
            raise DataError(
                f"task.augmentation.held_out.{column}: {', '.join(map(repr, unknown))} is not a "
                f"value of {column} in {declared.source}; its values: "
                f"{', '.join(sorted(present)[:12])}"
            )
        kept &= ~examples[column].astype(str).isin(values)
    if not kept.any():
        raise DataError(
            "task.augmentation.held_out holds out every pair of the augmentation set; hold "
            "out fewer groups"
        )
    return examples[kept]


def _pairs(frame: pd.DataFrame, text: list[str]) -> list[tuple[str, ...]]:
    return list(zip(*(frame[column] for column in text), strict=True))
