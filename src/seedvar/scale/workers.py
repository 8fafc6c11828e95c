"""Distributed seeds: a study's seeds wait as enqueued trials in an Optuna study kept in a
relational database (PostgreSQL for several machines); any number of workers take them.

Optuna hands each waiting trial to exactly one worker. A worker's trials send heartbeats;
when a worker dies, its trial goes stale, is failed and re-enqueued with the same seed, and
another worker finishes it (resuming from the seed's checkpoint when the output folder is
shared). The recipe is stored in the study, so every worker trains the same thing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import optuna
from optuna.storages import fail_stale_trials
from optuna.trial import TrialState

from seedvar import tracking
from seedvar.config import Config, validate
from seedvar.errors import ConfigError
from seedvar.metrics import MNLI_MATCHED
from seedvar.study.job import SeedJob
from seedvar.study.seed import run_seed
from seedvar.sweep.storage import rdb_storage

CONFIG_ATTR = "seedvar_config"


def _open(storage: str, study_name: str, heartbeat_seconds: int, create: bool) -> optuna.Study:
    backend = rdb_storage(storage, heartbeat_seconds, max_retries=3)
    if create:
        return optuna.create_study(
            storage=backend, study_name=study_name, direction="maximize", load_if_exists=True
        )
    try:
        return optuna.load_study(study_name=study_name, storage=backend)
    except KeyError:
        raise ConfigError(
            f"no study {study_name!r} in {storage}; create it with `seedvar submit`"
        ) from None


def submit(config: Config, storage: str, study_name: str) -> int:
    """Store the recipe in the study and enqueue every seed not already there; returns how many
    seeds the study holds."""
    study = _open(storage, study_name, heartbeat_seconds=60, create=True)
    stored = study.user_attrs.get(CONFIG_ATTR)
    if stored and validate(stored).study_hash() != config.study_hash():
        raise ConfigError(
            f"study {study_name!r} already holds another recipe; choose another --study"
        )
    study.set_user_attr(CONFIG_ATTR, config.model_dump())
    tracking.study_run_id(*tracking.open_store(config), config)  # one parent run for all workers
    live = (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE)
    taken = {_seed_of(t) for t in study.get_trials(deepcopy=False, states=live)}
    for seed in config.seeds:
        if seed not in taken:  # failed seeds without retries left are enqueued again
            study.enqueue_trial({"seed": seed}, user_attrs={"seed": seed})
    return len(config.seeds)


def _seed_of(trial: optuna.trial.FrozenTrial) -> int | None:
    return trial.user_attrs.get("seed")


def study_config(study: optuna.Study) -> Config:
    """The recipe `seedvar submit` stored in the study."""
    return validate(study.user_attrs[CONFIG_ATTR], source=f"study {study.study_name}")


def _seed_objective(trial: optuna.Trial, config: Config, done: list[int]) -> float:
    if "seed" not in trial.user_attrs:
        raise optuna.TrialPruned("no seed was waiting when this trial began")  # a lost race
    seed = trial.suggest_categorical("seed", config.seeds)
    trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")
    trial.set_user_attr("gpus", os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
    seed_config = config.with_seed(seed)
    metrics = SeedJob.of(seed_config).finished_metrics() or run_seed(seed_config).metrics
    done.append(seed)
    return metrics[MNLI_MATCHED]


def work(
    storage: str, study_name: str, heartbeat_seconds: int = 30, poll_seconds: float = 2.0
) -> list[int]:
    """Take waiting seeds until every seed of the study has completed; returns the seeds this
    worker trained. While others still run the last seeds, wait: they may die and be retried."""
    study = _open(storage, study_name, heartbeat_seconds, create=False)
    config = study_config(study)
    done: list[int] = []
    while True:
        fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        completed = {t.params["seed"] for t in trials if t.state == TrialState.COMPLETE}
        if set(config.seeds) <= completed:
            return done
        if any(t.state == TrialState.WAITING for t in trials):
            study.optimize(lambda trial: _seed_objective(trial, config, done), n_trials=1)
        elif not any(t.state == TrialState.RUNNING for t in trials):
            missing = sorted(set(config.seeds) - completed)
            raise ConfigError(
                f"seeds {missing} of study {study_name!r} failed and have no retries left; "
                "see the failed runs in MLflow, then run `seedvar submit` again to re-enqueue"
            )
        else:
            time.sleep(poll_seconds)


def work_on_devices(
    storage: str, study_name: str, devices: list[str], heartbeat_seconds: int
) -> int:
    """One worker process per entry of `devices` (its CUDA_VISIBLE_DEVICES), all pulling from
    the same study; a GPU named twice trains two seeds at once."""
    command = [sys.executable, "-m", "seedvar.cli", "worker", "--storage", storage]
    command += ["--study", study_name, "--heartbeat", str(heartbeat_seconds)]
    processes = [
        subprocess.Popen(command, env={**os.environ, "CUDA_VISIBLE_DEVICES": device})
        for device in devices
    ]
    return max(process.wait() for process in processes)
