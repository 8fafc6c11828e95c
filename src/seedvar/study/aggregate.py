"""Gather the seeds of a study into results/: tables, statistics, agreement, comparison."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from seedvar.config import Config
from seedvar.data.io import read_table
from seedvar.errors import SeedvarError
from seedvar.metrics import (
    GOLD_NAMES,
    HANS_COLUMNS,
    HANS_OVERALL,
    HEADLINE_COLUMNS,
    HEURISTICS,
    MNLI_MATCHED,
    MNLI_MISMATCHED,
    PAPER_COLUMNS,
    SUBCASES,
    EvalSet,
    majority_share_column,
    mlflow_key,
)
from seedvar.study.analysis import agreement, compare_spread, describe, multibootstrap
from seedvar.study.job import SeedJob
from seedvar.study.verdict import Correlation, Prediction, correlate, mnli_predicts_hans, verdict


def seed_table(runs_dir: Path, seeds: list[int]) -> pd.DataFrame:
    """One row per seed: the paper table's columns, MNLI-mm, and the seed; every seed must
    have finished and report the same columns (e.g. the same HANS subcases)."""
    rows = []
    for seed in seeds:
        job = SeedJob(runs_dir, seed)
        metrics = job.finished_metrics()
        if metrics is None:
            raise SeedvarError(
                f"seed {seed} has no results ({job.folder} is not finished); "
                f"run `dvc repro` or `seedvar train --seed {seed}` first"
            )
        rows.append({"seed": seed, **metrics})
    for row in rows[1:]:
        if row.keys() != rows[0].keys():
            missing = sorted(rows[0].keys() ^ row.keys())
            raise SeedvarError(
                f"seeds {rows[0]['seed']} and {row['seed']} report different metrics "
                f"({', '.join(missing[:5])}): they were evaluated on different sets or HANS "
                "subcases; evaluate every seed of a study on the same data"
            )
    table = pd.DataFrame(rows)
    columns = [c for c in ("seed", *PAPER_COLUMNS, MNLI_MISMATCHED) if c in table]
    return table[[*columns, *[c for c in table.columns if c not in columns]]]


def as_trained(config: Config, runs_dir: Path) -> Config:
    """The study's config with its "auto" precisions as its first finished seed chose them
    (the machine that aggregates may not be the one that trained)."""
    finished = [s for s in config.seeds if SeedJob(runs_dir, s).finished_metrics() is not None]
    if not finished:
        return config
    return config.with_precisions_of(SeedJob(runs_dir, finished[0]).finished_config())


def require_one_recipe(config: Config, runs_dir: Path, seeds: list[int]) -> None:
    """SeedvarError naming the seeds and settings where a seed's recipe is not the study's
    (`config` as trained: its precisions concrete)."""
    expected = config.recipe(per_seed=False)
    problems = []
    for seed in seeds:
        trained = SeedJob(runs_dir, seed).finished_config().recipe(per_seed=False)
        differing = [
            f"{key} {trained.get(key)!r} (study: {expected.get(key)!r})"
            for key in sorted(expected.keys() | trained.keys())
            if trained.get(key) != expected.get(key)
        ]
        if differing:
            problems.append(f"seed {seed}: {', '.join(differing[:4])}")
    if problems:
        raise SeedvarError(
            f"seeds trained with another recipe than this study's: {'; '.join(problems[:3])}; "
            "aggregate one recipe at a time (retrain those seeds or point output_dir elsewhere)"
        )


def correct_matrix(
    runs_dir: Path, seeds: list[int], eval_set: EvalSet
) -> tuple[pd.DataFrame, np.ndarray]:
    """The examples of one set (from the first seed) and a seeds x examples matrix of hits."""
    frames = [
        pd.read_parquet(SeedJob(runs_dir, seed).folder / "predictions" / f"{eval_set}.parquet")
        for seed in seeds
    ]
    examples = frames[0].drop(columns=[c for c in frames[0].columns if c.startswith("logit_")])
    for seed, frame in zip(seeds, frames, strict=True):
        if not frame["id"].equals(examples["id"]):
            raise SeedvarError(
                f"seed {seed} was evaluated on other {eval_set} examples than seed {seeds[0]}; "
                "aggregate only seeds of one study (same data settings)"
            )
    correct = np.stack([(f["gold"] == f["predicted"]).to_numpy() for f in frames])
    return examples.drop(columns=["predicted"]), correct


def aggregate(config: Config, runs_dir: Path, results_dir: Path) -> dict[str, object]:
    """Write seeds.csv, summary.json, verdict.json, headline.json, correlations, agreement,
    Multi-Bootstrap and the comparison with the paper into `results_dir`; return the
    headline. No inf or NaN reaches a JSON file: an undefined number is null."""
    results_dir.mkdir(parents=True, exist_ok=True)
    seeds = config.seeds
    table = seed_table(runs_dir, seeds)
    config = as_trained(config, runs_dir)
    require_one_recipe(config, runs_dir, seeds)
    table.to_csv(results_dir / "seeds.csv", index=False)

    numeric = [c for c in table.columns if c != "seed"]
    summary = describe(table, numeric)
    _write_json(results_dir / "summary.json", {"seeds": seeds, "columns": summary.to_dict("index")})
    hans_columns = [c for c in HANS_COLUMNS if c in table]
    correlation_table(correlate(table, hans_columns)).to_csv(
        results_dir / "correlations.csv", index=False
    )

    examples = {}
    for eval_set in (EvalSet.MNLI_MATCHED, EvalSet.HANS):
        examples[eval_set], correct = correct_matrix(runs_dir, seeds, eval_set)
        examples[eval_set]["n_correct"] = agreement(correct)
        examples[eval_set]["n_seeds"] = len(seeds)
        examples[eval_set].to_csv(results_dir / f"agreement_{eval_set}.csv", index=False)
        if eval_set is EvalSet.HANS:
            _multibootstrap_table(examples[eval_set], correct).to_csv(
                results_dir / "multibootstrap.csv", index=False
            )

    paper = read_table(Path(config.data.reference_runs))
    comparison = compare_spread(table, paper, [c for c in PAPER_COLUMNS if c in table])
    comparison.to_csv(results_dir / "comparison.csv", index_label="column")

    sizes = column_sizes(examples[EvalSet.MNLI_MATCHED], examples[EvalSet.HANS])
    shares = {
        str(s): table[majority_share_column(s)].tolist()
        for s in (EvalSet.MNLI_MATCHED, EvalSet.MNLI_MISMATCHED)
        if majority_share_column(s) in table
    }
    decision = verdict(table, sizes, shares)
    _write_json(
        results_dir / "verdict.json",
        {
            "outcome": decision.outcome,
            "reason": decision.reason,
            "margin": decision.margin,
            "min_seeds": decision.min_seeds,
            "columns": [asdict(column) for column in decision.columns],
            "tests": [asdict(test) for test in decision.tests],
            "mnli_predicts_hans": _prediction(mnli_predicts_hans(table)),
            "paper_mnli_predicts_hans": _prediction(mnli_predicts_hans(paper)),
        },
    )
    headline: dict[str, object] = {
        mlflow_key(c): _headline(summary.loc[c]) for c in HEADLINE_COLUMNS if c in table
    }
    headline["seeds"] = {"count": len(seeds)}
    headline["verdict"] = {"outcome": decision.outcome}
    _write_json(results_dir / "headline.json", headline)
    return headline


def column_sizes(mnli: pd.DataFrame, hans: pd.DataFrame) -> dict[str, int]:
    """How many examples each seeds-table column was measured on."""
    sizes = {MNLI_MATCHED: len(mnli), HANS_OVERALL: len(hans)}
    for (heuristic, gold), group in hans.groupby(["heuristic", "gold"]):
        sizes[f"{HEURISTICS[heuristic]} ({GOLD_NAMES[gold]})"] = len(group)
    sizes.update(hans["subcase"].value_counts().to_dict())
    return sizes


def correlation_table(correlations: list[Correlation]) -> pd.DataFrame:
    """Correlations as a table (permutation p-values; empty cells where undefined)."""
    return pd.DataFrame([asdict(c) for c in correlations])


def _prediction(prediction: Prediction) -> dict[str, str]:
    return {"answer": prediction.answer, "reason": prediction.reason}


def _headline(stats: pd.Series) -> dict[str, float]:
    return {name: float(stats[name]) for name in ("mean", "std", "min", "max")}


def _write_json(path: Path, content: object) -> None:
    """JSON without NaN or inf (an undefined number is written as null)."""
    path.write_text(json.dumps(_finite(content), indent=2, allow_nan=False))


def _finite(content: object) -> object:
    if isinstance(content, dict):
        return {key: _finite(value) for key, value in content.items()}
    if isinstance(content, list | tuple):
        return [_finite(value) for value in content]
    if isinstance(content, float) and not math.isfinite(content):
        return None
    return content


def _multibootstrap_table(examples: pd.DataFrame, correct: np.ndarray) -> pd.DataFrame:
    rows = []
    for subcase in [s for s in SUBCASES if s in set(examples["subcase"])]:
        chosen = (examples["subcase"] == subcase).to_numpy()
        mean, low, high = multibootstrap(correct[:, chosen])
        rows.append({"subcase": subcase, "accuracy": mean, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)


def flat_headline(results_dir: Path) -> dict[str, float]:
    """headline.json's numbers as flat MLflow metric keys, e.g. study/hans/lexical_nonent/std."""
    headline = json.loads((results_dir / "headline.json").read_text())
    return {
        f"study/{column}/{stat}": value
        for column, stats in headline.items()
        for stat, value in stats.items()
        if isinstance(value, int | float)
    }
