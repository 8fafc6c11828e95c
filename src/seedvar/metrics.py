"""Pure metric functions (no I/O). Names follow the paper's per-run table.

Paper columns (reference/mccoy2020_runs.csv): "MNLI dev acc." (matched), the six
heuristic x gold-label columns such as "Lexical (nonent)", "Overall accuracy" (HANS), and
the 30 subcases such as "ln_subject/object_swap". We add "MNLI-mm acc." and, where HANS
templates are known, "template/<subcase>/<template>".
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np


class EvalSet(StrEnum):
    """The evaluation sets of a study; their values name prediction files and tokenized sets."""

    MNLI_MATCHED = "mnli_matched"
    MNLI_MISMATCHED = "mnli_mismatched"
    HANS = "hans"


MNLI_LABELS = ("entailment", "neutral", "contradiction")  # GLUE order: 0, 1, 2
HANS_LABELS = ("entailment", "non-entailment")  # Hugging Face `hans` order: 0, 1
ENTAILMENT = 0
VAL_ACCURACY = "val/mnli_matched_accuracy"  # per-epoch accuracy on the validation subset
TRAIN_LOSS = "train/loss"
TRAIN_SECONDS = "time/train_seconds"  # wall time of a seed's training (this attempt's part)
EVALUATE_SECONDS = "time/evaluate_seconds"  # wall time of its evaluation

MNLI_MATCHED = "MNLI dev acc."
MNLI_MISMATCHED = "MNLI-mm acc."
HANS_OVERALL = "Overall accuracy"
HEURISTICS = {"lexical_overlap": "Lexical", "subsequence": "Subseq", "constituent": "Constituent"}
GOLD_NAMES = {0: "entailed", 1: "nonent"}
HEURISTIC_COLUMNS = [
    f"{short} ({GOLD_NAMES[gold]})" for gold in (0, 1) for short in HEURISTICS.values()
]
SUBCASES = (
    "ln_subject/object_swap",
    "ln_preposition",
    "ln_relative_clause",
    "ln_passive",
    "ln_conjunction",
    "le_relative_clause",
    "le_around_prepositional_phrase",
    "le_around_relative_clause",
    "le_conjunction",
    "le_passive",
    "sn_NP/S",
    "sn_PP_on_subject",
    "sn_relative_clause_on_subject",
    "sn_past_participle",
    "sn_NP/Z",
    "se_conjunction",
    "se_adjective",
    "se_understood_object",
    "se_relative_clause_on_obj",
    "se_PP_on_obj",
    "cn_embedded_under_if",
    "cn_after_if_clause",
    "cn_embedded_under_verb",
    "cn_disjunction",
    "cn_adverb",
    "ce_embedded_under_since",
    "ce_after_since_clause",
    "ce_embedded_under_verb",
    "ce_conjunction",
    "ce_adverb",
)  # fmt: skip  (five subcases per line, as in the paper's table)
PAPER_COLUMNS = (MNLI_MATCHED, *HEURISTIC_COLUMNS, HANS_OVERALL, *SUBCASES)
HANS_COLUMNS = (*HEURISTIC_COLUMNS, HANS_OVERALL, *SUBCASES)
NON_ENTAILED_COLUMNS = tuple(c for c in HEURISTIC_COLUMNS if c.endswith("(nonent)"))
SUBJECT_OBJECT_SWAP = "ln_subject/object_swap"
HANS_NON_ENTAILED = "HANS non-entailed"  # all non-entailed HANS examples
MAJORITY_SHARE = "majority share"  # share of a set's most frequent predicted label
HEADLINE_COLUMNS = (MNLI_MATCHED, *NON_ENTAILED_COLUMNS, SUBJECT_OBJECT_SWAP)


def accuracy(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Fraction of equal labels."""
    if len(gold) == 0:
        raise ValueError("accuracy of an empty set")
    return float(np.mean(np.asarray(gold) == np.asarray(predicted)))


def to_hans_labels(predicted_mnli: np.ndarray) -> np.ndarray:
    """3-way MNLI predictions -> HANS labels: entailment stays 0, neutral/contradiction -> 1."""
    return np.where(np.asarray(predicted_mnli) == ENTAILMENT, 0, 1)


def hans_metrics(
    gold: np.ndarray,
    predicted: np.ndarray,
    heuristic: np.ndarray,
    subcase: np.ndarray,
    template: np.ndarray | None = None,
) -> dict[str, float]:
    """HANS accuracies: overall, per heuristic x gold label, per subcase, per template if known.

    `gold` and `predicted` are HANS labels (0 entailment, 1 non-entailment).
    """
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    heuristic, subcase = np.asarray(heuristic), np.asarray(subcase)
    correct = gold == predicted
    result = {HANS_OVERALL: float(correct.mean())}
    for name, short in HEURISTICS.items():
        for label, gold_name in GOLD_NAMES.items():
            chosen = (heuristic == name) & (gold == label)
            if chosen.any():
                result[f"{short} ({gold_name})"] = float(correct[chosen].mean())
    for name in sorted(set(subcase)):
        result[name] = float(correct[subcase == name].mean())
    if template is not None:
        template = np.asarray(template, dtype=object)
        known = np.array([value is not None and value == value for value in template])
        for sub, temp in sorted(
            {(s, t) for s, t in zip(subcase[known], template[known], strict=True)}
        ):
            chosen = (subcase == sub) & (template == temp)
            result[f"template/{sub}/{temp}"] = float(correct[chosen].mean())
    return result


def hans_non_entailed(metrics: dict[str, float]) -> float:
    """Accuracy on all non-entailed HANS examples (the three heuristics are equally large)."""
    return float(np.mean([metrics[column] for column in NON_ENTAILED_COLUMNS]))


def majority_share_column(eval_set: EvalSet) -> str:
    """The metric column holding a set's majority share, e.g. `majority share hans`."""
    return f"{MAJORITY_SHARE} {eval_set}"


def majority_share(predicted: np.ndarray) -> float:
    """Share of the most frequent predicted label: 1.0 for a seed that predicts one class."""
    return float(np.bincount(np.asarray(predicted)).max() / len(predicted))


def set_metrics(
    eval_set: EvalSet,
    gold: np.ndarray,
    predicted: np.ndarray,
    hans_groups: dict[str, np.ndarray] | None = None,
) -> dict[str, float]:
    """Paper-named metrics of one evaluation set and its majority share; `hans_groups` holds
    HANS's heuristic, subcase and (where known) template per example."""
    share = {majority_share_column(eval_set): majority_share(predicted)}
    if eval_set is EvalSet.HANS:
        if hans_groups is None:
            raise ValueError("HANS metrics need the heuristic and subcase of every example")
        return {**hans_metrics(gold, predicted, **hans_groups), **share}
    name = MNLI_MATCHED if eval_set is EvalSet.MNLI_MATCHED else MNLI_MISMATCHED
    return {name: accuracy(gold, predicted), **share}


def mlflow_key(column: str) -> str:
    """An MLflow-safe metric key for a paper column (MLflow forbids parentheses)."""
    if column == MNLI_MATCHED:
        return "mnli/matched_accuracy"
    if column == MNLI_MISMATCHED:
        return "mnli/mismatched_accuracy"
    if column == HANS_OVERALL:
        return "hans/overall"
    if column.startswith(MAJORITY_SHARE):
        return f"majority_share/{column.removeprefix(MAJORITY_SHARE).strip()}"
    if column in HEURISTIC_COLUMNS:
        short, gold_name = column.rstrip(")").split(" (")
        return f"hans/{short.lower()}_{gold_name}"
    return f"hans/{column}"
