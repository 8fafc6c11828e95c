"""Dropout with cheap masks on a CPU: `bit_dropout(model)` while a model trains there.

torch's CPU dropout draws one double per element (`bernoulli_`, one at a time), which on a
CPU with native bf16 takes about a quarter of a MiniLM training step; and with dropout on
its attention probabilities, scaled-dot-product attention falls back to its unfused math
path. Here each mask element is 16 random bits (four from one 64-bit draw), kept where they
are at least the threshold of the rate: the rate is that of the model to within 1/65,536
(0.1 becomes 0.100006), drawn from the same seeded generator, so a seed stays reproducible.
GPUs keep torch's own dropout, which is fused there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface

from seedvar.training.attention import attention_as, mask_without_sync

LEVELS = 1 << 16  # the values 16 random bits take
ATTENTION = "seedvar_bit_dropout"  # the attention implementation registered below


def keep_mask(
    shape: torch.Size, rate: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A boolean mask of `shape`, each element False with probability `rate` (to 1/65,536),
    drawn from `generator` (on its device) or else from torch's global one (on the CPU)."""
    count = shape.numel()
    device = generator.device if generator is not None else None
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=device)
    words.random_(-(2**63), 2**63 - 1, generator=generator)
    bits = words.view(torch.int16)[:count].view(shape)
    return bits >= round(rate * LEVELS) - LEVELS // 2


def dropped(tensor: torch.Tensor, rate: float) -> torch.Tensor:
    """`tensor` with elements zeroed at `rate` and the rest scaled by 1 / (1 - rate)."""
    if rate == 0.0:
        return tensor
    return tensor * (keep_mask(tensor.shape, rate).to(tensor.dtype) / (1 - rate))


class BitDropout(nn.Dropout):
    """nn.Dropout with masks from `keep_mask`."""

    def forward(self, tensor: torch.Tensor) -> torch.Tensor:
        return dropped(tensor, self.p) if self.training else tensor


def attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled-dot-product attention (transformers' sdpa where nothing is dropped); with
    dropout, its math path with the probabilities dropped by `dropped`."""
    if dropout == 0.0:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, **kwargs
        )
    return attention_dropped_by(
        lambda probabilities: dropped(probabilities, dropout),
        query,
        key,
        value,
        attention_mask,
        scaling,
    )


def attention_dropped_by(
    drop: Callable[[torch.Tensor], torch.Tensor],
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled-dot-product attention on its math path, the probabilities passed through `drop`."""
    scores = query @ key.transpose(2, 3) * (scaling or query.size(-1) ** -0.5)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    elif attention_mask is not None:
        scores = scores + attention_mask
    weights = drop(scores.softmax(dim=-1))
    return (weights @ value).transpose(1, 2).contiguous(), weights


AttentionInterface.register(ATTENTION, attention)
AttentionMaskInterface.register(ATTENTION, mask_without_sync)


@contextmanager
def bit_dropout(model: PreTrainedModel) -> Iterator[None]:
    """Train `model` with `BitDropout` and `attention` inside the block; it leaves with its
    own dropout modules and attention, as it came (and as it is saved)."""
    swapped = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Dropout
    ]
    for parent, name, child in swapped:
        setattr(parent, name, BitDropout(child.p))
    try:
        with attention_as(model, ATTENTION):
            yield
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)
