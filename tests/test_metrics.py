"""HANS and MNLI scoring against hand-computed expectations."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from seedvar import metrics
from seedvar.metrics import (
    HANS_OVERALL,
    HEURISTIC_COLUMNS,
    accuracy,
    hans_metrics,
    mlflow_key,
    to_hans_labels,
)
from tests.conftest import OFFLINE

REFERENCE = pd.read_csv(OFFLINE / "reference" / "mccoy2020_runs.csv")
SUBCASES = list(REFERENCE.columns[9:])
HEURISTIC_OF = {"l": "lexical_overlap", "s": "subsequence", "c": "constituent"}
# Correct answers out of 4 for each subcase, in the paper table's column order.
CORRECT_OUT_OF_4 = [
    0,
    1,
    2,
    3,
    4,
    4,
    4,
    4,
    3,
    4,
    0,
    0,
    1,
    0,
    0,
    4,
    4,
    4,
    4,
    4,
    1,
    2,
    0,
    0,
    0,
    4,
    3,
    4,
    4,
    4,
]


def _hans_case() -> tuple[np.ndarray, ...]:
    gold, predicted_mnli, heuristic, subcase = [], [], [], []
    for name, n_correct in zip(SUBCASES, CORRECT_OUT_OF_4, strict=True):
        label = 1 if name[1] == "n" else 0
        right = 0 if label == 0 else 1  # neutral (1) is non-entailment on HANS
        wrong_non_entailment = 2  # contradiction: also non-entailment
        for i in range(4):
            gold.append(label)
            if i < n_correct:
                predicted_mnli.append(right if label == 0 else (1 if i % 2 else 2))
            else:
                predicted_mnli.append(wrong_non_entailment if label == 0 else 0)
            heuristic.append(HEURISTIC_OF[name[0]])
            subcase.append(name)
    return tuple(map(np.array, (gold, predicted_mnli, heuristic, subcase)))


def test_reference_table_has_the_papers_columns():
    assert len(SUBCASES) == 30 and tuple(SUBCASES) == metrics.SUBCASES
    assert tuple(REFERENCE.columns[1:]) == metrics.PAPER_COLUMNS
    assert SUBCASES[0] == "ln_subject/object_swap"
    assert list(REFERENCE.columns[2:8]) == HEURISTIC_COLUMNS


def test_hans_label_mapping_counts_neutral_and_contradiction_as_non_entailment():
    assert to_hans_labels(np.array([0, 1, 2, 0])).tolist() == [0, 1, 1, 0]


def test_hans_metrics_by_hand_for_all_30_subcases():
    gold, predicted_mnli, heuristic, subcase = _hans_case()
    result = hans_metrics(gold, to_hans_labels(predicted_mnli), heuristic, subcase)
    for name, n_correct in zip(SUBCASES, CORRECT_OUT_OF_4, strict=True):
        assert result[name] == n_correct / 4, name
    # ln: 0+1+2+3+4=10, le: 4+4+4+3+4=19, sn: 0+0+1+0+0=1, se: 20, cn: 1+2+0+0+0=3, ce: 19
    assert result["Lexical (nonent)"] == pytest.approx(10 / 20)
    assert result["Lexical (entailed)"] == pytest.approx(19 / 20)
    assert result["Subseq (nonent)"] == pytest.approx(1 / 20)
    assert result["Subseq (entailed)"] == pytest.approx(20 / 20)
    assert result["Constituent (nonent)"] == pytest.approx(3 / 20)
    assert result["Constituent (entailed)"] == pytest.approx(19 / 20)
    assert result[HANS_OVERALL] == pytest.approx(72 / 120)
    assert set(result) == {HANS_OVERALL, *HEURISTIC_COLUMNS, *SUBCASES}


def test_hans_metrics_per_template():
    result = hans_metrics(
        gold=np.array([1, 1, 1, 0]),
        predicted=np.array([1, 0, 1, 0]),
        heuristic=np.array(["lexical_overlap"] * 4),
        subcase=np.array(["ln_passive", "ln_passive", "ln_passive", "le_passive"]),
        template=np.array(["temp1", "temp1", "temp2", "temp9"], dtype=object),
    )
    assert result["template/ln_passive/temp1"] == 0.5
    assert result["template/ln_passive/temp2"] == 1.0
    assert result["template/le_passive/temp9"] == 1.0
    assert result["ln_passive"] == pytest.approx(2 / 3)


def test_mnli_accuracy():
    assert accuracy(np.array([0, 1, 2, 2]), np.array([0, 2, 2, 2])) == 0.75
    with pytest.raises(ValueError):
        accuracy(np.array([]), np.array([]))


def test_mlflow_keys_are_valid_and_distinct():
    columns = ["MNLI dev acc.", "MNLI-mm acc.", HANS_OVERALL, *HEURISTIC_COLUMNS, *SUBCASES]
    keys = [mlflow_key(column) for column in columns]
    assert len(set(keys)) == len(keys)
    assert all(re.fullmatch(r"[/\w.\- :]+", key) for key in keys)
    assert mlflow_key("ln_subject/object_swap") == "hans/ln_subject/object_swap"
    assert mlflow_key("Lexical (nonent)") == "hans/lexical_nonent"
