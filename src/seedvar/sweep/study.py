"""The sweep's Optuna study: storage, sampler, pruner, and running trials until enough finish."""

from __future__ import annotations

import warnings

import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from seedvar.config import Config, SweepConfig
from seedvar.errors import ConfigError
from seedvar.sweep.objective import objective
from seedvar.sweep.space import default_params, is_integer_setting, trial_config
from seedvar.sweep.storage import rdb_storage
from seedvar.tracking import provenance

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


METRIC_NAMES = ["mean MNLI-m accuracy", "std of HANS non-entailed accuracy"]


def open_study(sweep: SweepConfig) -> optuna.Study:
    """Create or load the study in its storage (SQLite file or any SQLAlchemy URL), with named
    objectives (Optuna's dashboard shows them)."""
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
    with warnings.catch_warnings():  # "experimental" since Optuna 3.2
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(METRIC_NAMES[: len(study.directions)])
    return study


def run_sweep(base: Config) -> optuna.Study:
    """Run (or resume) the sweep until `n_trials` trials have completed or been pruned."""
    for spec_values in ("low", "high"):  # every corner of the space must be a valid config
        corner = {
            key: (spec.choices[0] if spec.choices is not None else getattr(spec, spec_values))
            for key, spec in base.sweep.space.items()
        }
        trial_config(base, {k: int(v) if is_integer_setting(k) else v for k, v in corner.items()})
    study = open_study(base.sweep)
    study.set_user_attr("profile", base.profile)
    study.set_user_attr("mode", base.sweep.mode)
    study.set_user_attr("git_commit", provenance()["git.commit"])
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
