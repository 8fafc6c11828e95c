"""The one place seedvar reads Lightning's loop progress, checked against what happened."""

from __future__ import annotations

import datasets
import lightning as L
from transformers import BertConfig, BertForSequenceClassification

from seedvar.training.datamodule import NLIDataModule
from seedvar.training.module import NLIClassifier
from seedvar.training.resume import batches_done_in_epoch


class Record(L.Callback):
    """Before every training batch: Lightning's epoch, the batch index, and our reading."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int]] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:  # noqa: ANN001
        self.seen.append((trainer.current_epoch, batch_idx, batches_done_in_epoch(trainer)))


def test_batches_done_in_epoch_counts_the_finished_batches_of_the_current_epoch():
    rows = {"input_ids": [[101, 7, 102]] * 20, "labels": [0, 1, 2, 0] * 5}
    data = datasets.Dataset.from_dict(rows)
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=128,
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            intermediate_size=8,
            num_labels=3,
        )
    )
    record = Record()
    datamodule = NLIDataModule(data, data, 0, 8, 8, data_seed=0, group_by_length=False)
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=2,
        logger=False,
        callbacks=[record],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(NLIClassifier(model, 1e-3, 0.0, 0.0, total_steps=6), datamodule=datamodule)
    assert record.seen == [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 0), (1, 1, 1), (1, 2, 2)]
