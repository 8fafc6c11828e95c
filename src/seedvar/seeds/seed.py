"""One seed, end to end: with its job, fine-tune, evaluate, publish; tracked in MLflow.

A seed's life (`seed_life`) is a generator that stops once, where the seed trains, asking for
its `Training`: `run_seed` trains it alone there (`fine_tune`); seeds/group.py trains several
seeds' at once, stacked, and sends each life its own model (or throws in its error), so that
every seed is claimed, tracked, evaluated and published by the same code."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec

import lightning as L
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from seedvar import progress, tracking
from seedvar.config import Config
from seedvar.data.prepared import StudyInputs, study_inputs
from seedvar.errors import SeedvarError, Superseded
from seedvar.metrics import EVALUATE_SECONDS, TRAIN_SECONDS
from seedvar.pretrained import load_tokenizer, load_trained
from seedvar.project import prepared_data
from seedvar.seeds.evaluate import evaluate_sets
from seedvar.seeds.finished import COLUMNS, CONFIG, METRICS, TRAJECTORY
from seedvar.seeds.job import AlreadyPublished, IfFinished, Resumable, SeedJob
from seedvar.seeds.result import SeedResult, Status, TaskKey
from seedvar.seeds.trajectory import Probe, Trajectory, probes
from seedvar.tracking.logger import RunLogger
from seedvar.tracking.retry import writing_for
from seedvar.tracking.system import system_metrics
from seedvar.training.device import device_name, evaluation_device, on_this_machine, use_gpu
from seedvar.training.fit import fine_tune
from seedvar.training.resume import ResumeCheckpoint, saved_at

if TYPE_CHECKING:
    import datasets

P = ParamSpec("P")
ATTEMPT_TAG = "seedvar.attempt"
FENCE_SECONDS = 1.0  # how often a training attempt checks that it still holds its seed


class Every(L.Callback):
    """Runs `check` before a training batch, at most once every `seconds` (the first batch's
    included): a check that raises stops the seed (the fence: `SeedJob.check_held`)."""

    def __init__(self, check: Callable[[], None], seconds: float) -> None:
        self.check, self.seconds, self.checked = check, seconds, -math.inf

    def on_train_batch_start(self, *args: object) -> None:
        if time.monotonic() - self.checked >= self.seconds:
            self.check()
            self.checked = time.monotonic()


@dataclass(frozen=True)
class Training:
    """What a seed's life asks for where it trains: its config, its job and its training sets;
    the callbacks it trains with (its fence, its resume checkpoint, its trajectory's probes, a
    caller's), the logger of its MLflow run, and the checkpoint to resume from, if any."""

    config: Config
    job: SeedJob
    tokenized: dict[str, datasets.Dataset]
    pad_token_id: int
    fence: Every
    resume: ResumeCheckpoint
    probes: list[Probe]
    callbacks: list[L.Callback]
    logger: RunLogger
    checkpoint: Path | None

    def alone(self) -> PreTrainedModel:
        """The seed fine-tuned alone (`fine_tune`); `not_resumable` where its checkpoint is a
        stacked group's."""
        if self.checkpoint and (group := saved_at(self.checkpoint)[1]):
            raise self.not_resumable(group, [self.config.train.seed])
        path = self.job.work_dir / TRAJECTORY
        pad = self.pad_token_id
        trajectory = [Trajectory(self.config, self.probes, pad, [path])] if self.probes else []
        return fine_tune(
            self.config,
            self.tokenized,
            pad,
            [self.fence, self.resume, *trajectory, *self.callbacks],
            logger=self.logger,
            checkpoint=self.checkpoint,
        )

    def not_resumable(self, group: list[int], here: list[int]) -> SeedvarError:
        """The error of a seed whose checkpoint is of the stacked `group` where the seeds
        `here` resume; its checkpoint is removed, so that its next attempt starts it over."""
        if self.checkpoint:
            self.checkpoint.unlink(missing_ok=True)
        return SeedvarError(
            f"seed {self.config.train.seed}: its training checkpoint is of seeds {group} trained "
            f"stacked, and seeds {here} resume here; its checkpoint is removed, so its next "
            "attempt starts it over"
        )


# stops once where it trains (a `Training`), goes on with the model (or an error thrown in)
SeedLife = Generator[Training, PreTrainedModel, SeedResult]


def trained_alone(life: Callable[P, SeedLife]) -> Callable[P, SeedResult]:
    """A seed's `life` lived with its training done alone (`Training.alone`)."""

    def run(*args: P.args, **kwargs: P.kwargs) -> SeedResult:
        seed = life(*args, **kwargs)
        try:
            training = next(seed)
        except StopIteration as ended:  # finished before, or trained: nothing to train
            return ended.value
        try:
            trained: PreTrainedModel | BaseException = training.alone()
        except BaseException as error:
            trained = error
        return goes_on(seed, trained)

    return run


def goes_on(life: SeedLife, trained: PreTrainedModel | BaseException) -> SeedResult:
    """The rest of a seed's life stopped where it trains: `trained` is its model, or the error
    that stopped its training, raised in the life where it trains (its run ends by it)."""
    try:
        if isinstance(trained, BaseException):
            life.throw(trained)
        else:
            life.send(trained)
    except StopIteration as ended:
        return ended.value
    raise RuntimeError("a seed's life trains once")


def seed_life(
    config: Config,
    if_finished: IfFinished = "refuse",
    prepared: Path | None = None,
    callbacks: list[L.Callback] | None = None,
    parent_run_id: str | None = None,
    run_tags: dict[str, str] | None = None,
    job: SeedJob | None = None,
) -> SeedLife:
    """Fine-tune and evaluate the seed `config.train.seed`; stops where it trains (`Training`).

    `if_finished`, for a seed finished before with this recipe: "refuse" (OutputExistsError),
    "reuse" (publish it as it is), "replace" (retrain it). A seed finished with another recipe
    stays kept beside this one (seeds/job.py) and never stops it.
    `prepared`: a folder written by `seedvar prepare`; without it the sets are loaded here.
    `callbacks`: more Lightning callbacks (a sweep's pruning, for example).
    `parent_run_id`: the MLflow run to file this seed under (default: the study's run).
    `job`: this attempt's job as a scheduler made it, naming the attempt before it starts and
    what its attempt.json notes (default: a `seedvar train` process's).
    The caller holds the study's lease (scale/launch.py): one driver at a time.
    A seed whose process died continues where it stopped: from its last training checkpoint,
    or, once trained, straight at evaluation; in the same MLflow run.
    Raises Superseded when another attempt takes this one's work over while it runs.
    """
    started = time.perf_counter()
    config = on_this_machine(config)
    if job is None:
        job = SeedJob.of(config, data=prepared_data(prepared))
    finished_before = job.finished_dir(config) is not None
    if if_finished == "reuse" and finished_before:
        return _finished(job, config, started)
    # what this attempt replaces: a seed of this recipe finished before it began; one that
    # another attempt publishes while it works is kept (AlreadyPublished)
    replace = if_finished == "replace" and finished_before
    job.refuse_finished(config, force=if_finished != "refuse")
    job.check_writable()
    tracking.check_reachable(config)
    tokenizer = load_tokenizer(config.model.name)
    inputs = study_inputs(config, prepared)
    with job.disk_errors_explained(), writing_for(f"seed {config.train.seed}"):
        resumable = job.claim(config)
        progress.claimed()
        try:
            metrics, run_id = yield from _train_evaluate_track(
                config, job, resumable, inputs, tokenizer, callbacks or [], parent_run_id, run_tags
            )
            job.publish(replace)
        except AlreadyPublished:  # its own run (no other attempt knew of it) is not the seed's
            duplicate = tracking.TrackedRun(tracking.open_store(config).client, run_id)
            duplicate.end(tracking.KILLED, {"seedvar.duplicate": "true"})
            shutil.rmtree(job.work_dir, ignore_errors=True)  # not needed: the seed is published
            return _finished(job, config, started)
        except Superseded:
            raise
        except Exception:
            job.check_held()  # failing because another attempt took the work away: Superseded
            raise
    for leftover in job.work_dirs(config):  # what a late attempt wrote after a takeover
        shutil.rmtree(leftover, ignore_errors=True)
    elapsed = time.perf_counter() - started
    return _result(job, Status.FINISHED, metrics, run_id, elapsed)


run_seed = trained_alone(seed_life)  # one seed, trained alone, end to end


def _train_evaluate_track(
    config: Config,
    job: SeedJob,
    resumable: Resumable,
    inputs: StudyInputs,
    tokenizer: PreTrainedTokenizerBase,
    callbacks: list[L.Callback],
    parent_run_id: str | None,
    run_tags: dict[str, str] | None,
) -> Generator[Training, PreTrainedModel, tuple[dict[str, float], str]]:
    """Train (or continue training) and evaluate in the attempt's folder, in the seed's MLflow
    run, which ends FINISHED when this returns (unless another attempt took the work over);
    `resumable`: what the job's claim found to continue from."""
    store = tracking.open_store(config)
    if resumable.stale_run_id:  # an earlier attempt died before anything worth continuing
        stale = tracking.TrackedRun(store.client, resumable.stale_run_id)
        stale.end(tracking.KILLED, {"seedvar.restarted": "true"})
    if parent_run_id is None and resumable.run_id is None:
        parent_run_id = tracking.study_run_id(store, config)
    tags = {**_seed_tags(config), **(run_tags or {}), ATTEMPT_TAG: job.attempt_id}
    name = tracking.seed_run_name(config, config.train.seed)
    started = tracking.start_run(config, name, tags, parent_run_id, resumable.run_id)
    with tracking.ending(started, holds=job.holds) as run:
        if resumable.run_id is None:
            job.begin(config, run.run_id, inputs.sets.fingerprints())
            run.log_params(_run_params(config, inputs))
            run.log_datasets(inputs.sets.named(), inputs.sets.fingerprints())
        uri, seconds = run.client.tracking_uri, config.tracking.system_metrics_seconds
        with system_metrics(uri, run.run_id, seconds, use_gpu(config), job.holds):  # its own GPU
            metrics = yield from _train_and_evaluate(
                config, job, resumable, inputs, tokenizer, callbacks, run
            )
        run.log_weights(job.model_dir, job.folder / "model", config.tracking.log_weights)
        job.check_held()
    return metrics, run.run_id


def _train_and_evaluate(
    config: Config,
    job: SeedJob,
    resumable: Resumable,
    inputs: StudyInputs,
    tokenizer: PreTrainedTokenizerBase,
    callbacks: list[L.Callback],
    run: tracking.TrackedRun,
) -> Generator[Training, PreTrainedModel, dict[str, float]]:
    """Fine-tune unless the weights are saved already, then evaluate and log the results."""
    if not job.trained():
        started = time.perf_counter()
        every = config.train.checkpoint_every_minutes, config.train.checkpoint_every_n_steps
        model = yield Training(
            config,
            job,
            inputs.tokenized,
            tokenizer.pad_token_id,
            Every(job.check_held, FENCE_SECONDS),
            ResumeCheckpoint(job.checkpoint, *every),
            probes(config, inputs),
            callbacks,
            RunLogger(  # writes into the seed's run; ending it stays with us
                tracking_uri=run.client.tracking_uri,
                run_id=run.run_id,
                guard=job.check_held,
                after_step=run.last_step() if resumable.checkpoint else None,
            ),
            resumable.checkpoint,
        )
        job.save_model(model, tokenizer)
        run.log_raw_metrics({TRAIN_SECONDS: time.perf_counter() - started})
    job.check_held()
    progress.tick("evaluating")
    started = time.perf_counter()
    metrics, columns = evaluate_sets(
        load_trained(job.model_dir, evaluation_device(config)),
        config,
        inputs.sets.evaluation,
        inputs.tokenized,
        tokenizer.pad_token_id,
        job.work_dir,
    )
    job.check_held()
    run.log_metrics(metrics, columns)
    run.log_raw_metrics({EVALUATE_SECONDS: time.perf_counter() - started})
    run.log_folder(job.work_dir / "predictions", "predictions")
    for name in (METRICS, COLUMNS, CONFIG, TRAJECTORY):  # a trajectory only where it was on
        if (job.work_dir / name).is_file():
            run.log_file(job.work_dir / name)
    job.keep_weights_as(config.train.weights_dtype)
    job.check_held()
    return metrics


def _finished(job: SeedJob, config: Config, started: float) -> SeedResult:
    """The seed as it was finished before (by this command earlier, or by another attempt),
    published into output_dir."""
    entry = job.finished_dir(config)
    assert entry is not None  # finished: it stays so
    job.publish_view(entry)
    metrics = job.finished.metrics() or {}
    elapsed = time.perf_counter() - started
    return _result(job, Status.REUSED, metrics, job.finished.run_id(), elapsed)


def _result(
    job: SeedJob, status: Status, metrics: dict[str, float], run_id: str, elapsed: float
) -> SeedResult:
    """A seed this attempt finished (or found finished), published in output_dir; a scheduler
    gives it its task's key."""
    key = TaskKey(job.seed)
    return SeedResult(
        key, status, job.attempt_id, metrics, job.folder, run_id, wall_seconds=elapsed
    )


def _seed_tags(config: Config) -> dict[str, str]:
    description = (
        f"Seed {config.train.seed} of the {config.profile} study {config.study_hash()}: "
        f"{config.model.name} fine-tuned on {config.task.name}, evaluated on "
        f"{', '.join([*config.task.evaluation, *config.diagnostics])}. Weights: "
        f"{config.output_dir}/seed-{config.train.seed}/model (DVC)."
    )
    return {
        tracking.ROLE_TAG: "seed",
        "seedvar.config_hash": config.hash(),
        "seedvar.plan_hash": config.plan_hash(),  # the analysis plan it trained under
        "seedvar.init_seed": str(config.train.effective_init_seed),  # to group runs by
        "seedvar.data_seed": str(config.train.effective_data_seed),  # either seed in the UI
        tracking.DESCRIPTION_TAG: description,
    }


def _run_params(config: Config, inputs: StudyInputs) -> dict[str, object]:
    """What it takes to reproduce a seed: every setting (the effective seeds and tracking
    URI, not their `null`), data fingerprints, code, device."""
    return {
        **config.flat(),
        "train.init_seed": config.train.effective_init_seed,
        "train.data_seed": config.train.effective_data_seed,
        "tracking.uri": tracking.tracking_uri(config.tracking),
        **{f"data.fingerprint.{k}": v for k, v in inputs.sets.fingerprints().items()},
        **{f"data.size.{k}": len(v) for k, v in inputs.tokenized.items()},
        **tracking.provenance(),
        "config_hash": config.hash(),
        "precision": config.train.precision,
        "eval_precision": config.train.eval_precision,
        "device": device_name(config),
    }
