"""One seed, end to end: load and tokenize data, fine-tune, save weights, evaluate, track."""

from __future__ import annotations

import fcntl
import json
import shutil
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import datasets
import lightning as L
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from transformers import PreTrainedModel

from seedvar import tracking
from seedvar.config import Config
from seedvar.data.datamodule import NLIDataModule
from seedvar.data.prepared import StudyInputs, study_inputs
from seedvar.device import (
    autocast_dtype,
    device_name,
    evaluation_device,
    resolve_precision,
    use_gpu,
)
from seedvar.errors import OutputExistsError
from seedvar.evaluate import evaluate_sets
from seedvar.model import NLIClassifier
from seedvar.pretrained import load_model, load_tokenizer
from seedvar.resume import ResumeCheckpoint, resume_checkpoint


@dataclass(frozen=True)
class SeedResult:
    """Where a finished seed lives and what it scored."""

    seed_dir: Path
    run_id: str
    metrics: dict[str, float]
    wall_seconds: float


def seed_dir_for(config: Config) -> Path:
    """The folder that holds one seed's weights, predictions and metrics."""
    return Path(config.output_dir) / f"seed-{config.train.seed}"


def fine_tune(
    config: Config,
    tokenized: dict[str, datasets.Dataset],
    pad_token_id: int,
    callbacks: list[L.Callback],
    checkpoint: Path | None = None,
) -> PreTrainedModel:
    """Train one seed with a Lightning Trainer; returns the fine-tuned transformers model."""
    train = config.train
    L.seed_everything(train.effective_init_seed, verbose=False)
    if use_gpu(config):
        torch.set_float32_matmul_precision("high")  # TF32 for what bf16 autocast keeps in fp32
    module = NLIClassifier(
        load_model(config.model.name, train.effective_init_seed),
        learning_rate=train.learning_rate,
        weight_decay=train.weight_decay,
        warmup_ratio=train.warmup_ratio,
        log_every_n_steps=train.log_every_n_steps,
        compile=train.compile,
    )
    datamodule = NLIDataModule(
        tokenized["train"],
        tokenized["validation"],
        pad_token_id=pad_token_id,
        batch_size=train.batch_size,
        eval_batch_size=train.eval_batch_size,
        data_seed=train.effective_data_seed,
        group_by_length=train.group_by_length,
        pin_memory=use_gpu(config),
    )
    trainer = L.Trainer(
        accelerator=train.accelerator,
        devices=1,
        precision=resolve_precision(config),
        max_epochs=train.epochs,
        max_steps=train.max_steps or -1,
        gradient_clip_val=train.gradient_clip,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[TQDMProgressBar(), *callbacks],
    )
    with warnings.catch_warnings():  # our batch sampler does resume mid-epoch (resume.py)
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended")
        trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint)
    return module.model


def run_seed(
    config: Config,
    force: bool = False,
    prepared: Path | None = None,
    callbacks: list[L.Callback] | None = None,
    parent_run_id: str | None = None,
) -> SeedResult:
    """Fine-tune and evaluate the seed `config.train.seed`; never overwrites a finished seed.

    `prepared`: a folder written by `seedvar prepare`; without it the sets are loaded here.
    `callbacks`: more Lightning callbacks (a sweep's pruning, for example).
    `parent_run_id`: the MLflow run to file this seed under (default: the study's run).
    A seed whose process died continues from its last resumable checkpoint.
    """
    started = time.perf_counter()
    final_dir = seed_dir_for(config)
    _refuse_finished(config, force)
    tracking.check_reachable(config)
    tokenizer = load_tokenizer(config.model.name)
    inputs = study_inputs(config, prepared)
    sets, tokenized = inputs.sets, inputs.tokenized
    with seed_lock(config):
        _refuse_finished(config, force)  # again: another process may have finished it meanwhile
        work_dir = final_dir.with_name(final_dir.name + ".partial")
        checkpoint, run_id = _resumable(work_dir, config)
        if checkpoint is None:
            shutil.rmtree(work_dir, ignore_errors=True)
            work_dir.mkdir(parents=True)
            config.save(work_dir / "config.yaml")
        with tracking.seed_run(config, f"seed-{config.train.seed}", parent_run_id=parent_run_id,
                               resume_run_id=run_id) as run:  # fmt: skip
            if checkpoint is None:
                (work_dir / RUN_STATE).write_text(
                    json.dumps({"config_hash": config.hash(), "run_id": run.run_id})
                )
                run.log_params(_run_params(config, inputs))
            resume = ResumeCheckpoint(
                work_dir / "checkpoints", config.train.checkpoint_every_n_steps
            )
            curve = run.callback(config.train.log_every_n_steps)
            model = fine_tune(config, tokenized, tokenizer.pad_token_id,
                              [curve, resume, *(callbacks or [])], checkpoint)  # fmt: skip
            shutil.rmtree(work_dir / "checkpoints", ignore_errors=True)  # only while training
            model.save_pretrained(work_dir / "model")
            tokenizer.save_pretrained(work_dir / "model")
            metrics = evaluate_sets(
                model.to(evaluation_device(config)),
                sets.evaluation,
                tokenized,
                tokenizer.pad_token_id,
                config.train.eval_batch_size,
                work_dir,
                autocast_dtype(config),
            )
            run.log_metrics(metrics)
            run.log_artifacts(work_dir)
        (work_dir / RUN_STATE).unlink()
        publish(work_dir, final_dir)
    return SeedResult(final_dir, run.run_id, metrics, time.perf_counter() - started)


RUN_STATE = "run.json"


def _refuse_finished(config: Config, force: bool) -> None:
    if finished_metrics(config) is not None and not force:
        raise OutputExistsError(
            f"seed {config.train.seed} is already finished in {seed_dir_for(config)}; "
            "use another seed or output_dir, or --force to retrain it"
        )


def _resumable(work_dir: Path, config: Config) -> tuple[Path | None, str | None]:
    """The checkpoint and MLflow run of an unfinished attempt at this same seed and config."""
    state_path = work_dir / RUN_STATE
    checkpoint = resume_checkpoint(work_dir / "checkpoints")
    if checkpoint is None or not state_path.is_file():
        return None, None
    state = json.loads(state_path.read_text())
    if state["config_hash"] != config.hash():
        return None, None
    return checkpoint, state["run_id"]


def _run_params(config: Config, inputs: StudyInputs) -> dict[str, object]:
    """What it takes to reproduce a seed: every setting, data fingerprints, code, device."""
    return {
        **config.flat(),
        **{f"data.fingerprint.{k}": v for k, v in inputs.sets.fingerprints().items()},
        **{f"data.size.{k}": len(v) for k, v in inputs.tokenized.items()},
        **tracking.provenance(),
        "config_hash": config.hash(),
        "precision": resolve_precision(config),
        "device": device_name(config),
    }


@contextmanager
def seed_lock(config: Config) -> Iterator[None]:
    """Hold an exclusive lock on the seed for as long as this process works on it; a second
    process asking for the same seed stops at once (the OS drops the lock if we die)."""
    path = seed_dir_for(config).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputExistsError(
                f"seed {config.train.seed} is being trained by another process right now "
                f"({path} is locked); wait for it to finish or choose another seed"
            ) from None
        yield


def finished_metrics(config: Config) -> dict[str, float] | None:
    """The metrics of the seed `config.train.seed` if it has finished, else None."""
    path = seed_dir_for(config) / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else None


def publish(work_dir: Path, final_dir: Path) -> None:
    """Move a finished seed into place with renames, so no reader sees half a seed."""
    replaced = final_dir.with_name(final_dir.name + ".replaced")
    if final_dir.exists():
        final_dir.rename(replaced)
    work_dir.rename(final_dir)
    shutil.rmtree(replaced, ignore_errors=True)
