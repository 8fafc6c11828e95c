"""One seed, end to end: with its job, fine-tune, evaluate, publish; tracked in MLflow."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import lightning as L
from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
from transformers import AutoModelForSequenceClassification

from seedvar import tracking
from seedvar.config import Config
from seedvar.data.prepared import StudyInputs, study_inputs
from seedvar.pretrained import load_tokenizer
from seedvar.study.evaluate import evaluate_sets
from seedvar.study.job import CONFIG, METRICS, SeedJob
from seedvar.training.device import (
    autocast_dtype,
    device_name,
    evaluation_device,
    resolve_precision,
)
from seedvar.training.fit import fine_tune
from seedvar.training.resume import ResumeCheckpoint


@dataclass(frozen=True)
class SeedResult:
    """Where a finished seed lives and what it scored."""

    seed_dir: Path
    run_id: str
    metrics: dict[str, float]
    wall_seconds: float


def run_seed(
    config: Config,
    force: bool = False,
    prepared: Path | None = None,
    callbacks: list[L.Callback] | None = None,
    parent_run_id: str | None = None,
    run_tags: dict[str, str] | None = None,
    reuse: bool = False,
) -> SeedResult:
    """Fine-tune and evaluate the seed `config.train.seed`; never overwrites a finished seed.

    `prepared`: a folder written by `seedvar prepare`; without it the sets are loaded here.
    `callbacks`: more Lightning callbacks (a sweep's pruning, for example).
    `parent_run_id`: the MLflow run to file this seed under (default: the study's run).
    A seed whose process died continues where it stopped: from its last training checkpoint,
    or, once trained, straight at evaluation; in the same MLflow run.
    `reuse`: a seed already finished with this same recipe is returned as it is (a DVC stage
    rerun after its first run finished unrecorded); one of another recipe is retrained.
    """
    started = time.perf_counter()
    job = SeedJob.of(config)
    if reuse and job.finished_metrics() is not None:
        if job.finished_config().hash() == config.hash():
            elapsed = time.perf_counter() - started
            return SeedResult(job.folder, job.finished_run_id(), job.finished_metrics(), elapsed)
        force = True
    job.refuse_finished(force)
    job.check_writable()
    tracking.check_reachable(config)
    tokenizer = load_tokenizer(config.model.name)
    inputs = study_inputs(config, prepared)
    with job.locked(), job.disk_errors_explained():
        job.refuse_finished(force)  # again: another process may have finished it meanwhile
        attempt = job.resumable(config)
        if parent_run_id is None and attempt.run_id is None:
            parent_run_id = tracking.study_run_id(*tracking.open_store(config), config)
        with tracking.open_run(
            config,
            f"seed-{config.train.seed}",
            tags={**_seed_tags(config), **(run_tags or {})},
            parent_run_id=parent_run_id,
            resume_run_id=attempt.run_id,
        ) as run:
            if attempt.run_id is None:
                job.begin(config, run.run_id)
                run.log_params(_run_params(config, inputs))
                run.log_datasets(inputs.sets.named(), inputs.sets.fingerprints())
            monitor = system_metrics(run, config)
            if not job.trained():
                resume = ResumeCheckpoint(job.checkpoints, config.train.checkpoint_every_n_steps)
                model = fine_tune(
                    config,
                    inputs.tokenized,
                    tokenizer.pad_token_id,
                    [resume, *(callbacks or [])],
                    logger=run.lightning_logger(),
                    checkpoint=attempt.checkpoint,
                )
                job.save_model(model, tokenizer)
            model = AutoModelForSequenceClassification.from_pretrained(job.model_dir)
            metrics = evaluate_sets(
                model.to(evaluation_device(config)),
                inputs.sets.evaluation,
                inputs.tokenized,
                tokenizer.pad_token_id,
                config.train.eval_batch_size,
                job.work_dir,
                autocast_dtype(config),
            )
            monitor.finish()
            run.log_metrics(metrics)
            run.log_folder(job.work_dir / "predictions", "predictions")
            run.log_file(job.work_dir / METRICS)
            run.log_file(job.work_dir / CONFIG)
            run.log_weights(job.model_dir, job.folder / "model", config.tracking.log_weights)
        job.publish()
    return SeedResult(job.folder, run.run_id, metrics, time.perf_counter() - started)


def _seed_tags(config: Config) -> dict[str, str]:
    description = (
        f"Seed {config.train.seed} of the {config.profile} study {config.study_hash()}: "
        f"{config.model.name} fine-tuned on MNLI, evaluated on MNLI-m/mm and HANS. Weights: "
        f"{config.output_dir}/seed-{config.train.seed}/model (DVC)."
    )
    return {
        tracking.ROLE_TAG: "seed",
        "seedvar.config_hash": config.hash(),
        tracking.DESCRIPTION_TAG: description,
    }


def system_metrics(run: tracking.TrackedRun, config: Config) -> SystemMetricsMonitor:
    """MLflow's sampler of CPU, memory, disk (and GPU, with nvidia-ml-py) for this run."""
    monitor = SystemMetricsMonitor(
        run.run_id,
        sampling_interval=config.tracking.system_metrics_seconds,
        resume_logging=True,
        tracking_uri=run.client.tracking_uri,
    )
    monitor.start()
    return monitor


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
        "precision": resolve_precision(config),
        "device": device_name(config),
    }
