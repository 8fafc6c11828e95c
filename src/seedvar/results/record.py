"""results/: the aggregate's tables and its records (verdict.json, correlations.csv,
components.csv) as rules and numbers only; their sentences are the report's
(seedvar.report.wording), so that a change of words reruns the report alone."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from seedvar.config import Config
from seedvar.files import staged_into
from seedvar.results.aggregate import aggregate, write_json
from seedvar.results.evidence import Evidence
from seedvar.stats.correlation import Prediction
from seedvar.stats.plan import ControlTest
from seedvar.stats.reason import Reason
from seedvar.stats.verdict import Verdict

NOTE_RULE, NOTE_NUMBERS = "note_rule", "note_numbers"  # a table's note, as two columns


def verdict_record(decision: Verdict, evidence: Evidence) -> dict[str, Any]:
    """verdict.json's content: the outcome, its rule and numbers, the margins and the design;
    per tested column, whether its claim covers the heuristic or these examples."""
    return {
        "outcome": decision.outcome,
        "rule": decision.reason.rule,
        "numbers": decision.reason.numbers,
        "margin": decision.margin,
        "bias_free_margin": decision.bias_free_margin,
        "null_margin": decision.null_margin,
        "min_seeds": decision.min_seeds,
        "design": asdict(evidence.design),
        "noise_method": {c: found.method for c, found in evidence.noise.items()},
        "columns": [asdict(column) for column in decision.columns],
        "tests": [asdict(test) for test in decision.tests],
        "population": {
            test.column: "heuristic" if test.main_effect else "examples" for test in decision.tests
        },
    }


def prediction_record(prediction: Prediction) -> dict[str, Any]:
    """Whether the primary column predicts the diagnostic columns: the answer and its reason."""
    return {"answer": prediction.answer, "reason": asdict(prediction.reason)}


def control_record(tests: list[ControlTest], alpha: float) -> list[dict[str, Any]]:
    """Each compared column against the negative control, with its level (one-sided,
    Bonferroni over the compared columns)."""
    level = alpha / max(len(tests), 1)
    return [asdict(test) | {"level": level} for test in tests]


def as_reason(found: Reason | dict[str, Any]) -> Reason:
    """A reason from its record ({"rule", "numbers"}, notes within it included)."""
    if isinstance(found, Reason):
        return found
    numbers = dict(found["numbers"])
    if "notes" in numbers:
        numbers["notes"] = [as_reason(note) for note in numbers["notes"]]
    return Reason(found["rule"], numbers)


def noted(table: pd.DataFrame) -> pd.DataFrame:
    """A table whose `note` column holds reasons (or None), as note_rule and note_numbers
    (JSON): a CSV keeps them."""
    notes = [None if r is None or r != r else asdict(as_reason(r)) for r in table["note"]]
    return table.drop(columns="note").assign(
        **{
            NOTE_RULE: [None if n is None else n["rule"] for n in notes],
            NOTE_NUMBERS: [
                None if n is None else json.dumps(n["numbers"], default=_number) for n in notes
            ],
        }
    )


def note_of(row: pd.Series) -> Reason | None:
    """A row's note read back from note_rule and note_numbers (`noted`)."""
    rule = row.get(NOTE_RULE)
    if not isinstance(rule, str):
        return None
    return as_reason({"rule": rule, "numbers": json.loads(row[NOTE_NUMBERS])})


def _number(value: Any) -> Any:
    """A numpy number or array as JSON holds it."""
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not a number")


def write_results(config: Config, runs_dir: Path, results_dir: Path) -> None:
    """results/ and its records, written aside and moved in when all are written: a failure
    leaves the results there were."""
    with staged_into(results_dir) as partial:
        _write_results(config, runs_dir, partial)


def _write_results(config: Config, runs_dir: Path, results_dir: Path) -> None:
    found = aggregate(config, runs_dir, results_dir)
    record = verdict_record(found.decision, found.evidence)
    record["predicts"] = prediction_record(found.predicts)
    reference = found.reference_predicts
    record["reference_predicts"] = None if reference is None else prediction_record(reference)
    record["plan"] = asdict(found.look) | {"hash": config.plan_hash()}
    record["control"] = control_record(found.control, config.plan.alpha)
    write_json(results_dir / "verdict.json", record)
    correlations = pd.DataFrame([asdict(c) for c in found.correlations])
    if len(correlations):
        correlations = noted(correlations)
    correlations.to_csv(results_dir / "correlations.csv", index=False)
    noted(found.components).to_csv(results_dir / "components.csv", index=False)
