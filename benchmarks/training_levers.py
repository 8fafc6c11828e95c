"""Levers for training speed on this machine, each against what seedvar did before it.

  AdamW step, fused vs foreach: the optimizer step alone on the offline MiniLM's parameters
  (fp32, as under bf16 mixed precision too: autocast keeps the weights and their gradients
  in fp32), with the paper's weight-decay groups. Before this lever seedvar used foreach
  AdamW under bf16 mixed precision (Lightning refused gradient clipping with a fused
  optimizer there); now it clips itself and steps fused at every precision but fp16.

The ways alternate (foreach, fused, foreach, ...) for `--repeats` steps each after a warm-up,
and each reports its median, so machine noise falls on both. Both ways start from the same
weights and gradients, and the largest difference of the updated weights is reported.

Usage:  python benchmarks/training_levers.py [--repeats 30]
Writes: benchmarks/results/training-levers-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from seedvar.config import load_config
from seedvar.pretrained import OFFLINE_MINILM, load_model
from seedvar.training.device import cpu_description
from seedvar.training.module import NO_DECAY

REPO = Path(__file__).resolve().parents[1]


def adamw(parameters: list[torch.nn.Parameter], names: list[str], fused: bool) -> torch.optim.AdamW:
    """AdamW over `parameters` with seedvar's weight-decay groups (no decay: biases, norms)."""
    exempt = [any(part in name for part in NO_DECAY) for name in names]
    decay = [p for p, free in zip(parameters, exempt, strict=True) if not free]
    no_decay = [p for p, free in zip(parameters, exempt, strict=True) if free]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=2e-5, fused=fused, foreach=None if fused else True)


def optimizer_steps(repeats: int) -> dict[str, object]:
    """Seconds of one AdamW step, fused and foreach, interleaved; and how far they part."""
    model = load_model(OFFLINE_MINILM, 0, load_config(None).task.labels)
    names = [name for name, _ in model.named_parameters()]
    generator = torch.Generator().manual_seed(0)
    grads = [torch.randn(p.shape, generator=generator) * 1e-3 for p in model.parameters()]
    ways = {}
    for fused in (False, True):
        parameters = [torch.nn.Parameter(p.detach().clone()) for p in model.parameters()]
        for parameter, grad in zip(parameters, grads, strict=True):
            parameter.grad = grad.clone()
        ways["fused" if fused else "foreach"] = (parameters, adamw(parameters, names, fused))
    for _, optimizer in ways.values():  # warm-up: the optimizer states exist from here on
        optimizer.step()
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(repeats):
        for way, (_, optimizer) in ways.items():
            started = time.perf_counter()
            optimizer.step()
            seconds[way].append(time.perf_counter() - started)
    median = {way: statistics.median(times) for way, times in seconds.items()}
    apart = max(
        float((a - b).abs().max())
        for a, b in zip(ways["foreach"][0], ways["fused"][0], strict=True)
    )
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "median_step_s": median,
        "speedup": median["foreach"] / median["fused"],
        "largest_weight_difference_after_all_steps": apart,
        "steps_each": repeats + 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    results = {
        "cpu": cpu_description(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "load_average_before": os.getloadavg(),
        "adamw_step": optimizer_steps(args.repeats),
        "load_average_after": os.getloadavg(),
    }
    print(json.dumps(results, indent=2))
    out = REPO / "benchmarks" / "results" / "training-levers-cpu.json"
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
