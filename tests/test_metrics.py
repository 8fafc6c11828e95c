"""HANS and MNLI scoring, as the paper's declaration names it, against hand-computed
expectations."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seedvar.config import load_config
from seedvar.data.sources import canonical, check_groups, read_source
from seedvar.declared import Diagnostic, Group, task_to_diagnostic
from seedvar.metrics import (
    diagnostic_columns,
    in_distribution_column,
    majority_share_column,
    majority_share_key,
    set_metrics,
)
from tests.helpers import OFFLINE

CONFIG = load_config(None, profile="smoke")
TASK = CONFIG.task
HANS = CONFIG.diagnostics["hans"]
TO_HANS = np.array(task_to_diagnostic(TASK, HANS, "hans"))  # task label -> HANS label
HEURISTICS = HANS.groups["heuristic"].values
HEURISTIC_NAMES = HANS.groups["heuristic"].names
SUBCASES = HANS.groups["subcase"].values
HEURISTIC_COLUMNS = [
    f"{HEURISTIC_NAMES[h]} ({gold})" for gold in ("entailed", "nonent") for h in HEURISTICS
]
OVERALL = "Overall accuracy"

REFERENCE = pd.read_csv(OFFLINE / "reference" / "mccoy2020_runs.csv")
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


def _hans_case() -> tuple[pd.DataFrame, np.ndarray]:
    """Four HANS examples per subcase (canonical columns) and 3-way MNLI predictions of them."""
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
    examples = pd.DataFrame(
        {"label": gold, "heuristic": heuristic, "subcase": subcase, "template": None}
    )
    return examples, np.array(predicted_mnli)


def _score(examples: pd.DataFrame, predicted_hans: np.ndarray) -> dict[str, float]:
    columns = diagnostic_columns("hans", HANS, examples)
    return set_metrics(columns, examples["label"].to_numpy(), predicted_hans)


def test_reference_table_has_the_papers_columns():
    assert len(SUBCASES) == 30 and list(REFERENCE.columns[9:]) == SUBCASES
    assert SUBCASES[0] == "ln_subject/object_swap"
    assert list(REFERENCE.columns[2:8]) == HEURISTIC_COLUMNS
    examples, _ = _hans_case()
    names = [column.name for column, _ in diagnostic_columns("hans", HANS, examples)]
    matched = TASK.evaluation["mnli_matched"]
    paper = [in_distribution_column("mnli_matched", matched, 9815).name, *names]
    assert sorted(paper) == sorted(REFERENCE.columns[1:]) and len(paper) == len(set(paper))
    assert names[0] == OVERALL and names[-30:] == SUBCASES  # subcases in the declared order


def test_hans_label_mapping_counts_neutral_and_contradiction_as_non_entailment():
    assert TO_HANS.tolist() == [0, 1, 1]
    assert TO_HANS[np.array([0, 1, 2, 0])].tolist() == [0, 1, 1, 0]


def test_hans_metrics_by_hand_for_all_30_subcases():
    examples, predicted_mnli = _hans_case()
    result = _score(examples, TO_HANS[predicted_mnli])
    for name, n_correct in zip(SUBCASES, CORRECT_OUT_OF_4, strict=True):
        assert result[name] == n_correct / 4, name
    # ln: 0+1+2+3+4=10, le: 4+4+4+3+4=19, sn: 0+0+1+0+0=1, se: 20, cn: 1+2+0+0+0=3, ce: 19
    assert result["Lexical (nonent)"] == pytest.approx(10 / 20)
    assert result["Lexical (entailed)"] == pytest.approx(19 / 20)
    assert result["Subseq (nonent)"] == pytest.approx(1 / 20)
    assert result["Subseq (entailed)"] == pytest.approx(20 / 20)
    assert result["Constituent (nonent)"] == pytest.approx(3 / 20)
    assert result["Constituent (entailed)"] == pytest.approx(19 / 20)
    assert result[OVERALL] == pytest.approx(72 / 120)
    share = majority_share_column("hans")
    assert set(result) == {OVERALL, *HEURISTIC_COLUMNS, *SUBCASES, share}
    # entailment predicted 104 times: 60 - 14 wrongly on the non-entailed, 58 rightly on the rest
    assert result[share] == pytest.approx(104 / 120)


def test_hans_metrics_per_template():
    examples = pd.DataFrame(
        {
            "label": [1, 1, 1, 0],
            "heuristic": ["lexical_overlap"] * 4,
            "subcase": ["ln_passive", "ln_passive", "ln_passive", "le_passive"],
            "template": ["temp1", "temp1", "temp2", "temp9"],
        }
    )
    columns = diagnostic_columns("hans", HANS, examples)
    result = set_metrics(columns, examples["label"].to_numpy(), np.array([1, 0, 1, 0]))
    assert result["template/ln_passive/temp1"] == 0.5
    assert result["template/ln_passive/temp2"] == 1.0
    assert result["template/le_passive/temp9"] == 1.0
    assert result["ln_passive"] == pytest.approx(2 / 3)
    keys = {column.name: column.key for column, _ in columns}
    assert keys["template/ln_passive/temp1"] == "hans/template/ln_passive/temp1"
    sizes = {column.name: column.size for column, _ in columns}
    assert sizes["template/ln_passive/temp1"] == 2 and sizes["ln_passive"] == 3


def test_mlflow_keys_are_valid_and_distinct():
    examples, _ = _hans_case()
    columns = [
        in_distribution_column(name, declared, 100) for name, declared in TASK.evaluation.items()
    ]
    columns += [column for column, _ in diagnostic_columns("hans", HANS, examples)]
    assert len(columns) == 2 + 37
    keys = {column.name: column.key for column in columns}
    assert len(set(keys.values())) == len(keys) == len(columns)
    assert all(re.fullmatch(r"[/\w.\- :]+", key) for key in keys.values())
    assert keys["MNLI dev acc."] == "mnli/matched_accuracy"
    assert keys["MNLI-mm acc."] == "mnli/mismatched_accuracy"
    assert keys[OVERALL] == "hans/overall"
    assert keys["ln_subject/object_swap"] == "hans/ln_subject/object_swap"
    assert keys["Lexical (nonent)"] == "hans/lexical_nonent"
    assert keys["Constituent (entailed)"] == "hans/constituent_entailed"
    assert majority_share_key("hans") == "majority_share/hans"


def test_a_multi_valued_group_gives_a_coarse_column_and_one_per_value():
    diagnostic = Diagnostic(
        source="unused.jsonl",
        labels=["entailment", "non-entailment"],
        groups={"phenomena": Group(split=";")},
        headline=["probe/phenomena"],
    )
    examples = pd.DataFrame(
        {
            "label": [0, 1, 0, 1, 1],
            "phenomena": ["negation;quantifiers", "negation", None, "coreference;negation", None],
        }
    )
    columns = diagnostic_columns("probe", diagnostic, examples)
    sizes = {column.name: column.size for column, _ in columns}
    assert sizes == {
        "probe overall": 5,
        "probe/phenomena": 3,  # the examples in any value
        "probe/phenomena/coreference": 1,
        "probe/phenomena/negation": 3,
        "probe/phenomena/quantifiers": 1,
    }
    keys = {column.name: column.key for column, _ in columns}
    assert keys["probe overall"] == "probe/overall"
    assert keys["probe/phenomena/negation"] == "probe/phenomena/negation"
    assert {column.set for column, _ in columns} == {"probe"}
    result = set_metrics(columns, examples["label"].to_numpy(), np.array([0, 0, 0, 1, 1]))
    assert result["probe/phenomena"] == pytest.approx(2 / 3)  # rows 0, 1, 3: right, wrong, right
    assert result["probe/phenomena/negation"] == pytest.approx(2 / 3)
    assert result["probe/phenomena/quantifiers"] == 1.0
    assert result["probe/phenomena/coreference"] == 1.0
    assert result["probe overall"] == pytest.approx(4 / 5)
    assert result[majority_share_column("probe")] == pytest.approx(3 / 5)


def test_the_real_offline_hans_set_gives_the_official_scorers_37_columns_and_its_templates(
    tmp_path: Path,
):
    frame, origin = read_source(str(OFFLINE / "hans" / "validation.parquet"), tmp_path)
    groups = list(HANS.groups)
    examples = canonical(frame, HANS.fields, TASK.text, HANS.labels, origin, groups)
    check_groups(examples, HANS, origin)
    columns = [column for column, _ in diagnostic_columns("hans", HANS, examples)]
    sizes = {column.name: column.size for column in columns}
    templates = {name: size for name, size in sizes.items() if name.startswith("template/")}
    assert len(columns) == len(sizes) == 37 + 60  # the official 37, and the 60 templates
    official = {name: size for name, size in sizes.items() if name not in templates}
    assert official == {OVERALL: 30000, **dict.fromkeys(HEURISTIC_COLUMNS, 5000)} | dict.fromkeys(
        SUBCASES, 1000
    )
    assert sorted(official) == sorted(REFERENCE.columns[2:])
    assert sum(templates.values()) == 30000


def test_a_nested_group_with_some_values_missing_scores_the_present_ones():
    raw = pd.DataFrame(
        {
            "pairID": ["ex0", "ex1", "ex2"],
            "sentence1": ["a", "b", "c"],
            "sentence2": ["a", "b", "c"],
            "gold_label": ["non-entailment"] * 3,
            "heuristic": ["lexical_overlap"] * 3,
            "subcase": ["ln_passive"] * 3,
            "template": ["temp1", "", "temp1"],  # one example of no known template
        }
    )
    groups = list(HANS.groups)
    examples = canonical(raw, HANS.fields, TASK.text, HANS.labels, "t", groups)
    sizes = {column.name: column.size for column, _ in diagnostic_columns("hans", HANS, examples)}
    assert sizes["template/ln_passive/temp1"] == 2
    assert [name for name in sizes if name.startswith("template/")] == ["template/ln_passive/temp1"]
