"""One seed, end to end: load and tokenize data, fine-tune, save weights, evaluate, track."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import datasets
import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar
from transformers import PreTrainedModel

from seedvar import tracking
from seedvar.config import Config
from seedvar.data.datamodule import NLIDataModule
from seedvar.data.prepared import study_inputs
from seedvar.device import autocast_dtype, evaluation_device, resolve_precision
from seedvar.errors import OutputExistsError
from seedvar.evaluate import evaluate_sets
from seedvar.model import NLIClassifier
from seedvar.pretrained import load_model, load_tokenizer


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
) -> PreTrainedModel:
    """Train one seed with a Lightning Trainer; returns the fine-tuned transformers model."""
    train = config.train
    L.seed_everything(train.effective_init_seed, verbose=False)
    module = NLIClassifier(
        load_model(config.model.name, train.effective_init_seed),
        learning_rate=train.learning_rate,
        weight_decay=train.weight_decay,
        warmup_ratio=train.warmup_ratio,
    )
    datamodule = NLIDataModule(
        tokenized["train"],
        tokenized["validation"],
        pad_token_id=pad_token_id,
        batch_size=train.batch_size,
        eval_batch_size=train.eval_batch_size,
        data_seed=train.effective_data_seed,
        group_by_length=train.group_by_length,
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
    trainer.fit(module, datamodule=datamodule)
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
    """
    started = time.perf_counter()
    final_dir = seed_dir_for(config)
    if finished_metrics(config) is not None and not force:
        raise OutputExistsError(
            f"seed {config.train.seed} is already finished in {final_dir}; "
            "use another seed or output_dir, or --force to retrain it"
        )
    tokenizer = load_tokenizer(config.model.name)
    inputs = study_inputs(config, prepared)
    sets, tokenized = inputs.sets, inputs.tokenized
    work_dir = final_dir.with_name(final_dir.name + ".partial")
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    config.save(work_dir / "config.yaml")

    run_name = f"seed-{config.train.seed}"
    with tracking.seed_run(config, run_name, parent_run_id=parent_run_id) as run:
        run.log_params(
            {
                **config.flat(),
                **{f"data.fingerprint.{k}": v for k, v in sets.fingerprints().items()},
                **{f"data.size.{k}": len(v) for k, v in tokenized.items()},
                **tracking.provenance(),
                "config_hash": config.hash(),
                "precision": resolve_precision(config),
            }
        )
        curve = run.callback(config.train.log_every_n_steps)
        model = fine_tune(config, tokenized, tokenizer.pad_token_id, [curve, *(callbacks or [])])
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
    publish(work_dir, final_dir)
    return SeedResult(final_dir, run.run_id, metrics, time.perf_counter() - started)


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
