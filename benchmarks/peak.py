"""The machine's practical limit: matmul FLOP/s measured on it, and model FLOPs against it.

A large square matmul is the best case for any dense model's arithmetic, so its FLOP/s is
the practical peak a fine-tune can approach. Model FLOPs count the dense layers only:
6 x non-embedding parameters per real (unpadded) token to train, 2 x to predict; attention's
length-dependent term is left out, as in the usual model FLOPs utilisation (MFU).
"""

from __future__ import annotations

import time

import torch
from transformers import PreTrainedModel

FLOPS_PER_TOKEN = {"train": 6, "predict": 2}


def matmul_peak(dtype: torch.dtype, device: str = "cpu", size: int = 2048) -> float:
    """Best FLOP/s of `size` x `size` matmuls in `dtype` on `device` (5 timed repeats of 5)."""
    generator = torch.Generator(device).manual_seed(0)
    a, b = (torch.randn(size, size, device=device, dtype=dtype, generator=generator) for _ in "ab")
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(5):
        started = _synchronised_clock(device)
        for _ in range(5):
            a @ b
        best = min(best, (_synchronised_clock(device) - started) / 5)
    return 2 * size**3 / best


def _synchronised_clock(device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def non_embedding_parameters(model: PreTrainedModel) -> int:
    """Parameters outside the embedding tables: those a token's arithmetic goes through."""
    return sum(p.numel() for name, p in model.named_parameters() if "embeddings" not in name)


def model_flops_per_s(model: PreTrainedModel, tokens_per_s: float, phase: str) -> float:
    """Dense-layer FLOP/s of `model` at `tokens_per_s` real tokens; `phase`: train or predict."""
    return FLOPS_PER_TOKEN[phase] * non_embedding_parameters(model) * tokens_per_s
