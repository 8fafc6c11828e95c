"""K seeds' training batches side by side: each seed's batch from its own seeded order, padded as
its solo run pads it, then all to the longest of them, seed-major; or packed, each seed's real
tokens only (training/stacked.py's `Packing`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Sampler

from seedvar.training.datamodule import PadToLongest, ResumableLoader, SeededBatches
from seedvar.training.resume import batches_done_in_epoch
from seedvar.training.stacked import Packing

if TYPE_CHECKING:
    import datasets


@dataclass
class StackedBatch:
    """One step's batches of K seeds. Padded: `inputs` of K x B rows, seed-major, padded to the
    longest of all; packed: `inputs` of K rows laid out as `packing` says. `labels`: K x B;
    `lengths`: each seed's own padded length (its solo run's)."""

    inputs: dict[str, torch.Tensor]
    labels: torch.Tensor
    lengths: list[int]
    packing: Packing | None = None

    def pin_memory(self) -> StackedBatch:
        """Page-locked (the DataLoader's `pin_memory` calls this)."""
        return StackedBatch(
            {name: tensor.pin_memory() for name, tensor in self.inputs.items()},
            self.labels.pin_memory(),
            self.lengths,
            self.packing.pin_memory() if self.packing else None,
        )


@dataclass(frozen=True)
class PadEachSeed:
    """Collate the rows of `seeds` equal batches (seed-major) into a padded `StackedBatch`."""

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


@dataclass(frozen=True)
class PackEachSeed:
    """Collate the rows of `seeds` equal batches (seed-major) into a packed `StackedBatch`:
    input_ids, token_type_ids and position_ids of each seed's real tokens only."""

    pad_token_id: int
    seeds: int

    def __call__(self, rows: list[dict[str, Any]]) -> StackedBatch:
        size = len(rows) // self.seeds
        sizes = torch.tensor([len(row["input_ids"]) for row in rows])
        own_longest = sizes.view(self.seeds, size).amax(dim=1)  # each seed's padded length
        longest = int(own_longest.max())
        sequence = torch.repeat_interleave(torch.arange(len(rows)), sizes)  # each token's
        starts = sizes.cumsum(0) - sizes
        position = torch.arange(len(sequence)) - starts[sequence]
        seed = sequence // size
        tokens = sizes.view(self.seeds, size).sum(dim=1)
        seed_starts = tokens.cumsum(0) - tokens
        place = torch.arange(len(sequence)) - seed_starts[seed]

        def packed(values: torch.Tensor, fill: int) -> torch.Tensor:
            layout = torch.full((self.seeds, int(tokens.max())), fill, dtype=torch.long)
            layout[seed, place] = values
            return layout

        def joined(name: str) -> torch.Tensor:
            return torch.tensor(list(chain.from_iterable(row[name] for row in rows)))

        packing = Packing(
            solo=packed(sequence % size * own_longest[seed] + position, 0),
            padded=packed(sequence * longest + position, len(rows) * longest).flatten(),
            attention_mask=torch.arange(longest) < sizes.unsqueeze(1),
            firsts=(starts - seed_starts.repeat_interleave(size)).view(self.seeds, size),
        )
        inputs = {
            "input_ids": packed(joined("input_ids"), self.pad_token_id),
            "token_type_ids": packed(joined("token_type_ids"), 0),
            "position_ids": packed(position, 0),
        }
        labels = torch.tensor([row["labels"] for row in rows])
        return StackedBatch(inputs, labels, own_longest.tolist(), packing)


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
            if len({len(batch) for batch in batches}) > 1:  # batches grouped by length
                raise ValueError("stacked seeds need batches of one size at each step")
            yield [index for batch in batches for index in batch]


@dataclass(eq=False, repr=False)
class StackedDataModule(L.LightningDataModule):
    """Training batches of K seeds, seed k's in the order fixed by `data_seeds[k]` (as its solo
    run's `NLIDataModule`), padded or (`unpadded`) packed; validation batches in file order, the
    same for all seeds."""

    train: datasets.Dataset
    validation: datasets.Dataset
    pad_token_id: int
    batch_size: int
    eval_batch_size: int
    data_seeds: list[int]
    group_by_length: bool
    pin_memory: bool = False
    unpadded: bool = False  # packed batches: each seed's real tokens only

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
            collate_fn=(PackEachSeed if self.unpadded else PadEachSeed)(
                self.pad_token_id, len(self.data_seeds)
            ),
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
