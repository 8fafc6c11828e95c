"""Where and at which precision a seed trains and predicts."""

from __future__ import annotations

import platform

import torch

from seedvar.config import Config

AUTOCAST = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


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


def autocast_dtype(config: Config) -> torch.dtype | None:
    """The mixed-precision dtype for evaluation on a GPU, or None for full precision."""
    return AUTOCAST.get(resolve_precision(config)) if use_gpu(config) else None


def device_name(config: Config) -> str:
    """The accelerator a seed runs on, for its provenance."""
    if use_gpu(config):
        return torch.cuda.get_device_name(0)
    return f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"
