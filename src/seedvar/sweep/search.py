"""The sweep's search: its Optuna study, storage (SQLite, or any SQLAlchemy URL: PostgreSQL to
share a sweep between machines), sampler, pruner, the space and each trial's config."""

from __future__ import annotations

import typing
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from seedvar.config import SWEPT_SECTIONS, Config, SearchRange, SweepConfig, setting_path, validate
from seedvar.declared import headline_mean_column, primary_column
from seedvar.errors import ConfigError, first_line
from seedvar.tracking import provenance

if TYPE_CHECKING:  # the driver never trains: no Lightning there
    import lightning as L

SWEEPS_DIR = Path("sweeps")
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
STOP_CHECK_SECONDS = 2.0  # how often a trial's seed reads whether its trial has ended


def rdb_storage(url: str, heartbeat_seconds: int | None, max_retries: int) -> RDBStorage:
    """Storage whose running trials send heartbeats every `heartbeat_seconds` (None: none); a
    trial silent for twice that is failed and enqueued again, at most `max_retries` times.
    Unreachable databases fail fast."""
    engine: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    elif url.startswith("postgresql"):
        engine = {"connect_args": {"connect_timeout": 5}}
    try:  # heartbeats have been "experimental" since Optuna 2.9
        with warnings.catch_warnings(action="ignore", category=ExperimentalWarning):
            return RDBStorage(
                url,
                engine_kwargs=engine,
                heartbeat_interval=heartbeat_seconds,
                grace_period=None if heartbeat_seconds is None else 2 * heartbeat_seconds,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retries),
            )
    except Exception as error:  # SQLAlchemy raises many types for a bad or unreachable URL
        raise ConfigError(
            f"cannot open the study storage {url} ({first_line(error)}); check the URL and that "
            "the database server is running"
        ) from None


def prunes(sweep: SweepConfig) -> bool:
    """Whether the sweep prunes trials (the median pruner, in the accuracy mode)."""
    return sweep.pruner == "median" and sweep.mode == "accuracy"


def axes_of(config: Config) -> tuple[str, str, str]:
    """A trial's columns of the accuracy (mean primary column across seeds) and the spread (std of
    the first diagnostic set's headline mean), its objectives in order; and the base's spread."""
    base, first = primary_column(config.task), next(iter(config.diagnostics))
    return f"mean/{base}", f"std/{headline_mean_column(first)}", f"std/{base}"


def open_study(config: Config, storage: RDBStorage) -> optuna.Study:
    """Create or load the study in its storage, its objectives named for Optuna's dashboard."""
    sweep = config.sweep
    multi = sweep.mode == "accuracy_and_spread"
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2) if prunes(sweep) else None
    study = optuna.create_study(
        storage=storage,
        study_name=sweep.study_name,
        directions=["maximize", "minimize"] if multi else ["maximize"],
        sampler=sampler(sweep, seed=0),
        pruner=pruner or optuna.pruners.NopPruner(),
        load_if_exists=True,
    )
    if len(study.directions) != (2 if multi else 1):
        raise ConfigError(
            f"study {sweep.study_name!r} in {sweep.storage} was made for another sweep.mode; "
            "choose another sweep.study_name"
        )
    spread = f"std of {headline_mean_column(next(iter(config.diagnostics)))}"
    with warnings.catch_warnings(action="ignore", category=ExperimentalWarning):  # Optuna 3.2
        study.set_metric_names([f"mean {primary_column(config.task)}", spread][: 2 if multi else 1])
    if study.trials:  # resumed: seeded anew, so as not to draw the first trials over again
        study.sampler = sampler(sweep, seed=len(study.trials))
    return study


class Grid(optuna.samplers.GridSampler):
    """Optuna's grid, asked and told: the driver stops at n_trials (Optuna's own stop, after
    the grid's last trial, works only inside `Study.optimize` and fails the tell)."""

    def after_trial(self, *_: Any) -> None:
        return None


def sampler(sweep: SweepConfig, seed: int) -> optuna.samplers.BaseSampler:
    """The grid sampler where asked (trial N takes combination N of the choices, in an order its
    seed fixes: always 0, so that a resumed sweep keeps it), else NSGA-II for two objectives,
    else TPE with the constant liar (trials at once not all drawn at one spot)."""
    if sweep.sampler == "grid":
        grid = {key: spec.choices or [] for key, spec in sweep.space.items()}
        return Grid(grid, seed=0)
    if sweep.mode == "accuracy_and_spread":
        return optuna.samplers.NSGAIISampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def prepare_study(base: Config, storage: RDBStorage) -> optuna.Study:
    """The sweep's study, the base configuration its first trial if new, inside the space and not
    a grid; ConfigError, before any work, unless every corner of the space is a valid config."""
    for bound in ("low", "high"):
        corner = {
            key: spec.choices[0] if spec.choices is not None else getattr(spec, bound)
            for key, spec in base.sweep.space.items()
        }
        trial_config(base, {k: int(v) if is_integer_setting(k) else v for k, v in corner.items()})
    study = open_study(base, storage)
    study.set_user_attr("profile", base.profile)
    study.set_user_attr("mode", base.sweep.mode)
    study.set_user_attr("git_commit", provenance()["git.commit"])
    if study.trials or base.sweep.sampler == "grid":  # a grid takes no trial out of turn
        return study
    if (default := default_params(base)) is not None:
        study.enqueue_trial(default, user_attrs={"default": True})
    return study


def trial_id(storage: BaseStorage, study_name: str, number: int) -> int:
    """The storage's id of trial `number` (what a Trial handle is made from)."""
    study_id = storage.get_study_id_from_name(study_name)
    return storage.get_trial_id_from_study_id_trial_number(study_id, number)


def trial_callbacks(config: Config, number: int, reports: bool) -> list[L.Callback]:
    """A seed's callbacks in trial `number`: stop when the trial ends on another seed; if
    `reports` (the first seed), report validation accuracy for pruning."""
    from seedvar.metrics import validation_key
    from seedvar.seeds.seed import Every
    from seedvar.sweep.pruning import PruneOnValidation, stop_with_trial

    storage = rdb_storage(config.sweep.storage, None, 0)
    trial = trial_id(storage, config.sweep.study_name, number)
    callbacks: list[L.Callback] = [Every(stop_with_trial(storage, trial), STOP_CHECK_SECONDS)]
    if reports and prunes(config.sweep):
        handle = optuna.trial.Trial(open_study(config, storage), trial)
        key, by_step = validation_key(config.task.validation), bool(config.train.val_every_n_steps)
        callbacks.append(PruneOnValidation(handle, key, by_step))
    return callbacks


def is_integer_setting(key: str) -> bool:
    """Whether the setting behind search-space key `key` takes integers."""
    section, name = setting_path(key).split(".")
    return _admits(SWEPT_SECTIONS[section].model_fields[name].annotation, int)


def _admits(annotation: Any, kind: type) -> bool:
    """Whether `kind` is the annotation or one of its members (unions, Annotated)."""
    return annotation is kind or any(_admits(arg, kind) for arg in typing.get_args(annotation))


def drawn(trial: optuna.Trial, space: dict[str, SearchRange]) -> dict[str, Any]:
    """A trial's hyperparameters, one drawn from each range of the space."""
    return {key: _suggest(trial, key, spec) for key, spec in space.items()}


def _suggest(trial: optuna.Trial, key: str, spec: SearchRange) -> Any:
    """One value from one range."""
    if spec.choices is not None:
        return trial.suggest_categorical(key, spec.choices)
    assert spec.low is not None and spec.high is not None  # SearchRange: choices, or a range
    if is_integer_setting(key):
        step = int(spec.step or 1)
        return trial.suggest_int(key, int(spec.low), int(spec.high), step=step, log=spec.log)
    return trial.suggest_float(key, spec.low, spec.high, step=spec.step, log=spec.log)


def trial_config(base: Config, params: dict[str, Any]) -> Config:
    """The base config with a trial's hyperparameters and seeds (0 to seeds_per_trial - 1),
    their folders in sweeps/<study>/<config hash>/ (outside the main study's runs/)."""
    raw = base.model_dump()
    for key, value in params.items():
        section, name = setting_path(key).split(".")
        raw[section][name] = value
    config = validate(raw, source=f"sweep trial {params}")
    folder = SWEEPS_DIR / base.sweep.study_name / config.hash()
    seeds = list(range(base.sweep.seeds_per_trial))
    return config.model_copy(update={"output_dir": str(folder), "seeds": seeds})


def default_params(base: Config) -> dict[str, Any] | None:
    """The base config's own values for the swept settings, if they lie in the space."""
    params = {}
    for key, spec in base.sweep.space.items():
        section, name = setting_path(key).split(".")
        params[key] = value = getattr(getattr(base, section), name)
        if not (spec.low <= value <= spec.high if spec.choices is None else value in spec.choices):
            return None
    return params
