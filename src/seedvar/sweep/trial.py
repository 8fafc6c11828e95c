"""`seedvar sweep`: Optuna asks (ask-and-tell, the base configuration first), the driver runs each
trial's k seeds through the launch's route (here, or with `--ray` trials at once) and tells Optuna
how it ended. The first seed reports for pruning; a pruned or failed trial's other seeds stop.
Ctrl-C fails the trials under way and enqueues them again. A killed driver's RUNNING trials are
taken up by the next under their numbers or, silent over 2 x sweep.heartbeat_seconds, failed and
retried by Optuna with the same parameters. Finished seeds are reused, the others resume."""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.exceptions import ExperimentalWarning
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.trial import TrialState

from seedvar import tracking
from seedvar.config import Config
from seedvar.declared import headline_mean_column, primary_column
from seedvar.errors import ConfigError, SeedvarError
from seedvar.metrics import MAJORITY_SHARE, safe_key
from seedvar.project import keep_of
from seedvar.scale.launch import backend, drive, lease, seed_task, task_config
from seedvar.scale.scheduler import InProcess
from seedvar.seeds.finished import FinishedSeed
from seedvar.seeds.result import SeedResult, Status, TaskKey
from seedvar.sweep import search

SWEEP_TAG = "seedvar.sweep"
TRIAL_NUMBER_TAG = "optuna.trial_number"
OUTPUT_DIR_ATTR, SEEDS_ATTR = "output_dir", "seeds"  # where a trial's seed folders are
MLFLOW_RUN_ATTR = "mlflow_run_id"  # the trial's MLflow run


class SweepFailed(SeedvarError):
    """Trials of a sweep failed for a reason that is not their configuration's."""


def run_sweep(base: Config, ray: bool = False, echo: Callable[[str], None] = print) -> optuna.Study:
    """Run (or resume) the sweep until `n_trials` trials have completed or been pruned."""
    if base.train.seeds_per_process > 1:
        raise ConfigError(
            f"train.seeds_per_process is {base.train.seeds_per_process}, but a sweep's trials "
            "train each seed alone (its first seed reports for pruning); set "
            "train.seeds_per_process=1 for the sweep"
        )
    base, sweep = task_config(base), base.sweep
    storage = search.rdb_storage(sweep.storage, sweep.heartbeat_seconds, sweep.max_retries)
    study = search.prepare_study(base, storage)
    if len(study.get_trials(states=search.FINISHED)) >= sweep.n_trials:
        return study
    command = "seedvar sweep --ray" if ray else "seedvar sweep"
    with lease(keep_of(search.SWEEPS_DIR / sweep.study_name), "sweep", command) as record:
        k = sweep.seeds_per_trial
        with backend(base, "ray" if ray else "here", k, record, echo) as scheduler:
            at_once = max(1, math.ceil(scheduler.at_once / k))
            echo(
                f"sweep {sweep.study_name}: {sweep.n_trials} trials x {k} seeds, {at_once} at once"
            )
            driver = Driver(base, study, storage, scheduler, echo, at_once)
            driver.run()
    if driver.failures:
        raise SweepFailed(
            f"the sweep stopped: {'; '.join(driver.failures)}; fix the cause and run the same "
            "command again: finished trials and seeds are kept"
        )
    return study


@dataclass
class SweepTrial:
    """A trial in flight: its Optuna trial, configuration, MLflow run, its seeds' results, and
    the state Optuna was told before its end (pruned, failed)."""

    trial: optuna.Trial
    params: dict[str, Any]
    config: Config
    resume_run_id: str | None = None  # the run a driver that died had opened for it
    run: tracking.TrackedRun | None = None
    results: dict[int, SeedResult] = field(default_factory=dict)  # by seed
    state: TrialState | None = None

    @property
    def number(self) -> int:
        return self.trial.number

    def open_run(self) -> tracking.TrackedRun:
        """The trial's MLflow run, its seeds' parent (new, its id a user attribute, or reopened)."""
        sweep, number = self.config.sweep, self.number
        description = (
            f"Trial {number} of sweep {sweep.study_name}: the configuration {self.params}, "
            f"trained with seeds 0-{sweep.seeds_per_trial - 1} (its child runs)."
        )
        tags = {tracking.ROLE_TAG: "trial", SWEEP_TAG: sweep.study_name}
        tags |= {TRIAL_NUMBER_TAG: str(number), tracking.DESCRIPTION_TAG: description}
        self.run = tracking.start_run(
            self.config, f"trial {number}", tags, None, self.resume_run_id
        )
        if self.resume_run_id is None:
            drawn = {f"trial.{k}": v for k, v in self.params.items()}
            self.run.log_params({**drawn, **self.config.recipe(per_seed=False)})
            self.trial.set_user_attr(MLFLOW_RUN_ATTR, self.run.run_id)
        return self.run

    def record(self) -> list[float]:
        """Record a finished trial: mean and std across seeds of every accuracy column and each
        diagnostic set's headline mean, as user attributes (with where its seeds are) and on its
        run; returns its objectives (`search.axes_of`)."""
        config, rows = self.config, []
        for seed in sorted(self.results):
            metrics = self.results[seed].metrics or {}
            row = {k: v for k, v in metrics.items() if not k.startswith(MAJORITY_SHARE)}
            for name, diagnostic in config.diagnostics.items():
                headline = [metrics[column] for column in diagnostic.headline]
                row[headline_mean_column(name)] = float(np.mean(headline))
            rows.append(row)
        stats = pd.DataFrame(rows).agg(["mean", "std"])  # std: ddof 1
        summary = {f"{s}/{c}": float(stats.at[s, c]) for c in stats.columns for s in stats.index}
        seeds = {OUTPUT_DIR_ATTR: config.output_dir, SEEDS_ATTR: sorted(self.results)}
        for key, value in {**summary, **seeds}.items():
            self.trial.set_user_attr(key, value)
        columns = FinishedSeed(Path(config.output_dir), min(self.results)).columns()
        keys = {column.name: column.key for column in columns}
        named = (name.split("/", 1) for name in summary)
        logged = {f"{s}/{keys.get(c) or safe_key(c)}": summary[f"{s}/{c}"] for s, c in named}
        assert self.run is not None  # opened when it started
        self.run.log_raw_metrics(logged)
        accuracy, spread, _ = search.axes_of(config)
        return [summary[accuracy], summary[spread]][: len(self.trial.study.directions)]


@dataclass
class Driver:
    """Asks Optuna for trials, runs their seeds through the scheduler, tells Optuna."""

    base: Config
    study: optuna.Study
    storage: RDBStorage
    scheduler: InProcess
    echo: Callable[[str], None]
    at_once: int  # trials at once
    active: dict[int, SweepTrial] = field(default_factory=dict)  # by number; seeds submitted
    waiting: list[SweepTrial] = field(default_factory=list)  # the configuration of an active one
    failures: list[str] = field(default_factory=list)  # errors that would recur in every trial
    failed_trials: int = 0
    submitted: int = 0  # seeds

    def run(self) -> None:
        with warnings.catch_warnings(action="ignore", category=ExperimentalWarning):  # Optuna 2.9
            fail_stale_trials(self.study)
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.echo(f"trial {frozen.number}: taken up again (its driver died)")
            handle = optuna.trial.Trial(self.study, self._id(frozen.number))
            self._start(handle, frozen.user_attrs.get(MLFLOW_RUN_ATTR))  # its params, as drawn
        stop = threading.Event()
        threading.Thread(target=self._beat, args=(stop,), daemon=True).start()
        try:
            self._ask()
            column = primary_column(self.base.task)
            drive(self.scheduler, self._record, self._seeds, column, self.echo)
        except KeyboardInterrupt:  # failed, and queued again: the next run takes them up first
            for trial in [*self.active.values(), *self.waiting]:
                if trial.state is None:  # not pruned or failed already
                    self.study.tell(trial.number, state=TrialState.FAIL)
                    self.study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
                if trial.run is not None:
                    trial.run.end(tracking.KILLED)
            raise
        finally:
            stop.set()

    def _beat(self, stop: threading.Event) -> None:
        """The active trials' heartbeats, every sweep.heartbeat_seconds (see the module's)."""
        while not stop.wait(self.base.sweep.heartbeat_seconds):
            for trial in list(self.active.values()):
                self.storage.record_heartbeat(self._id(trial.number))

    def _id(self, number: int) -> int:
        return search.trial_id(self.storage, self.study.study_name, number)

    def _seeds(self) -> int:
        """The seeds this driver runs: those submitted, and those of the trials still to start."""
        done = len(self.study.get_trials(deepcopy=False, states=search.FINISHED))
        to_start = max(0, self.base.sweep.n_trials - done - len(self.active))
        return self.submitted + to_start * self.base.sweep.seeds_per_trial

    def _ask(self) -> None:
        """Start trials while there is room and the sweep needs more."""
        while not self.failures and self.failed_trials < self.base.sweep.n_trials:
            started = len(self.active) + len(self.waiting)
            done = len(self.study.get_trials(deepcopy=False, states=search.FINISHED))
            if started >= self.at_once or done + started >= self.base.sweep.n_trials:
                return
            with warnings.catch_warnings():  # its heartbeats are recorded here, not by optimize
                warnings.filterwarnings("ignore", "Heartbeat of storage")
                trial = self.study.ask()  # an enqueued trial first (the base configuration)
            self._start(trial)

    def _start(self, handle: optuna.Trial, resume_run_id: str | None = None) -> None:
        """Draw the trial's parameters (those drawn already stay) and start its seeds."""
        params = search.drawn(handle, self.base.sweep.space)
        trial = SweepTrial(handle, params, search.trial_config(self.base, params), resume_run_id)
        self._run(trial)

    def _run(self, trial: SweepTrial) -> None:
        if any(other.config.hash() == trial.config.hash() for other in self.active.values()):
            self.waiting.append(trial)  # its seeds are the other trial's: reuse them after it
            return
        self.storage.record_heartbeat(self._id(trial.number))
        run = trial.open_run()
        self.active[trial.number] = trial
        shown = [
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in trial.params.items()
        ]
        self.echo(f"trial {trial.number} started: {', '.join(shown)}")
        for seed in range(self.base.sweep.seeds_per_trial):
            task = seed_task(
                TaskKey(seed, trial.number),
                trial.config.with_seed(seed),
                parent_run_id=run.run_id,
                run_tags={SWEEP_TAG: self.base.sweep.study_name},
                callbacks=partial(search.trial_callbacks, trial.config, trial.number, seed == 0),
            )
            self.scheduler.submit(task)
            self.submitted += 1

    def _record(self, result: SeedResult) -> None:
        """A seed is back. One pruned or failed ends its trial in Optuna at once: its other seeds
        read that from Optuna's storage and stop; those not started are not run."""
        assert result.key.trial is not None  # a sweep's keys name their trial
        trial = self.active[result.key.trial]
        trial.results[result.key.seed] = result
        if not result.status.done and trial.state is None:
            pruned = result.status is Status.PRUNED
            trial.state = TrialState.PRUNED if pruned else TrialState.FAIL
            self.study.tell(trial.number, state=trial.state, skip_if_finished=True)
            if pruned:
                self.echo(f"trial {trial.number} pruned ({result.error})")
            else:
                self.failed_trials += 1
                self.echo(f"trial {trial.number} FAILED: {result.key}: {result.error}")
                if result.detail:
                    self.echo(result.detail.rstrip())
                if result.stops_launch:
                    self.failures.append(f"{result.key}: {result.error}")
            seeds = [TaskKey(seed, trial.number) for seed in range(self.base.sweep.seeds_per_trial)]
            for key in self.scheduler.cancel_waiting(seeds):
                trial.results[key.seed] = SeedResult(key, Status.STOPPED)
        if len(trial.results) == self.base.sweep.seeds_per_trial:
            self._close(trial)

    def _close(self, trial: SweepTrial) -> None:
        """All seeds are back: end the trial in Optuna (once) and in MLflow; start what comes
        next (a trial of the same configuration that waited for it, or a new one)."""
        del self.active[trial.number]
        assert trial.run is not None
        if trial.state is TrialState.PRUNED:
            trial.run.end(tracking.KILLED, {tracking.RunPruned.tag: "true"})
        elif trial.state is TrialState.FAIL:
            trial.run.end(tracking.FAILED)
        else:
            values = trial.record()
            self.study.tell(trial.number, values, skip_if_finished=True)
            trial.run.end(tracking.FINISHED)
            column = primary_column(self.base.task)
            self.echo(f"trial {trial.number} complete: mean {column} {values[0]:.4f}")
        for waiting in [t for t in self.waiting if t.config.hash() == trial.config.hash()]:
            self.waiting.remove(waiting)
            self._run(waiting)
        self._ask()
