"""The LightningDataModule: seeded shuffling, dynamic padding per batch, mid-epoch resume."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import lightning as L
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Sampler

from seedvar.training.resume import batches_done_in_epoch

if TYPE_CHECKING:  # any sized, indexable set of examples will do (benchmarks/gpu.py: a list)
    import datasets


@dataclass(frozen=True)
class PadToLongest:
    """Collate token-id lists into tensors padded to the longest row of the batch."""

    pad_token_id: int

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch: dict[str, torch.Tensor] = {}
        for name in rows[0]:
            if name == "labels":
                batch[name] = torch.tensor([row[name] for row in rows], dtype=torch.long)
                continue
            fill = self.pad_token_id if name == "input_ids" else 0
            values = [torch.tensor(row[name], dtype=torch.long) for row in rows]
            batch[name] = pad_sequence(values, batch_first=True, padding_value=fill)
        return batch


@dataclass(eq=False)  # compared, hashed as itself
class SeededBatches(Sampler[list[int]]):
    """The training batches of one epoch, fixed by `seed` and the epoch number.

    Plain: a seeded shuffle cut into batches. Grouped by length (less padding to compute):
    sort each window of `window` batches of the shuffle by length, cut it into batches, then
    shuffle the batch order. `skip` batches are left out once, to resume mid-epoch.
    """

    lengths: list[int]
    batch_size: int
    seed: int
    group_by_length: bool
    window: int = 50
    epoch: int = field(default=0, init=False)
    skip: int = field(default=0, init=False)

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at the start of every epoch."""
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        shuffled = torch.randperm(len(self.lengths), generator=generator).tolist()
        if self.group_by_length:
            span = self.batch_size * self.window
            windows = [
                sorted(shuffled[start : start + span], key=lambda i: -self.lengths[i])
                for start in range(0, len(shuffled), span)
            ]
            batches = [batch for window in windows for batch in self._cut(window)]
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator)]
        else:
            batches = self._cut(shuffled)
        skip, self.skip = self.skip, 0
        yield from batches[skip:]

    def _cut(self, indices: list[int]) -> list[list[int]]:
        return [indices[i : i + self.batch_size] for i in range(0, len(indices), self.batch_size)]


class SkippableBatches(Protocol):
    """Batches of indices whose first `skip` batches are left out once (to resume mid-epoch)."""

    skip: int

    def __iter__(self) -> Iterator[list[int]]: ...


class ResumableLoader(DataLoader):
    """A DataLoader that Lightning can resume mid-epoch (its `state_dict` interface): the state
    is how many batches of the epoch training has finished; restoring it skips them once."""

    def __init__(
        self,
        dataset: datasets.Dataset,
        *,
        batch_sampler: SkippableBatches,
        batches_done: Callable[[], int],
        **kwargs: Any,
    ) -> None:
        super().__init__(dataset, batch_sampler=batch_sampler, **kwargs)
        self.batches = batch_sampler
        self.batches_done = batches_done

    def state_dict(self) -> dict[str, int]:
        return {"batches_done": self.batches_done()}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.batches.skip = state["batches_done"]


@dataclass(eq=False, repr=False)
class NLIDataModule(L.LightningDataModule):
    """Training batches in an order fixed by `data_seed`; validation batches in file order."""

    train: datasets.Dataset
    validation: datasets.Dataset
    pad_token_id: int
    batch_size: int
    eval_batch_size: int
    data_seed: int
    group_by_length: bool
    pin_memory: bool = False  # page-locked batches copy to a GPU without blocking

    def __post_init__(self) -> None:
        super().__init__()
        self.collate = PadToLongest(self.pad_token_id)

    def train_dataloader(self) -> DataLoader:
        lengths = [len(ids) for ids in self.train["input_ids"]]
        batches = SeededBatches(lengths, self.batch_size, self.data_seed, self.group_by_length)
        return ResumableLoader(
            self.train,
            batch_sampler=batches,
            collate_fn=self.collate,
            pin_memory=self.pin_memory,
            generator=self._own_generator(),
            batches_done=self._batches_done,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(
            self.validation,
            batch_size=self.eval_batch_size,
            collate_fn=self.collate,
            pin_memory=self.pin_memory,
            generator=self._own_generator(),
        )

    def _batches_done(self) -> int:
        assert self.trainer is not None  # the training loader is built by a Trainer
        return batches_done_in_epoch(self.trainer)

    def _own_generator(self) -> torch.Generator:
        """Each new DataLoader iterator draws a seed from its generator; with one of its own it
        leaves the global RNG (dropout) alone, so a resumed run draws the same dropout masks."""
        return torch.Generator().manual_seed(self.data_seed)
