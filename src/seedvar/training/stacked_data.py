"""K seeds' training batches side by side: each seed's batch from its own seeded order, padded as
its solo run pads it, then all to the longest of them, seed-major."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Sampler

from seedvar.training.datamodule import PadToLongest, ResumableLoader, SeededBatches
from seedvar.training.resume import batches_done_in_epoch

if TYPE_CHECKING:
    import datasets


@dataclass
class StackedBatch:
    """One step's batches of K seeds: `inputs` and `labels` of K x B rows, seed-major, padded to
    the longest of all; `lengths`: each seed's own padded length (its solo run's)."""

    inputs: dict[str, torch.Tensor]
    labels: torch.Tensor
    lengths: list[int]

    def pin_memory(self) -> StackedBatch:
        """Page-locked (the DataLoader's `pin_memory` calls this)."""
        inputs = {name: tensor.pin_memory() for name, tensor in self.inputs.items()}
        return StackedBatch(inputs, self.labels.pin_memory(), self.lengths)


@dataclass(frozen=True)
class PadEachSeed:
    """Collate the rows of `seeds` equal batches (seed-major) into a `StackedBatch`."""

    pad_token_id: int
    seeds: int

    def __call__(self, rows: list[dict[str, Any]]) -> StackedBatch:
        size = len(rows) // self.seeds
        collate = PadToLongest(self.pad_token_id)
        batches = [collate(rows[seed * size : (seed + 1) * size]) for seed in range(self.seeds)]
        lengths = [batch["input_ids"].shape[1] for batch in batches]
        longest = max(lengths)
        inputs = {
            name: torch.cat(
                [
                    F.pad(
                        batch[name],
                        (0, longest - batch[name].shape[1]),
                        value=self.pad_token_id if name == "input_ids" else 0,
                    )
                    for batch in batches
                ]
            )
            for name in batches[0]
            if name != "labels"
        }
        return StackedBatch(inputs, torch.cat([batch["labels"] for batch in batches]), lengths)


@dataclass(eq=False)
class StackedBatches(Sampler[list[int]]):
    """Each step's indices for K seeds: the step's batch of each seed's own order, concatenated
    in the orders' order; `skip` batches are left out once, as SeededBatches' are."""

    orders: list[SeededBatches]
    skip: int = field(default=0, init=False)

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at the start of every epoch."""
        for order in self.orders:
            order.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.orders[0])

    def __iter__(self) -> Iterator[list[int]]:
        for order in self.orders:
            order.skip = self.skip
        self.skip = 0
        for batches in zip(*self.orders, strict=True):
            yield [index for batch in batches for index in batch]


@dataclass(eq=False, repr=False)
class StackedDataModule(L.LightningDataModule):
    """Training batches of K seeds, seed k's in the order fixed by `data_seeds[k]` (as its solo
    run's `NLIDataModule`); validation batches in file order, the same for all seeds."""

    train: datasets.Dataset
    validation: datasets.Dataset
    pad_token_id: int
    batch_size: int
    eval_batch_size: int
    data_seeds: list[int]
    group_by_length: bool
    pin_memory: bool = False

    def __post_init__(self) -> None:
        super().__init__()

    def train_dataloader(self) -> DataLoader:
        lengths = [len(ids) for ids in self.train["input_ids"]]
        orders = [
            SeededBatches(lengths, self.batch_size, seed, self.group_by_length)
            for seed in self.data_seeds
        ]
        return ResumableLoader(
            self.train,
            batch_sampler=StackedBatches(orders),
            collate_fn=PadEachSeed(self.pad_token_id, len(self.data_seeds)),
            pin_memory=self.pin_memory,
            generator=torch.Generator(),  # not the global one (nothing here is random)
            batches_done=self._batches_done,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(
            self.validation,
            batch_size=self.eval_batch_size,
            collate_fn=PadToLongest(self.pad_token_id),
            pin_memory=self.pin_memory,
            generator=torch.Generator(),
        )

    def _batches_done(self) -> int:
        assert self.trainer is not None  # the training loader is built by a Trainer
        return batches_done_in_epoch(self.trainer)
