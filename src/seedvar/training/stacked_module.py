"""The LightningModule of K seeds fine-tuned as one (training/stacked.py): one forward, backward
and AdamW step serve them all; each seed's loss, gradient clipping and divergence its own."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics.classification import MulticlassAccuracy
from transformers import PreTrainedModel

from seedvar.errors import DivergedError
from seedvar.training.module import LEARNING_RATE, TRAIN_LOSS, NLIClassifier, seed_key
from seedvar.training.resume import GROUP
from seedvar.training.stacked import Packing, SeedStreams, packed_logits, stack_models
from seedvar.training.stacked_data import StackedBatch

STREAMS = "seedvar_seed_streams"  # the checkpoint's key for the seeds' generator states


class StackedClassifier(NLIClassifier):
    """Fine-tunes `models` (the study's `seeds`, in order) stacked, with NLIClassifier's AdamW
    and schedule, which are elementwise: the stacked step is each seed's own step.

    Each seed's gradients are clipped by their own norm. A seed whose loss turns non-finite is
    reported (`diverged`) and its neighbours train on untouched; DivergedError only once every
    seed has diverged. Logs each seed's loss as `train/loss/seed-N` and validation accuracy as
    `<validation_key>/seed-N` (`seed_key`), their mean as `validation_key`, and the learning rate
    (the seeds'), as NLIClassifier does."""

    def __init__(
        self,
        models: Sequence[PreTrainedModel],
        streams: SeedStreams,
        seeds: Sequence[int],
        learning_rate: float,
        weight_decay: float,
        warmup_ratio: float,
        total_steps: int,
        validation_key: str = "val/accuracy",
        log_every_n_steps: int = 50,
    ) -> None:
        super().__init__(
            stack_models(models, streams),
            learning_rate,
            weight_decay,
            warmup_ratio,
            total_steps,
            validation_key,
            log_every_n_steps,
        )
        if len(seeds) != len(models):
            raise ValueError(f"{len(models)} models named by {len(seeds)} seeds")
        self.streams = streams
        self.seeds = list(seeds)
        self.first_nonfinite_step = torch.full((len(self.seeds),), -1)
        labels = models[0].config.num_labels
        self.seed_accuracies = nn.ModuleList(
            MulticlassAccuracy(labels, average="micro") for _ in self.seeds
        )

    def logits(
        self, inputs: dict[str, torch.Tensor], packing: Packing | None = None
    ) -> torch.Tensor:
        """The stacked model's logits, shaped (K, B, labels), for K x B padded rows (seed-major)
        or for K packed rows laid out as `packing` says."""
        self.streams.packing = packing
        if packing is not None:
            return packed_logits(self.model, inputs, self.streams)
        ids = inputs["input_ids"]
        positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        logits = self.model(**inputs, position_ids=positions).logits
        return logits.view(len(self.seeds), -1, logits.shape[-1])

    def seed_logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Each seed's logits (K, B, labels) for one padded batch of B rows, the same for all."""
        return self.logits(
            {name: tensor.repeat(len(self.seeds), 1) for name, tensor in inputs.items()}
        )

    def training_context(self, on_gpu: bool) -> AbstractContextManager[None]:
        """Nothing to swap in: the stacked model's dropout and attention are its own."""
        return nullcontext()

    def seed_losses(self, batch: StackedBatch) -> torch.Tensor:
        """Each seed's mean cross-entropy over its own batch, shaped (K,)."""
        self.streams.lengths = batch.lengths
        logits = self.logits(batch.inputs, batch.packing)
        losses = F.cross_entropy(logits.flatten(0, 1), batch.labels, reduction="none")
        return losses.view(len(self.seeds), -1).mean(dim=1)

    def on_train_start(self) -> None:
        self.first_nonfinite_step = torch.full((len(self.seeds),), -1, device=self.device)

    def training_step(  # type: ignore[override]  # K seeds' batch, each seed's loss returned
        self, batch: StackedBatch, batch_idx: int
    ) -> dict[str, torch.Tensor]:
        losses = self.seed_losses(batch)
        unseen = (self.first_nonfinite_step < 0) & ~torch.isfinite(losses)
        self.first_nonfinite_step = torch.where(unseen, self.global_step, self.first_nonfinite_step)
        for seed, loss in zip(self.seeds, losses, strict=True):
            self.log(seed_key(TRAIN_LOSS, seed), loss, logger=True)
        if self.global_step % self.log_every_n_steps == 0:
            self.stop_if_diverged()
            self.log(LEARNING_RATE, self.trainer.optimizers[0].param_groups[0]["lr"], logger=True)
        # the seeds' losses share no weights: the sum's gradient is each seed's own
        return {"loss": losses.sum(), "seed_losses": losses.detach()}

    def diverged(self) -> dict[int, int]:
        """Each seed whose loss has been non-finite, with the first step it was (read on the
        host: a wait for a GPU's step)."""
        steps = self.first_nonfinite_step.tolist()
        return {seed: step for seed, step in zip(self.seeds, steps, strict=True) if step >= 0}

    def stop_if_diverged(self) -> None:
        """Raise DivergedError once every seed has diverged: none is left to train."""
        diverged = self.diverged()
        if len(diverged) == len(self.seeds):
            steps = ", ".join(f"seed {seed} at step {step}" for seed, step in diverged.items())
            raise DivergedError(
                f"training diverged: the loss became non-finite for every seed ({steps}; "
                f"learning rate {self.learning_rate:g}); lower train.learning_rate or check "
                "the data"
            )

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        labels = batch.pop("labels")
        predicted = self.seed_logits(batch).argmax(dim=-1)
        self.val_accuracy.update(predicted.flatten(), labels.repeat(len(self.seeds)))
        self.log(self.validation_key, self.val_accuracy, on_epoch=True, prog_bar=True)
        accuracies = cast(list[MulticlassAccuracy], list(self.seed_accuracies))
        for seed, accuracy, predictions in zip(self.seeds, accuracies, predicted, strict=True):
            accuracy.update(predictions, labels)
            self.log(seed_key(self.validation_key, seed), accuracy, on_epoch=True)

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Each seed's gradients clipped by their own norm (the Trainer's gradient_clip_val)."""
        if gradient_clip_val:
            clip_each_seed(list(self.model.parameters()), gradient_clip_val)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[STREAMS] = self.streams.states()
        checkpoint[GROUP] = self.seeds  # whose checkpoint it is: these seeds, in this order

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.streams.restore(checkpoint[STREAMS])


def clip_each_seed(parameters: list[nn.Parameter], max_norm: float) -> None:
    """torch's `clip_grad_norm_` for each seed alone: seed k's gradient norm over the k-th slice
    of every stacked parameter, and its gradients scaled by max_norm / norm where that is < 1."""
    grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(grad.flatten(1), dim=1) for grad in grads])
    scale = (max_norm / (torch.linalg.vector_norm(norms, dim=0) + 1e-6)).clamp(max=1.0)
    for grad in grads:
        grad.mul_(scale.view(-1, *[1] * (grad.dim() - 1)))
