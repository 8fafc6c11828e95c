"""Throughput of seedvar against the Hugging Face Trainer as a careful user sets it up, and of
both against this machine's measured peak FLOP/s.

The peer is the strongest plain Trainer we know: dynamic padding (DataCollatorWithPadding),
length-grouped training batches (train_sampling_strategy="group_by_length") and fused AdamW;
Trainer.predict with dynamic padding at seedvar's evaluation batch size; the same precision.
The classic run_glue recipe (every pair padded to 128 tokens) stays as a second line. Same
machine, model (the offline MiniLM), real MNLI pairs, batch size, steps. Peer and seedvar
alternate (peer, seedvar, peer, seedvar, ...) for `--rounds` rounds and each reports its median,
so machine noise falls on both. Achieved model FLOP/s are given as a fraction of the matmul
peak measured here (benchmarks/peak.py) at the same precision. Predictions are compared with
the peer's at full precision: the share of identical labels and the largest logit difference.

On a CPU without native bf16 (where a bf16 step takes 20-30x an fp32 one) bf16 runs
fewer steps and predicts fewer pairs (`--slow-bf16-steps`, `--slow-bf16-eval-examples`).

Usage:  pip install -e '.[bench]' && python benchmarks/throughput.py [--rounds 2]
        [--eval-model runs/seed-0/model]  (a trained seed: agreement on a model trained for
        40 steps says little, its logits are too close to each other)
        python benchmarks/throughput.py --smoke DIR  (the tiny model, 2 steps, once, into DIR)
Writes: benchmarks/results/throughput-gpu.json, or on a CPU throughput-cpu-<capability>.json
        (avx2, avx512-bf16, ...: results of CPUs with and without native bf16 side by side)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import datasets
import lightning as L
import numpy as np
import pandas as pd
import smoke
import torch
from peak import matmul_peak, model_flops_per_s
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from seedvar.config import Config, load_config
from seedvar.data.sets import load_task_set
from seedvar.data.tokenized import tokenize_cached
from seedvar.pretrained import load_model, load_tokenizer
from seedvar.training.device import cpu_description, native_cpu_bf16
from seedvar.training.fit import fine_tune
from seedvar.training.predict import predict_logits

REPO = Path(__file__).resolve().parents[1]
MNLI = REPO / "data" / "offline" / "mnli"
PAPER = load_config(None, profile="cpu")  # the paper's task, its sets read offline
TASK = PAPER.task
MAX_LENGTH, BATCH = 128, 32
DTYPE = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16}
# the cpu profile's seeds whose memory is measured: one `seedvar train`, and a worker's 5
ONE_SEED = [
    "data.max_train_examples=320",
    "data.max_eval_examples=500",
    "data.max_val_examples=100",
]
WORKER_SEEDS = [
    "data.max_train_examples=320",
    "data.max_eval_examples=300",
    "data.max_val_examples=100",
]
T = TypeVar("T")


class LightningClock(L.Callback):
    """Seconds from the start of training to the end of the last training batch."""

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.started = time.perf_counter()

    def on_train_batch_end(self, *args: object) -> None:
        self.seconds = time.perf_counter() - self.started


class TrainerClock(TrainerCallback):
    """The same clock for the Hugging Face Trainer."""

    def on_train_begin(self, *args: object, **kwargs: object) -> None:
        self.started = time.perf_counter()

    def on_step_end(self, *args: object, **kwargs: object) -> None:
        self.seconds = time.perf_counter() - self.started


def real_tokens(dataset: datasets.Dataset) -> int:
    return int(sum(len(ids) for ids in dataset["input_ids"]))


def seedvar_config(steps: int, precision: str, more: list[str]) -> Config:
    """The cpu profile's recipe (length-grouped batches), with the settings `more`, for `steps`
    steps at `precision`."""
    overrides = [
        *more,
        f"train.max_steps={steps}",
        f"train.batch_size={BATCH}",
        f"model.max_length={MAX_LENGTH}",
        f"train.precision={precision}",
    ]
    return load_config(None, overrides, profile="cpu")


def seedvar_train(
    train: datasets.Dataset, pad_id: int, config: Config
) -> tuple[float, PreTrainedModel]:
    """Seconds for the configured steps through seedvar's own `fine_tune`; and the model."""
    clock = LightningClock()
    tokenized = {"train": train, "validation": train.select(range(BATCH))}
    model = fine_tune(config, tokenized, pad_id, callbacks=[clock])
    return clock.seconds, model


def peer_arguments(config: Config, workdir: str, careful: bool) -> TrainingArguments:
    """The Trainer's settings for seedvar's recipe; `careful`: length grouping, fused AdamW."""
    steps = config.train.max_steps
    assert steps is not None  # seedvar_config sets it
    return TrainingArguments(
        output_dir=workdir,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=config.train.eval_batch_size if careful else BATCH,
        max_steps=steps,
        learning_rate=config.train.learning_rate,
        weight_decay=config.train.weight_decay,
        warmup_steps=int(config.train.warmup_ratio * steps),
        max_grad_norm=config.train.gradient_clip,
        train_sampling_strategy="group_by_length" if careful else "random",
        optim="adamw_torch_fused" if careful else "adamw_torch",
        use_cpu=not torch.cuda.is_available(),
        bf16=config.train.precision == "bf16-mixed",
        bf16_full_eval=config.train.precision == "bf16-mixed",  # its bf16 alone predicts in fp32
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        seed=0,
    )


def peer_train(
    train: datasets.Dataset, collator: Callable, config: Config, workdir: str, careful: bool
) -> tuple[float, Trainer]:
    """Seconds for the same steps with the Hugging Face Trainer; and the Trainer."""
    clock = TrainerClock()
    trainer = Trainer(
        model=load_model(config.model.name, 0, TASK.labels),
        args=peer_arguments(config, workdir, careful),
        train_dataset=train,
        data_collator=collator,
        callbacks=[clock],
    )
    trainer.train()
    return clock.seconds, trainer


def timed(predict: Callable[..., T], *args: object, **kwargs: object) -> tuple[float, T]:
    """Seconds `predict(*args, **kwargs)` takes, and what it returns."""
    started = time.perf_counter()
    result = predict(*args, **kwargs)
    return time.perf_counter() - started, result


def peer_predictor(peer: Trainer, model: PreTrainedModel) -> Trainer:
    """A Trainer with `peer`'s settings that predicts with a copy of `model`'s weights (the
    peer's bf16 evaluation converts the model it is given), in dataset order: with
    group_by_length, transformers 5.24 groups the prediction batches too, and the predictions
    come back in that shuffled order, no longer matching the dataset's rows."""
    args = copy.copy(peer.args)
    args.train_sampling_strategy = "random"
    return Trainer(model=copy.deepcopy(model), args=args, data_collator=peer.data_collator)


def last_line_of_python(workdir: Path, *arguments: str) -> str:
    """Run `python *arguments` in a fresh folder that sees the repo's data; its last line."""
    workdir.mkdir()
    (workdir / "data").symlink_to(REPO / "data")
    done = subprocess.run(
        [sys.executable, *arguments], cwd=workdir, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def peak_memory_of_one_seed(workdir: Path, settings: list[str]) -> float:
    """Peak resident memory (MiB) of `seedvar train --profile cpu` with `settings`."""
    command = [sys.executable, "-m", "seedvar.cli", "train", "--profile", "cpu"]
    command += [arg for setting in settings for arg in ("--set", setting)]
    script = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    return int(last_line_of_python(workdir, "-c", script, *command)) / 1024


GROWTH_SCRIPT = """
import gc, json, sys
from seedvar.config import load_config
from seedvar.seeds.seed import run_seed
def rss_mib():
    line = next(l for l in open("/proc/self/status") if l.startswith("VmRSS"))
    return int(line.split()[1]) / 1024
after = []
for seed in range(int(sys.argv[1])):
    run_seed(load_config(None, [*sys.argv[2:], f"train.seed={seed}"], profile="cpu"))
    gc.collect()
    after.append(rss_mib())
print(json.dumps(after))
"""


def memory_over_seeds_in(workdir: Path, seeds: int, settings: list[str]) -> list[float]:
    """Resident memory (MiB) of one process after each of `seeds` seeds of the cpu profile
    with `settings`, as a worker runs them."""
    return json.loads(last_line_of_python(workdir, "-c", GROWTH_SCRIPT, str(seeds), *settings))


def tokenization(tokenizer, cache: Path, limit: int | None) -> dict[str, float]:  # noqa: ANN001
    """The study's three MNLI files (their first `limit` pairs) tokenized once, then loaded
    from the cache."""
    files = {
        "train": "train_sample",
        "validation_matched": "validation_matched",
        "validation_mismatched": "validation_mismatched",
    }
    frames = [
        load_task_set(PAPER, str(MNLI / f"{file}.parquet"))[:limit] for file in files.values()
    ]
    timings = []
    for _ in range(2):
        started = time.perf_counter()
        for frame in frames:
            tokenize_cached(frame, tokenizer, MAX_LENGTH, cache, TASK.text)
        timings.append(time.perf_counter() - started)
    return {
        "examples": sum(map(len, frames)),
        "first_s": timings[0],
        "cached_s": timings[1],
        "speedup": timings[0] / timings[1],
    }


def median_throughput(
    seconds: dict[str, list[float]], data: dict[str, datasets.Dataset]
) -> dict[str, dict[str, Any]]:
    """Median seconds of each variant over the rounds, as examples/s and real tokens/s of the
    data of its precision (the part after "@" in its name)."""
    out = {}
    for name, runs in seconds.items():
        median, rows = statistics.median(runs), data[name.rsplit("@", 1)[1]]
        out[name] = {
            "seconds": median,
            "seconds_each_round": runs,
            "examples": len(rows),
            "examples_per_s": len(rows) / median,
            "tokens_per_s": real_tokens(rows) / median,
        }
    return out


def result_file(gpu: bool) -> Path:
    """Where this machine's results go: one file for GPUs, one per CPU capability."""
    if gpu:
        return REPO / "benchmarks" / "results" / "throughput-gpu.json"
    capability = torch.backends.cpu.get_cpu_capability().lower()
    native = "-bf16" if native_cpu_bf16() else ""
    return REPO / "benchmarks" / "results" / f"throughput-cpu-{capability}{native}.json"


def with_peak_fraction(
    results: dict[str, dict[str, Any]], model: PreTrainedModel, phase: str, peaks: dict
) -> None:
    """Add achieved model FLOP/s and its fraction of the measured peak at the same precision."""
    for name, numbers in results.items():
        flops = model_flops_per_s(model, numbers["tokens_per_s"], phase)
        numbers["model_flops_per_s"] = flops
        numbers["fraction_of_peak"] = flops / peaks[name.rsplit("@", 1)[1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--eval-examples", type=int, default=2000)
    parser.add_argument("--eval-model", type=Path, help="a trained seed's model folder")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--slow-bf16-steps", type=int, default=4)
    parser.add_argument("--slow-bf16-eval-examples", type=int, default=256)
    smoke.add_option(parser)
    args = parser.parse_args()
    more: list[str] = []  # settings over the cpu profile's
    if args.smoke:  # the tiny model: 2 steps (1 at a slow bf16), 32 pairs predicted, once
        args.steps, args.rounds, args.eval_examples = 2, 1, 32
        args.slow_bf16_steps, args.slow_bf16_eval_examples = 1, 16
        more = smoke.SETTINGS
    frame = load_task_set(PAPER, str(MNLI / "train_sample.parquet")).sample(
        n=args.steps * BATCH, random_state=0
    )
    evaluation = load_task_set(PAPER, str(MNLI / "validation_matched.parquet"))
    evaluation = evaluation.head(args.eval_examples)
    gpu = torch.cuda.is_available()
    precisions = ["bf16-mixed"] if gpu else ["32-true", "bf16-mixed"]
    slow_bf16 = not gpu and not native_cpu_bf16()
    steps = {p: args.steps for p in precisions}
    eval_examples = {p: len(evaluation) for p in precisions}
    if slow_bf16:
        steps["bf16-mixed"] = args.slow_bf16_steps
        eval_examples["bf16-mixed"] = min(args.slow_bf16_eval_examples, len(evaluation))
    size = {p: 512 if slow_bf16 and p == "bf16-mixed" else 2048 for p in precisions}  # 20 s each
    if args.smoke:
        size = dict.fromkeys(precisions, 256)
    peaks = {p: matmul_peak(DTYPE[p], "cuda" if gpu else "cpu", size[p]) for p in precisions}
    configs = {p: seedvar_config(steps[p], p, more) for p in precisions}
    model_name = configs[precisions[0]].model.name
    tokenizer = load_tokenizer(model_name)
    pad_id = tokenizer.pad_token_id
    results: dict[str, object] = {
        "setup": {
            "machine": platform.machine(),
            "cpu": cpu_description(),
            "load_average_before": os.getloadavg(),
            "threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if gpu else None,
            "torch": torch.__version__,
            "model": model_name,
            "batch": BATCH,
            "eval_batch": configs[precisions[0]].train.eval_batch_size,
            "max_length": MAX_LENGTH,
            "train_steps": steps,
            "rounds": args.rounds,
            "eval_examples": eval_examples,
            "eval_model": str(args.eval_model or "the seedvar model trained here"),
        },
        "peak_matmul_flops_per_s": peaks,
    }

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        results["tokenization"] = tokenization(tokenizer, cache, 64 if args.smoke else None)

        def pad_all(rows: dict) -> dict:
            return tokenizer(
                rows["premise"],
                rows["hypothesis"],
                truncation=True,
                max_length=MAX_LENGTH,
                padding="max_length",
            )

        def padded(data: pd.DataFrame) -> datasets.Dataset:
            as_dataset = datasets.Dataset.from_pandas(data.rename(columns={"label": "labels"}))
            return as_dataset.map(pad_all, batched=True, remove_columns=["premise", "hypothesis"])

        train_all = tokenize_cached(frame, tokenizer, MAX_LENGTH, cache, TASK.text)
        eval_all = tokenize_cached(evaluation, tokenizer, MAX_LENGTH, cache, TASK.text)
        train_pad128_all, eval_pad128_all = padded(frame), padded(evaluation)
        train_of = {p: train_all.select(range(steps[p] * BATCH)) for p in precisions}
        eval_of = {p: eval_all.select(range(eval_examples[p])) for p in precisions}
        dynamic = DataCollatorWithPadding(tokenizer)
        fixed = DataCollatorWithPadding(tokenizer, padding="max_length", max_length=MAX_LENGTH)
        train_seconds: dict[str, list[float]] = defaultdict(list)
        eval_seconds: dict[str, list[float]] = defaultdict(list)
        logits: dict[str, np.ndarray] = {}
        model = (
            AutoModelForSequenceClassification.from_pretrained(args.eval_model)
            if args.eval_model
            else None  # the first model seedvar trains here
        )
        for _ in range(args.rounds):
            for precision in precisions:
                config, work = configs[precision], str(Path(tmp) / "hf")
                train, eval_tokens = train_of[precision], eval_of[precision]
                train_pad128 = train_pad128_all.select(range(len(train)))
                eval_pad128 = eval_pad128_all.select(range(len(eval_tokens)))
                peers: dict[str, tuple[Trainer, datasets.Dataset]] = {}
                if precision == "32-true":
                    seconds, peer = peer_train(train_pad128, fixed, config, work, careful=False)
                    train_seconds[f"peer_trainer_pad128@{precision}"].append(seconds)
                    peers[f"peer_trainer_pad128@{precision}"] = peer, eval_pad128
                seconds, peer = peer_train(train, dynamic, config, work, careful=True)
                train_seconds[f"peer_trainer_careful@{precision}"].append(seconds)
                peers[f"peer_trainer_careful@{precision}"] = peer, eval_tokens
                seconds, ours = seedvar_train(train, pad_id, config)
                train_seconds[f"seedvar@{precision}"].append(seconds)
                model = model or ours  # every variant predicts with the same weights
                for name, (peer, evaluated) in peers.items():
                    seconds, output = timed(peer_predictor(peer, model).predict, evaluated)
                    assert isinstance(output.predictions, np.ndarray)  # the logits alone
                    logits[name] = output.predictions
                    eval_seconds[name].append(seconds)
                autocast = DTYPE[precision] if precision != "32-true" else None
                seconds, logits[f"seedvar@{precision}"] = timed(
                    predict_logits,
                    model,
                    eval_tokens,
                    pad_id,
                    config.train.eval_batch_size,
                    autocast=autocast,
                )
                eval_seconds[f"seedvar@{precision}"].append(seconds)
        assert model is not None  # trained in the first round if not given
        throughput = {
            "train": median_throughput(train_seconds, train_of),
            "eval": median_throughput(eval_seconds, eval_of),
        }
        with_peak_fraction(throughput["train"], model, "train", peaks)
        with_peak_fraction(throughput["eval"], model, "predict", peaks)
        results.update(throughput)
        results["ratios_vs_careful_peer"] = {
            phase: {
                precision: rates[f"peer_trainer_careful@{precision}"]["seconds"]
                / rates[f"seedvar@{precision}"]["seconds"]
                for precision in precisions
            }
            for phase, rates in throughput.items()
        }
        reference = logits[f"peer_trainer_careful@{precisions[0]}"]
        results["eval_agreement_with_careful_peer_at_" + precisions[0]] = {
            name: {  # on the pairs both predicted (fewer at a slow bf16)
                "same_label": float(
                    np.mean(values.argmax(1) == reference[: len(values)].argmax(1))
                ),
                "max_abs_logit_difference": float(np.abs(values - reference[: len(values)]).max()),
            }
            for name, values in logits.items()
        }
        if not args.skip_memory:
            seeds = 2 if args.smoke else 5
            after_each = memory_over_seeds_in(Path(tmp) / "growth", seeds, [*WORKER_SEEDS, *more])
            one_seed = peak_memory_of_one_seed(Path(tmp) / "one-seed", [*ONE_SEED, *more])
            results["memory"] = {
                "peak_rss_one_seed_mib": one_seed,
                f"worker_rss_after_each_of_{seeds}_seeds_mib": after_each,
                f"growth_after_{seeds}_vs_after_1": after_each[-1] / after_each[0] - 1,
            }

    out = result_file(gpu)
    if args.smoke:
        out = args.smoke / out.name
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    for rates in throughput.values():
        table = pd.DataFrame(rates).T.drop(columns="seconds_each_round")
        print(table.astype(float).round(4).to_string())
    print(json.dumps({k: results[k] for k in results if k not in ("train", "eval")}, indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
