"""The search space: draw a trial's hyperparameters and turn them into a trial's config."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import optuna

from seedvar.config import SWEPT_SECTIONS, Config, SearchRange, setting_path, validate

SWEEPS_DIR = Path("sweeps")


def is_integer_setting(key: str) -> bool:
    """True when the setting behind search-space key `key` takes integers."""
    section, name = setting_path(key).split(".")
    return _admits(SWEPT_SECTIONS[section].model_fields[name].annotation, int)


def _admits(annotation: Any, kind: type) -> bool:
    """Whether `kind` is the annotation or one of its members (unions, Annotated)."""
    return annotation is kind or any(_admits(arg, kind) for arg in typing.get_args(annotation))


def suggest(trial: optuna.Trial, key: str, spec: SearchRange) -> Any:
    """Draw one hyperparameter from its range."""
    if spec.choices is not None:
        return trial.suggest_categorical(key, spec.choices)
    assert spec.low is not None and spec.high is not None  # SearchRange: choices, or a range
    if is_integer_setting(key):
        step = int(spec.step or 1)
        return trial.suggest_int(key, int(spec.low), int(spec.high), step=step, log=spec.log)
    return trial.suggest_float(key, spec.low, spec.high, step=spec.step, log=spec.log)


def drawn(trial: optuna.Trial, space: dict[str, SearchRange]) -> dict[str, Any]:
    """A trial's hyperparameters, one drawn from each range of the space."""
    return {key: suggest(trial, key, spec) for key, spec in space.items()}


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
