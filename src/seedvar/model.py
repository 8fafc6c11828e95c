"""The LightningModule: a sequence classifier trained with AdamW and linear warmup/decay."""

from __future__ import annotations

import lightning as L
import torch
from transformers import PreTrainedModel, get_linear_schedule_with_warmup

NO_DECAY = ("bias", "LayerNorm.weight", "LayerNorm.bias", "layernorm", "layer_norm")


class NLIClassifier(L.LightningModule):
    """Fine-tunes `model`; reports validation accuracy once per epoch."""

    def __init__(
        self,
        model: PreTrainedModel,
        learning_rate: float,
        weight_decay: float,
        warmup_ratio: float,
    ) -> None:
        super().__init__()
        self.model = model
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.warmup_ratio = warmup_ratio
        self.val_correct = torch.zeros((), dtype=torch.long)
        self.val_total = 0

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
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
