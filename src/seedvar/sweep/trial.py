"""One trial's bookkeeping, the same in the serial and the Ray sweep: its MLflow run (tags,
parameters), its seeds' tags, and what it records once its seeds are back (Optuna user
attributes, summary metrics, the objective values)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd

from seedvar import tracking
from seedvar.config import Config, SweepConfig
from seedvar.declared import headline_mean_column, primary_column
from seedvar.metrics import MAJORITY_SHARE, safe_key
from seedvar.seeds.finished import FinishedSeed

SWEEP_TAG = "seedvar.sweep"
TRIAL_NUMBER_TAG = "optuna.trial_number"
OUTPUT_DIR_ATTR, SEEDS_ATTR = "output_dir", "seeds"  # where a trial's seed folders are
MLFLOW_RUN_ATTR = "mlflow_run_id"  # the trial's MLflow run


def prunes(sweep: SweepConfig) -> bool:
    """Whether the sweep prunes trials (the median pruner, in the accuracy mode)."""
    return sweep.pruner == "median" and sweep.mode == "accuracy"


def seed_tags(config: Config) -> dict[str, str]:
    """Tags of a trial's seed runs (beside the seed's own)."""
    return {SWEEP_TAG: config.sweep.study_name}


def start_trial_run(
    trial: optuna.Trial, config: Config, params: dict[str, Any], resume_run_id: str | None = None
) -> tracking.TrackedRun:
    """The MLflow run of a trial, the parent of its seeds' runs (or `resume_run_id`, the one
    a driver that died had opened): its tags, parameters, and its id in the trial's user
    attributes. Its opener ends it."""
    sweep = config.sweep
    description = (
        f"Trial {trial.number} of sweep {sweep.study_name}: the configuration {params}, trained "
        f"with seeds 0-{sweep.seeds_per_trial - 1} (its child runs)."
    )
    tags = {
        tracking.ROLE_TAG: "trial",
        SWEEP_TAG: sweep.study_name,
        TRIAL_NUMBER_TAG: str(trial.number),
        tracking.DESCRIPTION_TAG: description,
    }
    name = f"trial {trial.number}"
    run = tracking.start_run(config, name, tags=tags, resume_run_id=resume_run_id)
    if resume_run_id is None:
        drawn = {f"trial.{k}": v for k, v in params.items()}
        run.log_params({**drawn, **config.recipe(per_seed=False)})
        trial.set_user_attr(MLFLOW_RUN_ATTR, run.run_id)
    return run


def with_headline_means(config: Config, metrics: dict[str, float]) -> dict[str, float]:
    """A seed's accuracy columns (no majority shares), and each diagnostic set's headline mean
    (the mean of its headline columns: the sweep's spread objective takes its first)."""
    found = {k: v for k, v in metrics.items() if not k.startswith(MAJORITY_SHARE)}
    for name, diagnostic in config.diagnostics.items():
        found[headline_mean_column(name)] = float(
            np.mean([metrics[c] for c in diagnostic.headline])
        )
    return found


def seed_summary(config: Config, per_seed: list[dict[str, float]]) -> dict[str, float]:
    """Mean and std across seeds of every accuracy column and headline mean."""
    table = pd.DataFrame([with_headline_means(config, metrics) for metrics in per_seed])
    summary = {}
    for column in table.columns:
        summary[f"mean/{column}"] = float(table[column].mean())
        summary[f"std/{column}"] = float(table[column].std(ddof=1))
    return summary


def objective_values(config: Config, summary: dict[str, float]) -> list[float]:
    """Mean accuracy of the primary in-distribution column; in the accuracy_and_spread mode
    also the std across seeds of the first diagnostic set's headline mean."""
    values = [summary[f"mean/{primary_column(config.task)}"]]
    if config.sweep.mode == "accuracy_and_spread":
        first = next(iter(config.diagnostics))
        values.append(summary[f"std/{headline_mean_column(first)}"])
    return values


def record_trial(
    trial: optuna.Trial,
    config: Config,
    per_seed: dict[int, dict[str, float]],
    run: tracking.TrackedRun,
) -> list[float]:
    """Record a trial whose seeds have all finished (user attributes: the summary and where
    its seeds are; the summary on its run, under the columns' MLflow keys); returns its
    objective values."""
    summary = seed_summary(config, [per_seed[seed] for seed in sorted(per_seed)])
    for key, value in summary.items():
        trial.set_user_attr(key, value)
    trial.set_user_attr(OUTPUT_DIR_ATTR, config.output_dir)
    trial.set_user_attr(SEEDS_ATTR, sorted(per_seed))
    columns = FinishedSeed(Path(config.output_dir), min(per_seed)).columns()
    keys = {column.name: column.key for column in columns}
    logged = {}
    for name, value in summary.items():
        statistic, column = name.split("/", 1)
        logged[f"{statistic}/{keys.get(column) or safe_key(column)}"] = value
    run.log_raw_metrics(logged)
    return objective_values(config, summary)
