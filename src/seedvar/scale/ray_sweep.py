"""`seedvar sweep --ray`: trials at once across a Ray cluster, each trial's k seeds as Ray tasks.

Optuna still chooses the configurations, through its ask-and-tell interface (TPE, with the
constant liar so that trials running at once are not drawn at one spot; NSGA-II for two
objectives), and its RDB storage keeps the sweep resumable. Ray runs the seeds, through the same
scheduler (retries, stalled attempts) as `seedvar launch`.

Why not Ray Tune with its OptunaSearch: a Tune trial is one function, so a trial's k seeds would
become tasks nested in it; Tune keeps its own experiment state beside Optuna's storage, two
records of one sweep to keep in step when resuming; and OptunaSearch does not carry what the
sweep relies on: the base configuration enqueued as the first trial, trials counted as completed
or pruned, the trials table read from the study. Ask-and-tell keeps the study, its storage and
trials.csv exactly as `seedvar sweep` has them.

Pruning: a trial's first seed reports its validation accuracy per epoch to the trial in the
storage and stops when the pruner says so; the driver then tells Optuna PRUNED and the trial's
other seeds, which read the trial's state while they train, stop too (their runs KILLED, tagged
`seedvar.pruned`).

Faults: a seed whose node dies is retried by Ray and resumes; its trial waits for it and is told
once. A driver that dies leaves its trials RUNNING in the storage: the next `seedvar sweep --ray`
takes them up again under the same numbers and parameters (finished seeds are reused, the others
resume), so no trial is lost or counted twice. One driver per sweep: its lease (scale/lease.py,
beside the sweep's seeds) stops a second one while the first is alive.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from seedvar import tracking
from seedvar.config import Config
from seedvar.declared import primary_column
from seedvar.errors import SeedvarError
from seedvar.project import work_dir_of
from seedvar.scale.cluster import import_ray, ray_session, seed_resources
from seedvar.scale.launch import POLL_SECONDS, task_config
from seedvar.scale.lease import lease
from seedvar.scale.protocol import SeedTask, Status, TaskKey, TaskResult, TrialLink
from seedvar.scale.scheduler import Scheduler
from seedvar.sweep.space import SWEEPS_DIR, drawn, trial_config
from seedvar.sweep.storage import rdb_storage
from seedvar.sweep.study import FINISHED, prepare_study, trial_id
from seedvar.sweep.trial import (
    SWEEP_TAG,
    TRIAL_NUMBER_TAG,
    record_trial,
    seed_tags,
    start_trial_run,
)


class SweepFailed(SeedvarError):
    """Trials of a Ray sweep failed for a reason that is not their configuration's."""


@dataclass
class TrialRun:
    """A trial in flight: its Optuna trial, configuration, MLflow run and what its seeds
    returned."""

    trial: optuna.Trial
    params: dict[str, Any]
    config: Config
    run: tracking.TrackedRun | None = None
    results: dict[int, TaskResult] = field(default_factory=dict)  # by seed
    told: bool = False

    @property
    def number(self) -> int:
        return self.trial.number


def run_sweep_on_ray(base: Config, echo: Callable[[str], None] = print) -> optuna.Study:
    """Run (or resume) the sweep on Ray until `n_trials` trials have completed or been
    pruned; several trials at once, as many as the cluster runs seeds for."""
    ray = import_ray()
    base = task_config(base)
    storage = rdb_storage(base.sweep.storage, None, 0)  # ask-and-tell: no Optuna heartbeats
    study = prepare_study(base, storage)
    if len(study.get_trials(states=FINISHED)) >= base.sweep.n_trials:
        return study
    keep = work_dir_of(SWEEPS_DIR / base.sweep.study_name)
    with lease(keep, "sweep", "seedvar sweep --ray"):
        tracking.check_reachable(base)
        tracking.open_store(base)  # the experiment exists before tasks log to it at once
        with ray_session(base.ray) as cluster:
            resources = seed_resources(base, cluster)
            k = base.sweep.seeds_per_trial
            at_once = max(1, math.ceil(cluster.slots(resources) / k))
            echo(cluster.describe())
            echo(
                f"sweep {base.sweep.study_name}: {base.sweep.n_trials} trials x {k} seeds, "
                f"{resources.describe()}: up to {at_once} trials at once"
            )
            scheduler = Scheduler(ray, base.ray, resources, echo, cluster.one_gpu_per_node)
            driver = Driver(base, study, storage, scheduler, echo)
            driver.run(at_once)
    if driver.failures:
        raise SweepFailed(
            f"the sweep stopped: {'; '.join(driver.failures)}; fix the cause and run the same "
            "command again: finished trials and seeds are kept"
        )
    return study


class Driver:
    """Asks Optuna for trials, runs their seeds through the scheduler, tells Optuna."""

    def __init__(
        self,
        base: Config,
        study: optuna.Study,
        storage: BaseStorage,
        scheduler: Scheduler,
        echo: Callable[[str], None],
    ) -> None:
        self.base, self.study, self.storage = base, study, storage
        self.scheduler, self.echo = scheduler, echo
        self.project_dir = base.ray.project_dir or str(Path.cwd())
        self.active: dict[int, TrialRun] = {}  # by trial number; seeds submitted
        self.waiting: list[TrialRun] = []  # the same configuration as an active trial
        self.failures: list[str] = []
        self.failed_trials = 0

    def run(self, at_once: int) -> None:
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self._adopt(frozen)
        try:
            while True:
                self._ask(at_once)
                if not self.active and not self.waiting:
                    return
                for result in self.scheduler.wait(POLL_SECONDS):
                    self._record(result)
        except BaseException:
            self.scheduler.cancel_all()
            raise

    def _stopping(self) -> bool:
        return bool(self.failures) or self.failed_trials >= self.base.sweep.n_trials

    def _ask(self, at_once: int) -> None:
        """Start trials while there is room and the sweep needs more."""
        while not self._stopping() and len(self.active) + len(self.waiting) < at_once:
            done = len(self.study.get_trials(deepcopy=False, states=FINISHED))
            if done + len(self.active) + len(self.waiting) >= self.base.sweep.n_trials:
                return
            trial = self.study.ask()  # an enqueued trial first (the base configuration)
            params = drawn(trial, self.base.sweep.space)
            self._start(TrialRun(trial, params, trial_config(self.base, params)))

    def _adopt(self, frozen: optuna.trial.FrozenTrial) -> None:
        """Take up a trial left RUNNING by a driver that died."""
        if set(frozen.params) != set(self.base.sweep.space):
            self.study.tell(frozen.number, state=TrialState.FAIL, skip_if_finished=True)
            self.echo(f"trial {frozen.number}: left half-drawn by a driver that died; failed")
            return
        self.echo(f"trial {frozen.number}: taken up again (its driver died)")
        handle = optuna.trial.Trial(
            self.study, trial_id(self.storage, self.study.study_name, frozen.number)
        )
        self._start(TrialRun(handle, frozen.params, trial_config(self.base, frozen.params)))

    def _start(self, trial: TrialRun) -> None:
        if any(other.config.hash() == trial.config.hash() for other in self.active.values()):
            self.waiting.append(trial)  # its seeds are the other trial's: reuse them after it
            return
        earlier = self._trial_run_id(trial.number)
        trial.run = start_trial_run(trial.trial, trial.config, trial.params, earlier)
        self.active[trial.number] = trial
        self.echo(f"trial {trial.number} started: {_shown(trial.params)}")
        for seed in range(self.base.sweep.seeds_per_trial):
            task = SeedTask(
                key=TaskKey(seed, trial.number),
                config=trial.config.with_seed(seed),
                project_dir=self.project_dir,
                store=str(work_dir_of(Path(trial.config.output_dir)).resolve()),
                parent_run_id=trial.run.run_id,
                run_tags=seed_tags(trial.config),
                trial=TrialLink(trial.number, reports=seed == 0),
            )
            self.scheduler.submit(task)

    def _trial_run_id(self, number: int) -> str | None:
        """The MLflow run of trial `number` if a driver that died had opened it."""
        store = tracking.open_store(self.base)
        found = store.client.search_runs(
            [store.experiment_id],
            f"tags.`{SWEEP_TAG}` = '{self.base.sweep.study_name}' and "
            f"tags.`{TRIAL_NUMBER_TAG}` = '{number}' and tags.`{tracking.ROLE_TAG}` = 'trial'",
            max_results=1,
        )
        return found[0].info.run_id if found else None

    def _record(self, result: TaskResult) -> None:
        """A seed is back. A pruned or failed seed ends its trial in Optuna at once, which the
        trial's other seeds, still training, read from the storage and stop on."""
        assert result.key.trial is not None  # a sweep's keys name their trial
        trial = self.active[result.key.trial]
        trial.results[result.key.seed] = result
        if result.status is Status.PRUNED and not trial.told:
            self.study.tell(trial.number, state=TrialState.PRUNED, skip_if_finished=True)
            trial.told = True
            self.echo(f"trial {trial.number} pruned ({result.error})")
        elif result.status is Status.FAILED and not trial.told:
            self.study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            trial.told = True
            self.failed_trials += 1
            self.echo(f"trial {trial.number} FAILED: {result.key}: {result.error}")
            if result.detail:
                self.echo(result.detail.rstrip())
            if result.stops_launch:
                self.failures.append(f"{result.key}: {result.error}")
        if len(trial.results) == self.base.sweep.seeds_per_trial:
            self._close(trial)

    def _close(self, trial: TrialRun) -> None:
        """All seeds are back: end the trial in Optuna (once) and in MLflow."""
        del self.active[trial.number]
        statuses = {result.status for result in trial.results.values()}
        assert trial.run is not None
        if statuses & {Status.FAILED, Status.STOPPED}:
            trial.run.end(tracking.FAILED)
        elif Status.PRUNED in statuses:
            trial.run.end(tracking.KILLED, {"seedvar.pruned": "true"})
        else:
            metrics = {seed: result.metrics or {} for seed, result in trial.results.items()}
            values = record_trial(trial.trial, trial.config, metrics, trial.run)
            self.study.tell(trial.number, values, skip_if_finished=True)
            trial.run.end(tracking.FINISHED)
            base = primary_column(self.base.task)
            self.echo(f"trial {trial.number} complete: mean {base} {values[0]:.4f}")
        for waiting in [t for t in self.waiting if t.config.hash() == trial.config.hash()]:
            self.waiting.remove(waiting)
            self._start(waiting)


def _shown(params: dict[str, Any]) -> str:
    """Parameters in one short line."""
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
    )
