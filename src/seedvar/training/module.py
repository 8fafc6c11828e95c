"""The LightningModule: a sequence classifier trained with AdamW and linear warmup/decay."""

from __future__ import annotations

from contextlib import AbstractContextManager

import lightning as L
import torch
from torchmetrics.classification import MulticlassAccuracy
from transformers import PreTrainedModel, get_linear_schedule_with_warmup

from seedvar.errors import DivergedError
from seedvar.training.attention import attention_without_sync
from seedvar.training.dropout import bit_dropout

NO_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias", "layernorm", "layer_norm")
TRAIN_LOSS = "train/loss"
LEARNING_RATE = "train/learning_rate"
FUSED_PRECISIONS = ("32-true", "bf16-mixed")


def seed_key(key: str, seed: int) -> str:
    """A metric of one of several seeds trained in one process, e.g. train/loss/seed-3."""
    return f"{key}/seed-{seed}"


def diverged(step: int, learning_rate: float) -> DivergedError:
    """The error of a seed whose loss became non-finite at `step`."""
    return DivergedError(
        f"training diverged: the loss became non-finite at step {step} "
        f"(learning rate {learning_rate:g}); lower train.learning_rate or check the data"
    )


class NLIClassifier(L.LightningModule):
    """Fine-tunes `model`; reports validation accuracy (as `validation_key`) once per epoch.

    The progress bar shows the loss only every `log_every_n_steps` steps, and a non-finite loss,
    kept on the device, is checked (DivergedError) only then and at each epoch's end: reading
    either on the host waits for a GPU's step. `total_steps` (the schedule's) is given, not
    `trainer.estimated_stepping_batches`, which builds the training loader before a checkpoint
    restores its position. `compile`: torch.compile the forward in place (same weight names).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        learning_rate: float,
        weight_decay: float,
        warmup_ratio: float,
        total_steps: int,
        validation_key: str = "val/accuracy",
        log_every_n_steps: int = 50,
        compile: bool = False,
    ) -> None:
        super().__init__()
        if compile:
            model.compile(dynamic=True)  # batch lengths vary: one graph for all of them
        # from_pretrained hands models over in eval mode and Lightning keeps each module's mode:
        # without this, fine-tuning would run with dropout switched off
        self.model = model.train()
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.warmup_ratio = warmup_ratio
        self.total_steps = total_steps
        self.validation_key = validation_key
        self.log_every_n_steps = log_every_n_steps
        self.first_nonfinite_step = torch.tensor(-1)
        # correct/total over the epoch; its states are not persistent: not in the checkpoint
        self.val_accuracy = MulticlassAccuracy(model.config.num_labels, average="micro")

    def training_context(self, on_gpu: bool) -> AbstractContextManager[None]:
        """What the model trains inside: on a GPU attention that never waits for the GPU, on
        a CPU its cheap dropout masks."""
        return attention_without_sync(self.model) if on_gpu else bit_dropout(self.model)

    def on_train_start(self) -> None:
        self.first_nonfinite_step = torch.tensor(-1, device=self.device)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
        unseen = (self.first_nonfinite_step < 0) & ~torch.isfinite(loss)
        self.first_nonfinite_step = torch.where(unseen, self.global_step, self.first_nonfinite_step)
        self.log(TRAIN_LOSS, loss, logger=True)
        if self.global_step % self.log_every_n_steps == 0:
            self.stop_if_diverged()
            self.log("loss", loss, prog_bar=True, logger=False)
            self.log(LEARNING_RATE, self.trainer.optimizers[0].param_groups[0]["lr"], logger=True)
        return loss

    def on_train_epoch_end(self) -> None:
        self.stop_if_diverged()

    def stop_if_diverged(self) -> None:
        """Raise DivergedError if the loss has been NaN or infinite at any step so far."""
        step = int(self.first_nonfinite_step)
        if step >= 0:
            raise diverged(step, self.learning_rate)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        labels = batch.pop("labels")
        self.val_accuracy.update(self.model(**batch).logits.argmax(dim=-1), labels)
        # Lightning computes it at the epoch's end, then resets it
        self.log(self.validation_key, self.val_accuracy, on_epoch=True, prog_bar=True)

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip the gradients' norm (the Trainer's gradient_clip_val) here: Lightning's
        mixed-precision plugin refuses to clip for a fused optimizer, fearing loss scaling,
        which bf16 does not use (its gradients are real before the step; fp16's are unscaled
        by Lightning before this is called)."""
        if gradient_clip_val:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), gradient_clip_val)

    def configure_optimizers(self):  # noqa: ANN201 (Lightning's own return type)
        decay: list[torch.nn.Parameter] = []
        no_decay: list[torch.nn.Parameter] = []
        for name, parameter in self.model.named_parameters():
            (no_decay if any(part in name for part in NO_DECAY) else decay).append(parameter)
        optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": self.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=self.learning_rate,
            # one kernel for all parameters (on 2 CPU cores 10 ms a step, not 56); not under
            # fp16, whose loss scaling a fused step would have to undo itself
            fused=self.trainer.precision in FUSED_PRECISIONS,
        )
        scheduler = get_linear_schedule_with_warmup(
            optimizer, int(self.warmup_ratio * self.total_steps), self.total_steps
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }
