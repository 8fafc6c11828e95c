"""Optuna hyperparameter studies: each trial trains k seeds of one configuration, so every
configuration gets both an accuracy and a spread across seeds."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import optuna
import pandas as pd
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from seedvar import tracking
from seedvar.config import Config, SearchRange, SweepConfig, setting_path, validate
from seedvar.errors import ConfigError
from seedvar.metrics import HEURISTIC_COLUMNS, MNLI_MATCHED, MNLI_MISMATCHED, PAPER_COLUMNS
from seedvar.studies import rdb_storage
from seedvar.train import finished_metrics, run_seed

HANS_NON_ENTAILED = "HANS non-entailed"
NON_ENTAILED_COLUMNS = [c for c in HEURISTIC_COLUMNS if c.endswith("(nonent)")]
SUMMARIZED = [*PAPER_COLUMNS, MNLI_MISMATCHED, HANS_NON_ENTAILED]
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
SWEEPS_DIR = Path("sweeps")


def hans_non_entailed(metrics: dict[str, float]) -> float:
    """Accuracy on all non-entailed HANS examples (the three heuristics are equally large)."""
    return float(np.mean([metrics[column] for column in NON_ENTAILED_COLUMNS]))


class PruneOnValidation(L.Callback):
    """Reports MNLI-m validation accuracy to the trial after every epoch; prunes if told to."""

    def __init__(self, trial: optuna.Trial, first_step: int) -> None:
        self.trial = trial
        self.first_step = first_step

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or "val_accuracy" not in trainer.callback_metrics:
            return
        step = self.first_step + trainer.current_epoch
        self.trial.report(float(trainer.callback_metrics["val_accuracy"]), step)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"pruned after step {step}")


def _is_integer_setting(key: str) -> bool:
    section, name = setting_path(key).split(".")
    annotation = Config.model_fields[section].annotation.model_fields[name].annotation
    return annotation is int or (
        isinstance(annotation, types.UnionType) and int in annotation.__args__
    )


def suggest(trial: optuna.Trial, key: str, spec: SearchRange) -> Any:
    """Draw one hyperparameter from its range."""
    if spec.choices is not None:
        return trial.suggest_categorical(key, spec.choices)
    if _is_integer_setting(key):
        step = int(spec.step or 1)
        return trial.suggest_int(key, int(spec.low), int(spec.high), step=step, log=spec.log)
    return trial.suggest_float(key, spec.low, spec.high, step=spec.step, log=spec.log)


def trial_config(base: Config, params: dict[str, Any]) -> Config:
    """The base config with a trial's hyperparameters; its seeds go to
    sweeps/<study name>/<config hash>/ (outside runs/, which belongs to the main study)."""
    raw = base.model_dump()
    for key, value in params.items():
        section, name = setting_path(key).split(".")
        raw[section][name] = value
    config = validate(raw, source=f"sweep trial {params}")
    folder = SWEEPS_DIR / base.sweep.study_name / config.hash()
    return config.model_copy(update={"output_dir": str(folder)})


def default_params(base: Config, space: dict[str, SearchRange]) -> dict[str, Any] | None:
    """The base config's own values for the swept settings, if they lie in the space."""
    params = {}
    for key, spec in space.items():
        section, name = setting_path(key).split(".")
        value = getattr(getattr(base, section), name)
        inside = (
            value in spec.choices if spec.choices is not None else spec.low <= value <= spec.high
        )
        if not inside:
            return None
        params[key] = value
    return params


def seed_summary(per_seed: list[dict[str, float]]) -> dict[str, float]:
    """Mean and std across seeds of every paper column and of HANS non-entailed accuracy."""
    table = pd.DataFrame([{**m, HANS_NON_ENTAILED: hans_non_entailed(m)} for m in per_seed])
    summary = {}
    for column in SUMMARIZED:
        summary[f"mean/{column}"] = float(table[column].mean())
        summary[f"std/{column}"] = float(table[column].std(ddof=1))
    return summary


def objective(trial: optuna.Trial, base: Config) -> float | tuple[float, float]:
    """Train k seeds of one configuration; score it by mean MNLI-m accuracy (and HANS spread)."""
    sweep = base.sweep
    params = {key: suggest(trial, key, spec) for key, spec in sweep.space.items()}
    config = trial_config(base, params)
    prune = sweep.pruner == "median" and sweep.mode == "accuracy"
    per_seed = []
    with tracking.trial_run(config, sweep.study_name, trial.number, params) as parent:
        for index in range(sweep.seeds_per_trial):
            seed_config = config.model_copy(
                update={"train": config.train.model_copy(update={"seed": index})}
            )
            metrics = finished_metrics(seed_config)
            if metrics is None:
                callbacks = [PruneOnValidation(trial, index * config.train.epochs)] if prune else []
                metrics = run_seed(seed_config, callbacks=callbacks,
                                   parent_run_id=parent.run_id).metrics  # fmt: skip
            per_seed.append(metrics)
        summary = seed_summary(per_seed)
        for key, value in summary.items():
            trial.set_user_attr(key, value)
        parent.log_metrics(
            {k.split("/", 1)[1]: v for k, v in summary.items() if k.startswith("mean/")},
            prefix="mean/",
        )
        parent.log_metrics(
            {k.split("/", 1)[1]: v for k, v in summary.items() if k.startswith("std/")},
            prefix="std/",
        )
    accuracy = summary[f"mean/{MNLI_MATCHED}"]
    if sweep.mode == "accuracy":
        return accuracy
    return accuracy, summary[f"std/{HANS_NON_ENTAILED}"]


def open_study(sweep: SweepConfig) -> optuna.Study:
    """Create or load the study in its storage (SQLite file or any SQLAlchemy URL)."""
    storage = rdb_storage(sweep.storage, sweep.heartbeat_seconds, sweep.max_retries)
    multi = sweep.mode == "accuracy_and_spread"
    study = optuna.create_study(
        storage=storage,
        study_name=sweep.study_name,
        directions=["maximize", "minimize"] if multi else ["maximize"],
        sampler=optuna.samplers.NSGAIISampler(seed=0)
        if multi
        else optuna.samplers.TPESampler(seed=0),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2)
        if sweep.pruner == "median" and not multi
        else optuna.pruners.NopPruner(),
        load_if_exists=True,
    )
    if len(study.directions) != (2 if multi else 1):
        raise ConfigError(
            f"study {sweep.study_name!r} in {sweep.storage} was made for another sweep.mode; "
            "choose another sweep.study_name"
        )
    return study


def run_sweep(base: Config) -> optuna.Study:
    """Run (or resume) the sweep until `n_trials` trials have completed or been pruned."""
    for spec_values in ("low", "high"):  # every corner of the space must be a valid config
        corner = {
            key: (spec.choices[0] if spec.choices is not None else getattr(spec, spec_values))
            for key, spec in base.sweep.space.items()
        }
        trial_config(base, {k: int(v) if _is_integer_setting(k) else v for k, v in corner.items()})
    study = open_study(base.sweep)
    if not study.trials:
        default = default_params(base, base.sweep.space)
        if default is not None:
            study.enqueue_trial(default, user_attrs={"default": True})
    done = len(study.get_trials(states=FINISHED))
    if done < base.sweep.n_trials:
        study.optimize(
            lambda trial: objective(trial, base),
            callbacks=[MaxTrialsCallback(base.sweep.n_trials, states=FINISHED)],
        )
    return study
