"""GPU throughput of seedvar fine-tuning BERT-base (random weights: the hub is not needed).

Trains through seedvar's own `fine_tune` (Lightning, bf16 mixed precision, fused AdamW,
SDPA attention, length-grouped dynamically padded batches) on real MNLI pairs tokenized
with the bert-base-uncased vocabulary, at batch 32; with and without torch.compile. Reports
training examples/s, tokens/s (real tokens) and model FLOPs utilisation, projects one full
seed (392,702 examples x 3 epochs) and of the 100-seed study on 1 and on 8 GPUs, and measures
the gain from training several seeds at once on one GPU (one process per seed). MFU is
against this GPU's bf16 matmul peak measured here (benchmarks/peak.py), with the spec
sheet's dense bf16 peak beside it. Run by benchmarks/gpu.sh; writes
benchmarks/results/gpu.json. `--dry-run` checks the whole script on a CPU in minutes
(tiny model, few steps; the numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import datasets
import lightning as L
import torch
from peak import matmul_peak, model_flops_per_s, non_embedding_parameters
from transformers import BertConfig, BertForSequenceClassification

from seedvar.config import Config, load_config
from seedvar.data.sets import load_task_set
from seedvar.data.tokenized import tokenize_cached
from seedvar.pretrained import OFFLINE_MINILM, TINY_RANDOM, load_model, load_tokenizer
from seedvar.training.fit import fine_tune

REPO = Path(__file__).resolve().parents[1]
MNLI_TRAIN, EPOCHS, SEEDS, BATCH, WARMUP_STEPS = 392_702, 3, 100, 32, 10
SPEC_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12}  # dense bf16 tensor cores
GPUS_IN_A_NODE = 8


def wall_clock() -> float:
    """Seconds since the epoch, once the GPU has finished what it was given."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.time()


class StepClock(L.Callback):
    """Wall-clock times and real tokens from the end of the warm-up steps to the last step."""

    def __init__(self, warmup_steps: int) -> None:
        self.warmup_steps = warmup_steps
        self.tokens = 0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
        if trainer.global_step == self.warmup_steps:
            self.started = wall_clock()
        elif trainer.global_step > self.warmup_steps:
            self.tokens += int(batch["attention_mask"].sum())
            self.ended = wall_clock()


def random_bert(folder: Path, dry_run: bool) -> Path:
    """bert-base-uncased's architecture (or the tiny test model) with random weights and the
    bert-base-uncased vocabulary, saved as a local model folder seedvar can load."""
    tokenizer = load_tokenizer(OFFLINE_MINILM)
    labels = load_config(None).task.labels
    if dry_run:
        model = load_model(TINY_RANDOM, 0, labels)
    else:
        model = BertForSequenceClassification(BertConfig(vocab_size=len(tokenizer), num_labels=3))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def train_config(model_dir: Path, steps: int, compile_model: bool, dry_run: bool) -> Config:
    overrides = [
        f"model.name={model_dir}",
        f"train.batch_size={BATCH}",
        f"train.max_steps={steps + WARMUP_STEPS}",
        f"train.compile={compile_model}",
        f"train.accelerator={'cpu' if dry_run else 'gpu'}",
    ]
    return load_config(None, overrides, profile="paper")


def measure(
    model_dir: Path, train: datasets.Dataset, steps: int, compile_model: bool, dry_run: bool
) -> dict[str, float]:
    """Training throughput of one seed through seedvar's `fine_tune`."""
    config = train_config(model_dir, steps, compile_model, dry_run)
    clock = StepClock(WARMUP_STEPS)
    tokenized = {"train": train, "validation": train.select(range(BATCH))}
    model = fine_tune(config, tokenized, load_tokenizer(str(model_dir)).pad_token_id, [clock])
    seconds = clock.ended - clock.started
    return {
        "examples_per_s": steps * BATCH / seconds,
        "tokens_per_s": clock.tokens / seconds,
        "flops_per_s": model_flops_per_s(model, clock.tokens / seconds, "train"),
        "non_embedding_parameters": non_embedding_parameters(model),
        "started": clock.started,
        "ended": clock.ended,
    }


def one_of_several(
    model_dir: Path, data_dir: Path, steps: int, dry_run: bool, start: Barrier, results: Queue
) -> None:
    """One process of `seeds_at_once`: load, wait for the others, train."""
    train = datasets.load_from_disk(str(data_dir))
    start.wait()
    results.put(measure(model_dir, train, steps, False, dry_run))


def seeds_at_once(
    processes: int, model_dir: Path, data_dir: Path, steps: int, dry_run: bool
) -> list[dict[str, float]]:
    """Train `processes` seeds at the same time, one process each, started together."""
    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    start, results = context.Barrier(processes), context.Queue()
    children = [
        context.Process(
            target=one_of_several, args=(model_dir, data_dir, steps, dry_run, start, results)
        )
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    outputs = [results.get(timeout=1800) for _ in children]  # a crashed child: no hang
    for child in children:
        child.join()
    return outputs


def projection(examples_per_s: float) -> dict[str, float]:
    """Hours of training for one seed, and for the 100-seed study on 1 and on 8 GPUs at this
    throughput per GPU (seeds are independent: 8 GPUs take 13 rounds of 8 seeds)."""
    seed_hours = MNLI_TRAIN * EPOCHS / examples_per_s / 3600
    rounds_on_a_node = -(-SEEDS // GPUS_IN_A_NODE)
    return {
        "hours_per_seed": seed_hours,
        "hours_100_seeds": SEEDS * seed_hours,
        "hours_100_seeds_8_gpus": rounds_on_a_node * seed_hours,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--dry-run", action="store_true", help="check on CPU with a tiny model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = random_bert(Path(tmp) / "model", args.dry_run)
        config = load_config(None, profile="cpu")
        frame = load_task_set(config, str(REPO / "data/offline/mnli/train_sample.parquet"))
        frame = frame.sample(n=(args.steps + WARMUP_STEPS) * BATCH, random_state=0)
        tokenizer = load_tokenizer(str(model_dir))
        train = tokenize_cached(frame, tokenizer, 128, Path(tmp) / "cache", config.task.text)
        data_dir = Path(tmp) / "train"
        train.save_to_disk(str(data_dir))
        device = "cpu (dry run)" if args.dry_run else torch.cuda.get_device_name(0)
        spec_peak = next((v for k, v in SPEC_BF16_FLOPS.items() if k in device), None)
        dtype = torch.float32 if args.dry_run else torch.bfloat16
        peak = matmul_peak(dtype, "cpu" if args.dry_run else "cuda", 512 if args.dry_run else 8192)
        mean_tokens = sum(map(len, train["input_ids"])) / len(train)
        results: dict[str, object] = {
            "device": device,
            "batch": BATCH,
            "steps": args.steps,
            "mean_real_tokens_per_pair": mean_tokens,
            "peak_matmul_flops_per_s": peak,
            "spec_sheet_bf16_flops_per_s": spec_peak,
        }
        for label, compiled in (("eager", False), ("compiled", True)):
            measured = measure(model_dir, train, args.steps, compiled, args.dry_run)
            mfu = {
                "fraction_of_measured_peak": measured["flops_per_s"] / peak,
                "fraction_of_spec_peak": measured["flops_per_s"] / spec_peak if spec_peak else None,
            }
            results[label] = {**measured, **mfu, **projection(measured["examples_per_s"])}
        one = results["eager"]["examples_per_s"]
        for processes in args.processes:
            outputs = seeds_at_once(processes, model_dir, data_dir, args.steps, args.dry_run)
            # every seed's measured steps over the whole span: any stagger counts against it
            span = max(o["ended"] for o in outputs) - min(o["started"] for o in outputs)
            total = processes * args.steps * BATCH / span
            results[f"{processes}_seeds_at_once"] = {
                "examples_per_s_total": total,
                "gain_vs_one": total / one,
                "hours_100_seeds": projection(total)["hours_100_seeds"],
                "hours_100_seeds_8_gpus": projection(total)["hours_100_seeds_8_gpus"],
            }
    print(json.dumps(results, indent=2))
    if not args.dry_run:
        (REPO / "benchmarks" / "results" / "gpu.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
