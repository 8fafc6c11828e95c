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
resume), so no trial is lost or counted twice. One driver per sweep: a lease in the study's
attributes stops a second one while the first is alive.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from seedvar import tracking
from seedvar.config import Config
from seedvar.errors import ConfigError, SeedvarError
from seedvar.metrics import HANS_NON_ENTAILED, MNLI_MATCHED
from seedvar.scale.launch import POLL_SECONDS, hits_every_seed, task_config
from seedvar.scale.ray_tasks import (
    Outcome,
    SeedTask,
    TrialLink,
    import_ray,
    ray_session,
    seed_resources,
)
from seedvar.scale.scheduler import Scheduler
from seedvar.sweep.objective import (
    MLFLOW_RUN_ATTR,
    OUTPUT_DIR_ATTR,
    SEEDS_ATTR,
    SWEEP_TAG,
    seed_summary,
    tracking_key,
)
from seedvar.sweep.space import suggest, trial_config
from seedvar.sweep.storage import rdb_storage
from seedvar.sweep.study import FINISHED, prepare_study

LEASE = "seedvar.ray_driver"
LEASE_SECONDS = 60.0


class SweepFailed(SeedvarError):
    """Trials of a Ray sweep failed for a reason that is not their configuration's."""


@dataclass
class TrialRun:
    """A trial in flight: its configuration, MLflow run and what its seeds returned."""

    number: int
    trial_id: int
    params: dict[str, Any]
    config: Config
    run: tracking.TrackedRun | None = None
    outcomes: dict[int, Outcome] = field(default_factory=dict)  # seed index -> outcome
    told: bool = False

    def key(self, index: int) -> str:
        return f"trial {self.number} seed {index}"


class Lease:
    """The right to drive a sweep, renewed while the driver lives (in the study's attributes)."""

    def __init__(self, study: optuna.Study) -> None:
        self.study = study
        self.holder = {"id": uuid.uuid4().hex, "host": socket.gethostname(), "pid": os.getpid()}
        self.renewed = 0.0

    def take(self) -> None:
        held = self.study.user_attrs.get(LEASE) or {}
        if held.get("id") not in (None, self.holder["id"]) and self._alive(held):
            raise ConfigError(
                f"sweep {self.study.study_name!r} is being run by another `seedvar sweep --ray` "
                f"({held['host']}, pid {held['pid']}); wait for it, or stop it and run this "
                f"again {LEASE_SECONDS:.0f} s later"
            )
        self.renew(now=True)

    def _alive(self, held: dict[str, Any]) -> bool:
        """Whether the lease's holder may still be driving: it renewed the lease lately and,
        if it ran on this host, its process is still there."""
        if time.time() - held["at"] >= LEASE_SECONDS:
            return False
        if held["host"] != self.holder["host"]:
            return True
        try:
            os.kill(held["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def renew(self, now: bool = False) -> None:
        if now or time.monotonic() - self.renewed > LEASE_SECONDS / 4:
            self.study.set_user_attr(LEASE, {**self.holder, "at": time.time()})
            self.renewed = time.monotonic()

    def release(self) -> None:
        self.study.set_user_attr(LEASE, {})


def run_sweep_on_ray(base: Config, echo: Callable[[str], None] = print) -> optuna.Study:
    """Run (or resume) the sweep on Ray until `n_trials` trials have completed or been
    pruned; several trials at once, as many as the cluster runs seeds for."""
    ray = import_ray()
    base = task_config(base)
    study = prepare_study(base, rdb_storage(base.sweep.storage, None, 0))  # ask-and-tell
    if len(study.get_trials(states=FINISHED)) >= base.sweep.n_trials:
        return study
    lease = Lease(study)
    lease.take()
    tracking.check_reachable(base)
    tracking.open_store(base)  # the experiment exists before tasks log to it at once
    try:
        with ray_session(base.ray) as cluster:
            resources = seed_resources(base, cluster)
            k = base.sweep.seeds_per_trial
            at_once = max(1, math.ceil(cluster.slots(resources) / k))
            echo(cluster.describe())
            echo(
                f"sweep {base.sweep.study_name}: {base.sweep.n_trials} trials x {k} seeds, "
                f"{resources.describe()}: up to {at_once} trials at once"
            )
            driver = Driver(base, study, Scheduler(ray, base.ray, resources, echo), echo)
            driver.run(at_once, lease)
    finally:
        lease.release()
    if driver.failures:
        raise SweepFailed(
            f"the sweep stopped: {'; '.join(driver.failures)}; fix the cause and run the same "
            "command again: finished trials and seeds are kept"
        )
    return study


class Driver:
    """Asks Optuna for trials, runs their seeds through the scheduler, tells Optuna."""

    def __init__(
        self, base: Config, study: optuna.Study, scheduler: Scheduler, echo: Callable[[str], None]
    ) -> None:
        self.base, self.study, self.scheduler, self.echo = base, study, scheduler, echo
        self.project_dir = base.ray.project_dir or str(Path.cwd())
        self.active: dict[int, TrialRun] = {}  # by trial number; seeds submitted
        self.waiting: list[TrialRun] = []  # the same configuration as an active trial
        self.owner: dict[str, tuple[TrialRun, int]] = {}  # task key -> trial, seed index
        self.failures: list[str] = []
        self.failed_trials = 0

    def run(self, at_once: int, lease: Lease) -> None:
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self._adopt(frozen)
        try:
            while True:
                lease.renew()
                self._ask(at_once)
                if not self.active and not self.waiting:
                    return
                for outcome in self.scheduler.wait(POLL_SECONDS):
                    self._record(outcome)
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
            space = self.base.sweep.space
            params = {key: suggest(trial, key, spec) for key, spec in space.items()}
            self._start(TrialRun(trial.number, trial._trial_id, params, self._config(params)))

    def _config(self, params: dict[str, Any]) -> Config:
        return trial_config(self.base, params)

    def _adopt(self, frozen: optuna.trial.FrozenTrial) -> None:
        """Take up a trial left RUNNING by a driver that died."""
        if set(frozen.params) != set(self.base.sweep.space):
            self.study.tell(frozen.number, state=TrialState.FAIL, skip_if_finished=True)
            self.echo(f"trial {frozen.number}: left half-drawn by a driver that died; failed")
            return
        self.echo(f"trial {frozen.number}: taken up again (its driver died)")
        trial = TrialRun(
            frozen.number, frozen._trial_id, frozen.params, self._config(frozen.params)
        )
        self._start(trial)

    def _start(self, trial: TrialRun) -> None:
        if any(other.config.hash() == trial.config.hash() for other in self.active.values()):
            self.waiting.append(trial)  # its seeds are the other trial's: reuse them after it
            return
        sweep = self.base.sweep
        tags = {
            tracking.ROLE_TAG: "trial",
            SWEEP_TAG: sweep.study_name,
            "optuna.trial_number": str(trial.number),
        }
        earlier = self._trial_run_id(trial.number)
        trial.run = tracking.start_run(
            trial.config, f"trial {trial.number}", tags=tags, resume_run_id=earlier
        )
        if earlier is None:
            params = {f"trial.{k}": v for k, v in trial.params.items()}
            trial.run.log_params({**params, **trial.config.recipe(per_seed=False)})
        self.active[trial.number] = trial
        self.echo(f"trial {trial.number} started: {_shown(trial.params)}")
        for index in range(sweep.seeds_per_trial):
            key = trial.key(index)
            self.owner[key] = (trial, index)
            self.scheduler.submit(
                SeedTask(
                    key=key,
                    config=trial.config.with_seed(index),
                    project_dir=self.project_dir,
                    parent_run_id=trial.run.run_id,
                    trial=TrialLink(trial.trial_id, trial.number, reports=index == 0),
                )
            )

    def _trial_run_id(self, number: int) -> str | None:
        """The MLflow run of trial `number` if a driver that died had opened it."""
        client, experiment = tracking.open_store(self.base)
        found = client.search_runs(
            [experiment],
            f"tags.`{SWEEP_TAG}` = '{self.base.sweep.study_name}' and "
            f"tags.`optuna.trial_number` = '{number}' and tags.`{tracking.ROLE_TAG}` = 'trial'",
            max_results=1,
        )
        return found[0].info.run_id if found else None

    def _record(self, outcome: Outcome) -> None:
        """A seed is back. A pruned or failed seed ends its trial in Optuna at once, which the
        trial's other seeds, still training, read from the storage and stop on."""
        trial, index = self.owner.pop(outcome.key)
        trial.outcomes[index] = outcome
        if outcome.status == "pruned" and not trial.told:
            self.study.tell(trial.number, state=TrialState.PRUNED, skip_if_finished=True)
            trial.told = True
            self.echo(f"trial {trial.number} pruned ({outcome.error})")
        elif outcome.status == "failed" and not trial.told:
            self.study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            trial.told = True
            self.failed_trials += 1
            self.echo(f"trial {trial.number} FAILED: {outcome.key}: {outcome.error}")
            if outcome.detail:
                self.echo(outcome.detail.rstrip())
            if hits_every_seed(outcome):
                self.failures.append(f"trial {trial.number} {outcome.key}: {outcome.error}")
        if len(trial.outcomes) == self.base.sweep.seeds_per_trial:
            self._close(trial)

    def _close(self, trial: TrialRun) -> None:
        """All seeds are back: end the trial in Optuna (once) and in MLflow."""
        del self.active[trial.number]
        statuses = {outcome.status for outcome in trial.outcomes.values()}
        assert trial.run is not None
        if statuses & {"failed", "stopped"}:
            trial.run.end(tracking.FAILED)
        elif "pruned" in statuses:
            trial.run.end(tracking.KILLED, {"seedvar.pruned": "true"})
        else:
            metrics = [trial.outcomes[i].metrics or {} for i in sorted(trial.outcomes)]
            summary = seed_summary(metrics)
            handle = optuna.trial.Trial(self.study, trial.trial_id)
            for key, value in summary.items():
                handle.set_user_attr(key, value)
            handle.set_user_attr(OUTPUT_DIR_ATTR, trial.config.output_dir)
            handle.set_user_attr(SEEDS_ATTR, sorted(trial.outcomes))
            handle.set_user_attr(MLFLOW_RUN_ATTR, trial.run.run_id)
            accuracy = summary[f"mean/{MNLI_MATCHED}"]
            values = [accuracy]
            if self.base.sweep.mode == "accuracy_and_spread":
                values.append(summary[f"std/{HANS_NON_ENTAILED}"])
            self.study.tell(trial.number, values, skip_if_finished=True)
            trial.run.log_raw_metrics({tracking_key(k): v for k, v in summary.items()})
            trial.run.end(tracking.FINISHED)
            self.echo(f"trial {trial.number} complete: mean MNLI-m accuracy {accuracy:.4f}")
        for waiting in [t for t in self.waiting if t.config.hash() == trial.config.hash()]:
            self.waiting.remove(waiting)
            self._start(waiting)


def _shown(params: dict[str, Any]) -> str:
    """Parameters in one short line."""
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
    )
