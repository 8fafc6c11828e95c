"""Logits of a model for every row of a tokenized set: sorted by length, padded per batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from seedvar import progress
from seedvar.interrupts import raise_if_lost
from seedvar.training.datamodule import PadToLongest

if TYPE_CHECKING:  # an annotation only: a GPU machine without datasets still predicts
    import datasets


@torch.inference_mode()
def predict_logits(
    model: PreTrainedModel,
    dataset: datasets.Dataset,
    pad_token_id: int,
    batch_size: int,
    description: str = "predicting",
    autocast: torch.dtype | None = None,
    forward: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None = None,
) -> np.ndarray:
    """Logits for every row of a tokenized set, in row order (batches grouped by length);
    `autocast`: a mixed-precision dtype to predict in (bf16 on CPUs that have it, bf16 or fp16
    on GPUs); `forward`: a batch's logits, (..., rows, labels), where not the model's own (K
    stacked seeds': (K, rows, labels), and so the result)."""
    logits_of = forward or (lambda batch: model(**batch).logits)
    model.eval()
    device = next(model.parameters()).device
    columns = {name: dataset[name] for name in dataset.column_names if name != "labels"}
    lengths = np.array([len(ids) for ids in columns["input_ids"]])
    order = np.argsort(-lengths, kind="stable")
    collate = PadToLongest(pad_token_id)
    outputs = []  # stay on the device: one copy to the host at the end, no sync per batch
    for start in tqdm(range(0, len(order), batch_size), desc=description, unit="batch"):
        raise_if_lost()
        progress.tick()
        rows = order[start : start + batch_size]
        batch = collate([{name: values[i] for name, values in columns.items()} for i in rows])
        batch = {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            outputs.append(logits_of(batch).float())
    if not outputs:
        return np.empty((len(dataset), int(model.config.num_labels or 0)), dtype=np.float32)
    found = torch.cat(outputs, dim=-2).cpu().numpy()
    logits = np.empty_like(found)
    logits[..., order, :] = found
    return logits
