"""The LightningDataModule: seeded shuffling, dynamic padding per batch."""

from __future__ import annotations

from typing import Any

import datasets
import lightning as L
import torch
from torch.utils.data import DataLoader


class PadToLongest:
    """Collate token-id lists into tensors padded to the longest row of the batch."""

    def __init__(self, pad_token_id: int) -> None:
        self.pad_token_id = pad_token_id

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        longest = max(len(row["input_ids"]) for row in rows)
        batch: dict[str, torch.Tensor] = {}
        for name in rows[0]:
            if name == "labels":
                batch[name] = torch.tensor([row[name] for row in rows], dtype=torch.long)
                continue
            fill = self.pad_token_id if name == "input_ids" else 0
            padded = torch.full((len(rows), longest), fill, dtype=torch.long)
            for i, row in enumerate(rows):
                padded[i, : len(row[name])] = torch.tensor(row[name], dtype=torch.long)
            batch[name] = padded
        return batch


class NLIDataModule(L.LightningDataModule):
    """Training batches in an order fixed by `data_seed`; validation batches in file order."""

    def __init__(
        self,
        train: datasets.Dataset,
        validation: datasets.Dataset,
        pad_token_id: int,
        batch_size: int,
        eval_batch_size: int,
        data_seed: int,
    ) -> None:
        super().__init__()
        self.train = train
        self.validation = validation
        self.collate = PadToLongest(pad_token_id)
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.data_seed = data_seed

    def train_dataloader(self) -> DataLoader:
        order = torch.Generator().manual_seed(self.data_seed)
        return DataLoader(
            self.train,
            batch_size=self.batch_size,
            shuffle=True,
            generator=order,
            collate_fn=self.collate,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.validation, batch_size=self.eval_batch_size, collate_fn=self.collate)
