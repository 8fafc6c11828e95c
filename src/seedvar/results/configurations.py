"""Configurations of one study side by side (a hyperparameter study's confirmation): each
one's verdict and seed std with its interval per compared column, its in-distribution mean,
and per column the test that the seeds spread alike in all of them. Numbers only; the words
are report/configurations.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from seedvar.errors import ConfigError
from seedvar.stats.spread import SpreadDifference, spread_differs

SEEDS, VERDICT = "seeds.csv", "verdict.json"


def read_study(name: str, results_dir: Path) -> tuple[pd.DataFrame, dict]:
    """A configuration's seeds table and verdict record, as `seedvar aggregate` wrote them."""
    missing = [f for f in (SEEDS, VERDICT) if not (results_dir / f).is_file()]
    if missing:
        raise ConfigError(
            f"{name}={results_dir}: no {' or '.join(missing)} there; give the folder "
            "`seedvar aggregate --results` wrote for that configuration"
        )
    return pd.read_csv(results_dir / SEEDS), json.loads((results_dir / VERDICT).read_text())


def compared_columns(record: dict) -> list[str]:
    """The verdict's tested columns not held in (the held-out heuristics), each as the measure
    the verdict weighs (its AUC counterpart where the measure is the AUC)."""
    design = record["design"]
    held_in = set(design.get("held_in", []))
    return [design["bias_free"][c] for c in design["tested"] if c not in held_in]


def compare(studies: dict[str, Path], columns: list[str] | None = None) -> dict:
    """Per configuration and column: seeds, outcome, in-distribution mean, seed std with its
    interval; per column: the Brown-Forsythe test across configurations at 0.05 over the
    number of columns."""
    read = {name: read_study(name, folder) for name, folder in studies.items()}
    first = next(iter(read.values()))[1]
    columns = columns or compared_columns(first)
    reference = first["design"]["reference"][0]
    rows = []
    for name, (table, record) in read.items():
        found = {entry["column"]: entry for entry in record["columns"]}
        for column in columns:
            if column not in found or column not in table:
                raise ConfigError(
                    f"{name}: its results have no column {column!r}; compare "
                    "configurations of one study (the same columns)"
                )
            entry = found[column]
            rows.append(
                {
                    "configuration": name,
                    "column": column,
                    "seeds": len(table),
                    "outcome": record["outcome"],
                    "rule": record["rule"],
                    reference: float(table[reference].mean()),
                    **{
                        k: entry[k]
                        for k in (
                            "mean",
                            "observed_std",
                            "seed_std",
                            "seed_std_low",
                            "seed_std_high",
                            "noise_std",
                        )
                    },
                }
            )
    tests = [
        spread_differs(
            column, {name: table[column].to_numpy() for name, (table, _) in read.items()}
        )
        for column in columns
    ]
    return {
        "reference": reference,
        "columns": columns,
        "level": 0.05 / len(columns),
        "rows": rows,
        "spread": [vars(test) for test in tests],
    }


def spread_tests(record: dict) -> list[SpreadDifference]:
    """The per-column tests of a `compare` record."""
    return [SpreadDifference(**test) for test in record["spread"]]
