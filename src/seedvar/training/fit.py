"""`fine_tune` (one seed) and `fine_tune_stacked` (K seeds as one): wire the module, the
datamodule, callbacks and a logger into a Trainer and fit.

`trainer_for` and `fit` take plain values: benchmarks/gpu.py runs them on a machine that has
torch, Lightning and transformers but not the study's configuration or data libraries."""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning as L
import torch
from lightning.pytorch.accelerators import CUDAAccelerator
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import Logger
from transformers import PreTrainedModel

from seedvar import progress
from seedvar.interrupts import catch_interrupts, raise_if_lost
from seedvar.pretrained import load_model
from seedvar.training.datamodule import NLIDataModule
from seedvar.training.device import (
    Precision,
    require_gpu,
    resolve_precision,
    slow_bf16_here,
    use_gpu,
)
from seedvar.training.module import NLIClassifier
from seedvar.training.stacked import initialised, seed_weights
from seedvar.training.stacked_data import StackedDataModule
from seedvar.training.stacked_module import StackedClassifier

if TYPE_CHECKING:
    import datasets

    from seedvar.config import Config


def fine_tune(
    config: Config,
    tokenized: dict[str, datasets.Dataset],
    pad_token_id: int,
    callbacks: list[L.Callback],
    logger: Logger | bool = False,
    checkpoint: Path | None = None,
) -> PreTrainedModel:
    """Train one seed with a Lightning Trainer; returns the fine-tuned transformers model.

    `checkpoint`: a resumable checkpoint (training/resume.py) to continue from."""
    train = config.train
    gpu = _ready(config)
    L.seed_everything(train.effective_init_seed, verbose=False)
    module = NLIClassifier(
        load_model(config.model.name, train.effective_init_seed, config.task.labels),
        **_schedule(config, len(tokenized["train"])),
        compile=train.compile,
    )
    data = _batches(config, tokenized, pad_token_id, gpu)
    datamodule = NLIDataModule(**data, data_seed=train.effective_data_seed)
    return fit(_trainer(config, gpu, callbacks, logger), module, datamodule, checkpoint)


def fine_tune_stacked(
    configs: Sequence[Config],
    tokenized: dict[str, datasets.Dataset],
    pad_token_id: int,
    callbacks: list[L.Callback],
    logger: Logger | bool = False,
    checkpoint: Path | None = None,
) -> tuple[list[PreTrainedModel], dict[int, int]]:
    """Train the seeds of `configs` (one recipe) stacked in one Trainer (training/stacked.py),
    each seed's real tokens only, from their group's resumable `checkpoint` if given; returns
    each seed's own fine-tuned model, in their order, and the seeds whose loss became
    non-finite, with the step it first was (their models are not results). DivergedError only
    once every seed has diverged."""
    config, seeds = configs[0], [each.train for each in configs]
    gpu = _ready(config)
    models, streams = initialised(
        config.model.name, [seed.effective_init_seed for seed in seeds], config.task.labels
    )
    module = StackedClassifier(
        models, streams, [seed.seed for seed in seeds], **_schedule(config, len(tokenized["train"]))
    )
    datamodule = StackedDataModule(
        **_batches(config, tokenized, pad_token_id, gpu),
        data_seeds=[seed.effective_data_seed for seed in seeds],
        unpadded=True,
    )
    stacked = fit(_trainer(config, gpu, callbacks, logger), module, datamodule, checkpoint)
    for index, model in enumerate(models):
        model.load_state_dict(seed_weights(stacked, index))
    return models, module.diverged()


def _ready(config: Config) -> bool:
    """Whether `config` trains on a GPU here; DeviceError where it must and cannot (a task on a
    node whose CUDA cannot run: never the CPU by accident), a warning where bf16 is slow."""
    require_gpu(config)
    if slow := slow_bf16_here(config):
        warnings.warn(slow, stacklevel=3)
    return use_gpu(config)


def _schedule(config: Config, examples: int) -> dict[str, Any]:
    """The optimisation settings of a seed's module (NLIClassifier's) on `examples` pairs."""
    from seedvar.metrics import validation_key  # pydantic, through the declarations

    train = config.train
    return {
        "validation_key": validation_key(config.task.validation),
        "learning_rate": train.learning_rate,
        "weight_decay": train.weight_decay,
        "warmup_ratio": train.warmup_ratio,
        "total_steps": total_steps(examples, train.batch_size, train.epochs, train.max_steps),
        "log_every_n_steps": train.log_every_n_steps,
    }


def _batches(
    config: Config, tokenized: dict[str, datasets.Dataset], pad_token_id: int, gpu: bool
) -> dict[str, Any]:
    """A seed's datamodule's sets and batch settings (NLIDataModule's, but for its order)."""
    train = config.train
    return {
        "train": tokenized["train"],
        "validation": tokenized["validation"],
        "pad_token_id": pad_token_id,
        "batch_size": train.batch_size,
        "eval_batch_size": train.eval_batch_size,
        "group_by_length": train.group_by_length,
        "pin_memory": gpu,  # page-locked batches copy to a GPU without blocking
    }


def _trainer(
    config: Config, gpu: bool, callbacks: list[L.Callback], logger: Logger | bool
) -> L.Trainer:
    """`trainer_for` with `config`'s settings."""
    train = config.train
    return trainer_for(
        "gpu" if gpu else "cpu",
        resolve_precision(config),
        epochs=train.epochs,
        max_steps=train.max_steps,
        gradient_clip=train.gradient_clip,
        log_every_n_steps=train.log_every_n_steps,
        callbacks=callbacks,
        logger=logger,
        val_every_n_steps=train.val_every_n_steps,
    )


def trainer_for(
    accelerator: str,
    precision: Precision,
    epochs: int,
    max_steps: int | None,
    gradient_clip: float,
    log_every_n_steps: int,
    callbacks: list[L.Callback],
    logger: Logger | bool = False,
    val_every_n_steps: int | None = None,
) -> L.Trainer:
    """The Trainer of one seed on one device (`accelerator`: "gpu" or "cpu"); validation each
    epoch, or every `val_every_n_steps` training steps counted across epochs."""
    if accelerator == "gpu":
        torch.set_float32_matmul_precision("high")  # TF32 for what bf16 autocast keeps in fp32
    # Lightning's start-up notes (accelerators found, a logger advertisement) on every seed:
    # noise in a 100-seed log; its warnings still show
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    bars = not os.environ.get("TQDM_DISABLE")  # tqdm's own switch (a launch's tasks set it)
    # Lightning's bar reads the logged values back at each refresh: on a GPU a wait for the
    # step, so there it refreshes as often as the loss is logged
    bar = TQDMProgressBar(refresh_rate=log_every_n_steps if accelerator == "gpu" else 1)
    return L.Trainer(
        accelerator=accelerator,
        devices=1,
        precision=precision,
        max_epochs=epochs,
        max_steps=max_steps or -1,
        gradient_clip_val=gradient_clip,
        logger=logger,
        log_every_n_steps=log_every_n_steps,
        enable_checkpointing=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        val_check_interval=val_every_n_steps,
        check_val_every_n_epoch=None if val_every_n_steps else 1,
        enable_progress_bar=bars,
        callbacks=[*([bar] if bars else []), AtEachBatch(), *callbacks],
    )


def fit(
    trainer: L.Trainer,
    module: NLIClassifier,
    datamodule: L.LightningDataModule,
    checkpoint: Path | None = None,
) -> PreTrainedModel:
    """`trainer.fit`, from `checkpoint` if given, inside the module's `training_context`;
    returns the trained model."""
    on_gpu = isinstance(trainer.accelerator, CUDAAccelerator)
    # Lightning 2.6 calls an API torch 2.13 deprecates
    with warnings.catch_warnings(), module.training_context(on_gpu):
        warnings.filterwarnings("ignore", module="lightning.pytorch.utilities._pytree")
        try:
            # our own resume checkpoint (optimizer and sampler state): not weights only
            trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint, weights_only=False)
        except SystemExit:
            if not trainer.interrupted:
                raise
            # Lightning turns Ctrl-C into exit(1) and ignores SIGINT from then on; callers
            # (a sweep's trial, a run's status) need the interrupt itself
            catch_interrupts()
            raise KeyboardInterrupt from None
    return module.model


class AtEachBatch(L.Callback):
    """Raise, before the next batch, a Ctrl-C that Python lost where it landed; after each
    batch, record the progress (seedvar/progress.py)."""

    def on_train_batch_start(self, *args: object) -> None:
        raise_if_lost()

    def on_train_batch_end(
        self, trainer: L.Trainer, module: L.LightningModule, *args: object
    ) -> None:
        progress.tick("training", trainer.global_step, int(getattr(module, "total_steps", 0)))

    def on_validation_batch_end(self, *args: object) -> None:
        progress.tick("validating")


def total_steps(examples: int, batch_size: int, epochs: int, max_steps: int | None) -> int:
    """Optimizer steps of a run: every batch of every epoch, capped at `max_steps`."""
    steps = epochs * math.ceil(examples / batch_size)
    return min(steps, max_steps) if max_steps else steps
