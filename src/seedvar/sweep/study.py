"""The sweep's Optuna study: storage, sampler, pruner, and running trials until enough finish."""

from __future__ import annotations

import warnings

import lightning as L
import optuna
from optuna.storages import BaseStorage, RDBStorage
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from seedvar.config import Config
from seedvar.declared import headline_mean_column, primary_column
from seedvar.errors import ConfigError
from seedvar.metrics import validation_key
from seedvar.sweep.objective import PruneOnValidation, StopWithTrial, objective
from seedvar.sweep.space import default_params, is_integer_setting, trial_config
from seedvar.sweep.storage import rdb_storage
from seedvar.sweep.trial import prunes
from seedvar.tracking import provenance

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def metric_names(config: Config) -> list[str]:
    """The objectives' names (Optuna's dashboard shows them)."""
    first = next(iter(config.diagnostics))
    return [f"mean {primary_column(config.task)}", f"std of {headline_mean_column(first)}"]


def open_study(config: Config, storage: RDBStorage | None = None) -> optuna.Study:
    """Create or load the study in its storage (SQLite file or any SQLAlchemy URL), with named
    objectives."""
    sweep = config.sweep
    storage = storage or rdb_storage(sweep.storage, sweep.heartbeat_seconds, sweep.max_retries)
    multi = sweep.mode == "accuracy_and_spread"
    study = optuna.create_study(
        storage=storage,
        study_name=sweep.study_name,
        directions=["maximize", "minimize"] if multi else ["maximize"],
        sampler=sampler(multi, seed=0),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2)
        if prunes(sweep)
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
        study.set_metric_names(metric_names(config)[: len(study.directions)])
    if study.trials:  # resumed: seeded anew, so as not to draw the first trials over again
        study.sampler = sampler(multi, seed=len(study.trials))
    return study


def sampler(multi: bool, seed: int) -> optuna.samplers.BaseSampler:
    """NSGA-II for two objectives, else TPE with the constant liar, so that trials running at
    once (on Ray) are not all drawn at one spot."""
    if multi:
        return optuna.samplers.NSGAIISampler(seed=seed)
    with warnings.catch_warnings():  # constant_liar is "experimental" since Optuna 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def check_space(base: Config) -> None:
    """ConfigError, before any work, unless every corner of the space is a valid config."""
    for spec_values in ("low", "high"):
        corner = {
            key: (spec.choices[0] if spec.choices is not None else getattr(spec, spec_values))
            for key, spec in base.sweep.space.items()
        }
        trial_config(base, {k: int(v) if is_integer_setting(k) else v for k, v in corner.items()})


def prepare_study(base: Config, storage: RDBStorage | None = None) -> optuna.Study:
    """The sweep's study, with the base configuration enqueued as its first trial if new."""
    check_space(base)
    study = open_study(base, storage)
    study.set_user_attr("profile", base.profile)
    study.set_user_attr("mode", base.sweep.mode)
    study.set_user_attr("git_commit", provenance()["git.commit"])
    if not study.trials:
        default = default_params(base, base.sweep.space)
        if default is not None:
            study.enqueue_trial(default, user_attrs={"default": True})
    return study


def trial_id(storage: BaseStorage, study_name: str, number: int) -> int:
    """The storage's id of trial `number` (what a Trial handle is made from)."""
    study_id = storage.get_study_id_from_name(study_name)
    return storage.get_trial_id_from_study_id_trial_number(study_id, number)


def trial_callbacks(config: Config, number: int, reports: bool) -> list[L.Callback]:
    """For a seed of trial `number` trained in another process (a Ray task): stop when the
    trial is pruned; if `reports` (its first seed), report validation accuracy for pruning."""
    storage = rdb_storage(config.sweep.storage, None, 0)
    trial = trial_id(storage, config.sweep.study_name, number)
    callbacks: list[L.Callback] = [StopWithTrial(storage, trial)]
    if reports and prunes(config.sweep):
        study = open_study(config, storage)
        key = validation_key(config.task.validation)
        callbacks.append(PruneOnValidation(optuna.trial.Trial(study, trial), key))
    return callbacks


def run_sweep(base: Config) -> optuna.Study:
    """Run (or resume) the sweep until `n_trials` trials have completed or been pruned."""
    study = prepare_study(base)
    done = len(study.get_trials(states=FINISHED))
    if done < base.sweep.n_trials:
        try:
            study.optimize(
                lambda trial: objective(trial, base),
                callbacks=[MaxTrialsCallback(base.sweep.n_trials, states=FINISHED)],
            )
        except KeyboardInterrupt:  # Optuna has failed the trial; run it first on resuming
            interrupted = study.get_trials(deepcopy=False, states=(TrialState.FAIL,))[-1:]
            for trial in interrupted:
                study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
            raise
    return study
