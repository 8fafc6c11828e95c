"""The LightningModule: a sequence classifier trained with AdamW and linear warmup/decay."""

from __future__ import annotations

import lightning as L
import torch
from transformers import PreTrainedModel, get_linear_schedule_with_warmup

NO_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias", "layernorm", "layer_norm")


class NLIClassifier(L.LightningModule):
    """Fine-tunes `model`; reports validation accuracy once per epoch.

    The training loss reaches the progress bar every `log_every_n_steps` steps only: Lightning
    turns progress-bar values into Python floats, which on a GPU waits for the step to finish.
    `compile`: torch.compile the model's forward in place (weights keep their names).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        learning_rate: float,
        weight_decay: float,
        warmup_ratio: float,
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
        self.log_every_n_steps = log_every_n_steps
        self.val_correct = torch.zeros((), dtype=torch.long)
        self.val_total = 0

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
        if self.global_step % self.log_every_n_steps == 0:
            self.log("train_loss", loss, prog_bar=True)
        return loss

    def on_validation_epoch_start(self) -> None:
        self.val_correct = torch.zeros((), dtype=torch.long, device=self.device)
        self.val_total = 0

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        labels = batch.pop("labels")
        predicted = self.model(**batch).logits.argmax(dim=-1)
        self.val_correct += (predicted == labels).sum()
        self.val_total += labels.numel()

    def on_validation_epoch_end(self) -> None:
        accuracy = self.val_correct.float() / max(self.val_total, 1)
        self.log("val_accuracy", accuracy, prog_bar=True)

    def configure_optimizers(self):  # noqa: ANN201 (Lightning's own return type)
        decay, no_decay = [], []
        for name, parameter in self.model.named_parameters():
            (no_decay if any(part in name for part in NO_DECAY) else decay).append(parameter)
        optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": self.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=self.learning_rate,
            fused=self.device.type == "cuda",
        )
        total_steps = int(self.trainer.estimated_stepping_batches)
        scheduler = get_linear_schedule_with_warmup(
            optimizer, int(self.warmup_ratio * total_steps), total_steps
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }
