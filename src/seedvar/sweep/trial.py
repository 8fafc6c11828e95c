"""One trial's bookkeeping, the same in the serial and the Ray sweep: its MLflow run (tags,
parameters), its seeds' tags, and what it records once its seeds are back (Optuna user
attributes, summary metrics, the objective values)."""

from __future__ import annotations

from typing import Any

import optuna
import pandas as pd

from seedvar import tracking
from seedvar.config import Config, SweepConfig
from seedvar.metrics import (
    HANS_NON_ENTAILED,
    MNLI_MATCHED,
    MNLI_MISMATCHED,
    PAPER_COLUMNS,
    hans_non_entailed,
    mlflow_key,
)

SUMMARIZED = [*PAPER_COLUMNS, MNLI_MISMATCHED, HANS_NON_ENTAILED]
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


def seed_summary(per_seed: list[dict[str, float]]) -> dict[str, float]:
    """Mean and std across seeds of every paper column and of HANS non-entailed accuracy."""
    table = pd.DataFrame([{**m, HANS_NON_ENTAILED: hans_non_entailed(m)} for m in per_seed])
    summary = {}
    for column in SUMMARIZED:
        summary[f"mean/{column}"] = float(table[column].mean())
        summary[f"std/{column}"] = float(table[column].std(ddof=1))
    return summary


def record_trial(
    trial: optuna.Trial,
    config: Config,
    per_seed: dict[int, dict[str, float]],
    run: tracking.TrackedRun,
) -> list[float]:
    """Record a trial whose seeds have all finished (user attributes: the summary and where
    its seeds are; the summary on its run); returns its objective values."""
    summary = seed_summary([per_seed[seed] for seed in sorted(per_seed)])
    for key, value in summary.items():
        trial.set_user_attr(key, value)
    trial.set_user_attr(OUTPUT_DIR_ATTR, config.output_dir)
    trial.set_user_attr(SEEDS_ATTR, sorted(per_seed))
    # under MLflow-safe keys: `mean/Lexical (nonent)` -> `mean/hans/lexical_nonent`
    split = {key: key.split("/", 1) for key in summary}
    run.log_raw_metrics({f"{s}/{mlflow_key(c)}": summary[k] for k, (s, c) in split.items()})
    values = [summary[f"mean/{MNLI_MATCHED}"]]
    if config.sweep.mode == "accuracy_and_spread":
        values.append(summary[f"std/{HANS_NON_ENTAILED}"])
    return values
