"""Levers for training speed on this machine, each against what seedvar did before it.

  AdamW step, fused vs foreach: the optimizer step alone on the offline MiniLM's parameters
  (fp32, as under bf16 mixed precision too: autocast keeps the weights and their gradients
  in fp32), with the paper's weight-decay groups. Before this lever seedvar used foreach
  AdamW under bf16 mixed precision (Lightning refused gradient clipping with a fused
  optimizer there); now it clips itself and steps fused at every precision but fp16.
  The ways alternate (foreach, fused, foreach, ...) for `--repeats` steps each after a
  warm-up; both start from the same weights and gradients, and the largest difference of the
  updated weights is reported.

  torch.compile with bucketed lengths: a whole training step (forward, backward, clipping,
  fused AdamW) on real length-grouped MNLI batches, eager with each batch padded to its
  longest pair, against the model compiled for static shapes with each batch padded up to a
  multiple of `BUCKET` tokens, so that shapes repeat and each bucket compiles once. The
  compile time is reported apart; steps alternate (eager, compiled, ...) after it.

  Lightning's per-step overheads: seedvar's `fine_tune` (a Lightning Trainer with seedvar's
  module, logging and progress bar) against a plain PyTorch loop doing the same arithmetic
  (forward, backward, clipping, fused AdamW, the schedule) over the same batches; the median
  time from the end of one step to the end of the next, the two taking turns.

Each way reports its median, so machine noise falls on both.

Usage:  python benchmarks/training_levers.py [--repeats 30]
        python benchmarks/training_levers.py --smoke DIR  (the tiny model, a few steps, into
        DIR; compiled by the aot_eager backend: inductor's code generation alone takes a
        minute on 2 cores)
Writes: benchmarks/results/training-levers-cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import datasets
import lightning as L
import smoke
import torch
from transformers import PreTrainedModel, get_linear_schedule_with_warmup

from seedvar.config import Config, load_config
from seedvar.data.sets import load_task_set
from seedvar.data.tokenized import tokenize_cached
from seedvar.pretrained import OFFLINE_MINILM, TINY_RANDOM, load_model, load_tokenizer
from seedvar.training.datamodule import NLIDataModule
from seedvar.training.device import cpu_description
from seedvar.training.fit import fine_tune
from seedvar.training.module import NO_DECAY

REPO = Path(__file__).resolve().parents[1]
BATCH, BUCKET = 32, 16


def adamw(parameters: list[torch.nn.Parameter], names: list[str], fused: bool) -> torch.optim.AdamW:
    """AdamW over `parameters` with seedvar's weight-decay groups (no decay: biases, norms)."""
    exempt = [any(part in name for part in NO_DECAY) for name in names]
    decay = [p for p, free in zip(parameters, exempt, strict=True) if not free]
    no_decay = [p for p, free in zip(parameters, exempt, strict=True) if free]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=2e-5, fused=fused, foreach=None if fused else True)


def optimizer_steps(repeats: int, model_name: str) -> dict[str, object]:
    """Seconds of one AdamW step on the model `model_name`, fused and foreach, interleaved; and
    how far they part."""
    model = fresh_model(model_name)
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


def recipe(steps: int, model_name: str) -> Config:
    """The cpu profile's recipe (fp32, length-grouped batches of 32) for `steps` steps of the
    model `model_name`."""
    overrides = [f"train.max_steps={steps}", f"train.batch_size={BATCH}", "train.precision=32-true"]
    return load_config(None, [*overrides, f"model.name={model_name}"], profile="cpu")


def real_pairs(examples: int, cache: Path, model_name: str) -> datasets.Dataset:
    """`examples` MNLI training pairs, tokenized as a study of `model_name` tokenizes them."""
    config = load_config(None, profile="cpu")
    frame = load_task_set(config, config.task.train).sample(n=examples, random_state=0)
    tokenizer = load_tokenizer(model_name)
    return tokenize_cached(frame, tokenizer, config.model.max_length, cache, config.task.text)


def training_batches(pairs: datasets.Dataset, model_name: str) -> Iterable[dict[str, torch.Tensor]]:
    """The batches a seed of `model_name` trains on: length-grouped, each padded to its
    longest pair."""
    module = NLIDataModule(
        pairs,
        pairs,  # validation: not used here
        load_tokenizer(model_name).pad_token_id,
        BATCH,
        BATCH,
        data_seed=0,
        group_by_length=True,
    )
    return module.train_dataloader()


def padded_up(batch: dict[str, torch.Tensor], multiple: int) -> dict[str, torch.Tensor]:
    """`batch` padded with masked-out positions up to a multiple of `multiple` tokens."""
    length = batch["input_ids"].shape[1]
    extra = math.ceil(length / multiple) * multiple - length
    return {
        name: values if name == "labels" else torch.nn.functional.pad(values, (0, extra))
        for name, values in batch.items()
    }


class Stepper:
    """One training step of a model as seedvar takes it: forward, backward, the gradients'
    norm clipped to 1, a fused AdamW step with seedvar's weight-decay groups, the schedule."""

    def __init__(self, model: PreTrainedModel, steps: int) -> None:
        self.model = model.train()
        names = [name for name, _ in model.named_parameters()]
        self.optimizer = adamw(list(model.parameters()), names, fused=True)
        self.schedule = get_linear_schedule_with_warmup(self.optimizer, steps // 10, steps)

    def __call__(self, batch: dict[str, torch.Tensor]) -> None:
        self.model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)


def fresh_model(model_name: str) -> PreTrainedModel:
    """The model `model_name` as a seed starts from it (init seed 0)."""
    return load_model(model_name, 0, load_config(None).task.labels)


def compile_with_buckets(
    pairs: datasets.Dataset, repeats: int, model_name: str, backend: str
) -> dict[str, object]:
    """Seconds of a training step of the model `model_name`, eager (padded to the longest) and
    compiled by `backend` for static shapes (padded up to a multiple of BUCKET), alternating;
    and the compile time."""
    batches = [
        b for b in training_batches(pairs, model_name) if 32 < b["input_ids"].shape[1] <= 64
    ][:6]
    eager, compiled = Stepper(fresh_model(model_name), 1000), Stepper(fresh_model(model_name), 1000)
    compiled.model.compile(dynamic=False, backend=backend)
    bucketed = [padded_up(batch, BUCKET) for batch in batches]
    started = time.perf_counter()
    for shape in {b["input_ids"].shape[1]: b for b in bucketed}.values():
        compiled(shape)  # one graph per bucket, compiled here
    compile_s = time.perf_counter() - started
    for batch in batches[:2]:
        eager(batch)
    seconds: dict[str, list[float]] = {"eager": [], "compiled_bucketed": []}
    for _ in range(repeats):
        for batch, padded in zip(batches, bucketed, strict=True):
            for way, step, data in (
                ("eager", eager, batch),
                ("compiled_bucketed", compiled, padded),
            ):
                started = time.perf_counter()
                step(data)
                seconds[way].append(time.perf_counter() - started)
    median = {way: statistics.median(times) for way, times in seconds.items()}
    return {
        "batch_lengths": [b["input_ids"].shape[1] for b in batches],
        "bucketed_lengths": [b["input_ids"].shape[1] for b in bucketed],
        "compile_s": compile_s,
        "median_step_s": median,
        "speedup": median["eager"] / median["compiled_bucketed"],
        "steps_each": repeats * len(batches),
    }


class StepClock(L.Callback):
    """The time of every training step's end."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_train_batch_end(self, *args: object) -> None:
        self.ends.append(time.perf_counter())


def step_gaps(ends: list[float]) -> list[float]:
    """Seconds from each step's end to the next's, leaving out the first two (warm-up)."""
    return [b - a for a, b in zip(ends[2:], ends[3:], strict=False)]


def lightning_overhead(pairs: datasets.Dataset, rounds: int, model_name: str) -> dict[str, object]:
    """Seconds a step of `model_name` takes in seedvar's Lightning fine-tune and in a plain loop
    over the same batches, the two taking turns for `rounds` rounds."""
    steps = len(pairs) // BATCH
    pad_id = load_tokenizer(model_name).pad_token_id
    gaps: dict[str, list[float]] = {"lightning": [], "plain_loop": []}
    for _ in range(rounds):
        clock = StepClock()
        fine_tune(
            recipe(steps, model_name),
            {"train": pairs, "validation": pairs.select(range(BATCH))},
            pad_id,
            callbacks=[clock],
        )
        gaps["lightning"] += step_gaps(clock.ends)
        L.seed_everything(0, verbose=False)
        step, ends = Stepper(fresh_model(model_name), steps), []
        for batch in training_batches(pairs, model_name):
            step(batch)
            ends.append(time.perf_counter())
        gaps["plain_loop"] += step_gaps(ends)
    median = {way: statistics.median(times) for way, times in gaps.items()}
    return {
        "median_step_s": median,
        "overhead_per_step_s": median["lightning"] - median["plain_loop"],
        "overhead_share": median["lightning"] / median["plain_loop"] - 1,
        "steps_each": len(gaps["lightning"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--compile-repeats", type=int, default=3)
    parser.add_argument("--lightning-steps", type=int, default=24)
    parser.add_argument("--lightning-rounds", type=int, default=2)
    smoke.add_option(parser)
    args = parser.parse_args()
    model_name, backend = OFFLINE_MINILM, "inductor"
    out = REPO / "benchmarks" / "results" / "training-levers-cpu.json"
    if args.smoke:
        args.repeats, args.compile_repeats, args.lightning_steps, args.lightning_rounds = 2, 1, 4, 1
        model_name, backend, out = TINY_RANDOM, "aot_eager", args.smoke / out.name
    with tempfile.TemporaryDirectory() as cache:
        pairs = real_pairs(max(args.lightning_steps, 40) * BATCH, Path(cache), model_name)
        results = {
            "cpu": cpu_description(),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "load_average_before": os.getloadavg(),
            "adamw_step": optimizer_steps(args.repeats, model_name),
            "compile_with_bucketed_lengths": compile_with_buckets(
                pairs, args.compile_repeats, model_name, backend
            ),
            "lightning_overhead": lightning_overhead(
                pairs.select(range(args.lightning_steps * BATCH)), args.lightning_rounds, model_name
            ),
            "load_average_after": os.getloadavg(),
        }
    print(json.dumps(results, indent=2))
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
