"""Gather the seeds of a study into results/: tables, statistics, agreement, comparison."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from seedvar.config import Config
from seedvar.data.io import read_table
from seedvar.errors import SeedvarError
from seedvar.metrics import (
    HANS_COLUMNS,
    HEADLINE_COLUMNS,
    HEURISTIC_COLUMNS,
    MNLI_MISMATCHED,
    PAPER_COLUMNS,
    SUBCASES,
    SUBJECT_OBJECT_SWAP,
    EvalSet,
    mlflow_key,
)
from seedvar.study.analysis import (
    agreement,
    compare_spread,
    correlations,
    describe,
    multibootstrap,
)
from seedvar.study.job import SeedJob

NOT_RECIPE = {
    *("train.seed", "train.init_seed", "train.data_seed", "seeds", "output_dir"),
    *("tracking.uri", "tracking.experiment", "data.cache_dir", "data.reference_runs"),
}


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


def require_one_recipe(config: Config, runs_dir: Path, seeds: list[int]) -> None:
    """SeedvarError naming the seeds and settings where a seed's recipe is not the study's."""
    expected = _recipe(config)
    problems = []
    for seed in seeds:
        trained = _recipe(SeedJob(runs_dir, seed).finished_config())
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


def _recipe(config: Config) -> dict[str, object]:
    """The settings that decide a seed's result, but for the seed itself."""
    return {key: value for key, value in config.flat().items() if key not in NOT_RECIPE}


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


def aggregate(config: Config, runs_dir: Path, results_dir: Path) -> dict[str, dict[str, float]]:
    """Write seeds.csv, summary.json, headline.json, correlations, agreement, Multi-Bootstrap
    and the comparison with the paper into `results_dir`; return the headline numbers."""
    results_dir.mkdir(parents=True, exist_ok=True)
    seeds = config.seeds
    table = seed_table(runs_dir, seeds)
    require_one_recipe(config, runs_dir, seeds)
    table.to_csv(results_dir / "seeds.csv", index=False)

    numeric = [c for c in table.columns if c != "seed"]
    summary = describe(table, numeric)
    (results_dir / "summary.json").write_text(
        json.dumps({"seeds": seeds, "columns": summary.to_dict(orient="index")}, indent=2)
    )
    correlations(table, [c for c in HANS_COLUMNS if c in table]).to_csv(
        results_dir / "correlations.csv", index=False
    )

    for eval_set in (EvalSet.MNLI_MATCHED, EvalSet.HANS):
        examples, correct = correct_matrix(runs_dir, seeds, eval_set)
        examples["n_correct"] = agreement(correct)
        examples["n_seeds"] = len(seeds)
        examples.to_csv(results_dir / f"agreement_{eval_set}.csv", index=False)
        if eval_set is EvalSet.HANS:
            _multibootstrap_table(examples, correct).to_csv(
                results_dir / "multibootstrap.csv", index=False
            )

    paper = read_table(Path(config.data.reference_runs))
    comparison = compare_spread(table, paper, [c for c in PAPER_COLUMNS if c in table])
    comparison.to_csv(results_dir / "comparison.csv", index_label="column")

    headline = {mlflow_key(c): _headline(summary.loc[c]) for c in HEADLINE_COLUMNS if c in table}
    headline["spread_ratio"] = {
        mlflow_key(c): float(comparison.loc[c, "ours_range_ratio"])
        for c in [*HEURISTIC_COLUMNS, SUBJECT_OBJECT_SWAP]
        if c in comparison.index
    }
    headline["seeds"] = {"count": len(seeds)}
    (results_dir / "headline.json").write_text(json.dumps(headline, indent=2))
    return headline


def _headline(stats: pd.Series) -> dict[str, float]:
    return {name: float(stats[name]) for name in ("mean", "std", "min", "max", "range")}


def _multibootstrap_table(examples: pd.DataFrame, correct: np.ndarray) -> pd.DataFrame:
    rows = []
    for subcase in [s for s in SUBCASES if s in set(examples["subcase"])]:
        chosen = (examples["subcase"] == subcase).to_numpy()
        mean, low, high = multibootstrap(correct[:, chosen])
        rows.append({"subcase": subcase, "accuracy": mean, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)


def flat_headline(results_dir: Path) -> dict[str, float]:
    """headline.json as flat MLflow metric keys, e.g. study/hans/lexical_nonent/std."""
    headline = json.loads((results_dir / "headline.json").read_text())
    return {
        f"study/{column}/{stat}": value
        for column, stats in headline.items()
        for stat, value in stats.items()
    }
