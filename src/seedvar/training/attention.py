"""Attention without a host sync per step: transformers passes SDPA no padding mask where a
batch has no padding, found by `padding_mask.all()`, which the CPU waits for on every forward
pass (a GPU idles meanwhile). Here the mask is always built: without padding it masks nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

SDPA = "seedvar_sdpa"  # transformers' SDPA attention with `mask_without_sync`


def mask_without_sync(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """transformers' SDPA mask, never skipped on the strength of the mask's values."""
    return sdpa_mask(
        *args, **{**kwargs, "allow_is_causal_skip": False, "allow_is_bidirectional_skip": False}
    )


@contextmanager
def attention_as(model: PreTrainedModel, implementation: str) -> Iterator[None]:
    """Inside the block `model` uses attention `implementation`; it leaves with its own, as it
    came (and as it is saved)."""
    before = model.config._attn_implementation
    model.set_attn_implementation(implementation)
    try:
        yield
    finally:
        model.set_attn_implementation(before)


def attention_without_sync(model: PreTrainedModel) -> AbstractContextManager[None]:
    """Inside the block a model that uses SDPA attention uses `SDPA`."""
    return (
        attention_as(model, SDPA) if model.config._attn_implementation == "sdpa" else nullcontext()
    )


AttentionInterface.register(SDPA, sdpa_attention_forward)
AttentionMaskInterface.register(SDPA, mask_without_sync)
