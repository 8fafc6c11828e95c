"""Metrics of a set's predictions as its declaration names them (pure: no I/O).

Every evaluation set yields accuracy columns: an in-distribution set one; a diagnostic set its
overall accuracy and one per value of each group (per value and gold label where the group
says `by_label`). Each column has a seeds-table name and an MLflow key, both from the
declaration (for the paper's study: "MNLI dev acc.", "Lexical (nonent)", the 30 subcases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from seedvar.declared import Diagnostic, Group, InDistribution, in_distribution_name

TRAIN_SECONDS = "time/train_seconds"  # wall time of a seed's training (this attempt's part)
EVALUATE_SECONDS = "time/evaluate_seconds"  # wall time of its evaluation
MAJORITY_SHARE = "majority share"  # share of a set's most frequent predicted label


@dataclass(frozen=True)
class Column:
    """One accuracy column of a study: its seeds-table name, MLflow key, set and size."""

    name: str
    key: str
    set: str
    size: int


def validation_key(set_name: str) -> str:
    """The per-epoch validation accuracy's metric name, e.g. val/mnli_matched_accuracy."""
    return f"val/{set_name}_accuracy"


def majority_share(predicted: np.ndarray) -> float:
    """Share of the most frequent predicted label: 1.0 for a seed that predicts one class."""
    return float(np.bincount(np.asarray(predicted)).max() / len(predicted))


def majority_share_column(set_name: str) -> str:
    """The metric column holding a set's majority share, e.g. `majority share hans`."""
    return f"{MAJORITY_SHARE} {set_name}"


def safe_key(text: str) -> str:
    """An MLflow-safe metric key: `a (b)` becomes `a_b`, other forbidden characters `_`."""
    return re.sub(r"[^\w\-./ ]", "_", re.sub(r"\s*\(([^)]*)\)", r"_\1", text))


def in_distribution_column(name: str, declared: InDistribution, size: int) -> Column:
    key = declared.key or f"{name}/accuracy"
    return Column(in_distribution_name(name, declared), key, name, size)


def diagnostic_columns(
    name: str, declared: Diagnostic, examples: pd.DataFrame
) -> list[tuple[Column, np.ndarray]]:
    """A diagnostic set's columns, each with the mask of its examples (canonical `examples`,
    or predictions: gold label and group columns)."""
    return [(column, mask) for column, mask, _ in _scoped_columns(name, declared, examples)]


def bias_free_scopes(
    name: str, declared: Diagnostic, examples: pd.DataFrame
) -> dict[str, np.ndarray]:
    """Per column of a diagnostic set, the examples its bias-free counterpart is measured on:
    the column's group value without its gold-label restriction (HANS's Lexical (nonent):
    every lexical-overlap example), widened to the enclosing group (a subcase: its heuristic)
    and then to the whole set until it holds at least two gold labels."""
    return {column.name: scope for column, _, scope in _scoped_columns(name, declared, examples)}


def _scoped_columns(
    name: str, declared: Diagnostic, examples: pd.DataFrame
) -> list[tuple[Column, np.ndarray, np.ndarray]]:
    gold = examples["label" if "label" in examples else "gold"].to_numpy()
    everything = np.ones(len(examples), dtype=bool)
    overall = Column(
        declared.overall.column or f"{name} overall",
        declared.overall.key or f"{name}/overall",
        name,
        len(examples),
    )
    found = [(overall, everything, everything)]
    for group, level in declared.groups.items():
        found += _group_columns(name, group, level, examples, gold, declared.labels)
    return found


def _mixed(gold: np.ndarray, *candidates: np.ndarray) -> np.ndarray:
    """The first candidate mask holding at least two gold labels (the last one else)."""
    return next((m for m in candidates if len(np.unique(gold[m])) >= 2), candidates[-1])


def _group_columns(
    set_name: str,
    group: str,
    level: Group,
    examples: pd.DataFrame,
    gold: np.ndarray,
    labels: list[str],
) -> list[tuple[Column, np.ndarray, np.ndarray]]:
    values = examples[group]
    if values.isna().all():
        return []
    everything = np.ones(len(values), dtype=bool)
    if level.split is not None:  # multi-valued: the category, then each of its values
        member = values.notna().to_numpy()
        coarse = f"{set_name}/{group}"
        column = Column(coarse, safe_key(coarse), set_name, int(member.sum()))
        found = [(column, member, _mixed(gold, member, everything))]
        split = values.fillna("").str.split(level.split)
        for value in sorted({v for parts in split for v in parts if v}):
            mask = split.map(lambda parts, value=value: value in parts).to_numpy()
            name = f"{coarse}/{value}"
            scope = _mixed(gold, mask, member, everything)
            found.append((Column(name, safe_key(name), set_name, int(mask.sum())), mask, scope))
        return found
    value_of = _objects(values)
    parent_of = _objects(examples[level.within]) if level.within else np.full(len(values), "")
    order = {value: i for i, value in enumerate(level.values or [])}
    pairs = {(p, v) for p, v in zip(parent_of, value_of, strict=True) if None not in (p, v)}
    unique = sorted(pairs, key=lambda pair: (order.get(pair[1], len(order)), pair))
    found = []
    for parent, value in unique:
        mask = (parent_of == parent) & (value_of == value)
        scope = _mixed(gold, mask, parent_of == parent, everything)
        display = level.names.get(value, value)
        fill = {"set": set_name, "group": group, "value": value, "parent": parent}
        fill |= {"name": display, "name_lower": display.lower()}
        if level.by_label is None:
            found.append((_column(level, fill, "{set}/{value}", mask), mask, scope))
            continue
        for index, label in enumerate(labels):
            chosen = mask & (gold == index)
            if chosen.any() and label in level.by_label:
                filled = fill | {"label": level.by_label[label]}
                column = _column(level, filled, "{set}/{name} ({label})", chosen)
                found.append((column, chosen, scope))
    return found


def _objects(values: pd.Series) -> np.ndarray:
    """A group column's values as objects, None where it has none (pandas may hold NaN)."""
    return values.astype(object).where(values.notna(), None).to_numpy(dtype=object)


def _column(level: Group, fill: dict[str, str], default: str, mask: np.ndarray) -> Column:
    name = (level.column or default).format(**fill)
    prefixed = name if name.startswith(f"{fill['set']}/") else f"{fill['set']}/{name}"
    key = level.key.format(**fill) if level.key else safe_key(prefixed)
    return Column(name, key, fill["set"], int(mask.sum()))


def majority_share_key(set_name: str) -> str:
    return f"majority_share/{set_name}"


def set_metrics(
    columns: list[tuple[Column, np.ndarray]], gold: np.ndarray, predicted: np.ndarray
) -> dict[str, float]:
    """Accuracy of every column (by name) and the set's majority share."""
    correct = np.asarray(gold) == np.asarray(predicted)
    metrics = {column.name: float(correct[mask].mean()) for column, mask in columns}
    metrics[majority_share_column(columns[0][0].set)] = majority_share(predicted)
    return metrics


def bias_free_column(column: str) -> str:
    """The seeds-table name of a column's bias-free counterpart."""
    return f"{column} [bias-free]"


def other_labels_column(column: str) -> str:
    """The seeds-table name of the accuracy on the rest of a column's bias-free scope (its
    other gold labels): set against the column, a threshold shift is a falling line."""
    return f"{column} [other labels]"


BIAS_FREE_CHANCE = 0.5  # bias-free accuracy of answers that carry no information on the gold


def bias_free_accuracy(counts: np.ndarray) -> np.ndarray:
    """Accuracy with the answer bias taken out, from confusion counts (..., gold, predicted).

    Per gold label l present: d'_l = z(hit rate) - z(false-alarm rate) of answering l
    (one-vs-rest, rates with the log-linear correction (x + 0.5) / (n + 1)), and Phi(d'_l / 2),
    the accuracy an unbiased observer with that sensitivity has; their mean. With two labels
    it is Phi((z(acc_a) + z(acc_b)) / 2): a seed that only answers one label more often keeps
    its value (equal-variance signal detection), and answers independent of the gold give 0.5.
    """
    counts = np.asarray(counts, dtype=float)
    per_label = counts.sum(axis=-1)
    total = per_label.sum(axis=-1, keepdims=True)
    hits = np.diagonal(counts, axis1=-2, axis2=-1)
    false_alarms = counts.sum(axis=-2) - hits
    hit_rate = (hits + 0.5) / (per_label + 1)
    false_alarm_rate = (false_alarms + 0.5) / (total - per_label + 1)
    unbiased = ndtr((ndtri(hit_rate) - ndtri(false_alarm_rate)) / 2)
    present = per_label > 0
    return (unbiased * present).sum(axis=-1) / present.sum(axis=-1)


def accuracy_of_counts(counts: np.ndarray) -> np.ndarray:
    """Accuracy from confusion counts (..., gold, predicted)."""
    counts = np.asarray(counts, dtype=float)
    return np.diagonal(counts, axis1=-2, axis2=-1).sum(axis=-1) / counts.sum(axis=(-2, -1))
