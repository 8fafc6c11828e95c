"""Where and at which precision a seed trains and predicts."""

from __future__ import annotations

import platform

import torch

from seedvar.config import Config

AUTOCAST = {"32": None, "bf16": torch.bfloat16, "16": torch.float16}


def use_gpu(config: Config) -> bool:
    """True when a GPU is present and the config does not ask for the CPU."""
    return config.train.accelerator != "cpu" and torch.cuda.is_available()


def resolve_precision(config: Config) -> str:
    """bf16-mixed on GPUs that support it, 16-mixed on older GPUs, 32-true on CPU."""
    if config.train.precision != "auto":
        return config.train.precision
    if use_gpu(config):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


def evaluation_device(config: Config) -> torch.device:
    """The device evaluation runs on (Lightning hands the model back on the CPU)."""
    return torch.device("cuda") if use_gpu(config) else torch.device("cpu")


def resolve_eval_precision(config: Config) -> str:
    """`train.eval_precision` made concrete: "auto" is the training's mixed precision on a GPU,
    bf16 on a CPU that computes it natively (avx512_bf16 or AMX), else 32."""
    if config.train.eval_precision != "auto":
        return config.train.eval_precision
    if use_gpu(config):
        return {"bf16-mixed": "bf16", "16-mixed": "16"}.get(resolve_precision(config), "32")
    return "bf16" if native_cpu_bf16() else "32"


def native_cpu_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (x86 avx512_bf16 or AMX tiles)."""
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def autocast_dtype(config: Config) -> torch.dtype | None:
    """The autocast dtype evaluation runs under, or None for full precision."""
    return AUTOCAST[resolve_eval_precision(config)]


def device_name(config: Config) -> str:
    """The accelerator a seed runs on, for its provenance."""
    if use_gpu(config):
        return torch.cuda.get_device_name(0)
    return f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"
