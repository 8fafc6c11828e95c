"""GPU throughput of seedvar fine-tuning BERT-base (random weights: the hub is not needed).

Trains through seedvar's own `fine_tune` (Lightning, bf16 mixed precision, fused AdamW,
SDPA attention, length-grouped dynamically padded batches) on real MNLI pairs tokenized
with the bert-base-uncased vocabulary, at batch 32; with and without torch.compile. Reports
training examples/s, tokens/s (real tokens) and model FLOPs utilisation, projects one full
seed (392,702 examples x 3 epochs) and of the 100-seed study on 1 and on 8 GPUs. Then 1, 2, 4
and 8 seeds share the one GPU the way the main job spreads them (`seedvar launch` on a local
Ray, `ray.gpus_per_seed` = 1/k; real seeds of a reduced study: prepare once, train, evaluate,
MLflow): the total training throughput of the seeds while all of them train (from their
MLflow step timestamps), and the hours of the 100-seed study at k seeds per GPU. MFU is
against this GPU's bf16 matmul peak measured here (benchmarks/peak.py), with the spec
sheet's dense bf16 peak beside it. Run by benchmarks/gpu.sh; writes
benchmarks/results/gpu.json. `--dry-run` checks the whole script on a CPU in minutes
(tiny model, few steps; the numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import datasets
import lightning as L
import numpy as np
import torch
from mlflow.tracking import MlflowClient
from peak import matmul_peak, model_flops_per_s, non_embedding_parameters
from transformers import BertConfig, BertForSequenceClassification

from seedvar.config import Config, load_config
from seedvar.data.sets import load_task_set
from seedvar.data.tokenized import tokenize_cached
from seedvar.pretrained import OFFLINE_MINILM, TINY_RANDOM, load_model, load_tokenizer
from seedvar.training.fit import fine_tune

REPO = Path(__file__).resolve().parents[1]
MNLI_TRAIN, EPOCHS, SEEDS, BATCH, WARMUP_STEPS = 392_702, 3, 100, 32, 10
SHARING_STEPS, LOG_EVERY = 100, 5  # steps a seed trains when seeds share the GPU
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


def seedvar(*args: str) -> None:
    """Run a seedvar command; stop the benchmark with its output if it fails."""
    done = subprocess.run(
        [sys.executable, "-m", "seedvar.cli", *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"seedvar {args[0]} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


def sharing_recipe(model_dir: Path, work: Path, dry_run: bool) -> list[str]:
    """A reduced study of the random BERT on the offline MNLI pairs: every seed trains
    SHARING_STEPS steps after the warm-up and is evaluated on 64 pairs of each set."""
    steps = SHARING_STEPS + WARMUP_STEPS
    settings = {
        "model.name": model_dir,
        "train.accelerator": "cpu" if dry_run else "gpu",
        "train.precision": "32-true" if dry_run else "bf16-mixed",
        "train.batch_size": BATCH,
        "train.max_steps": steps,
        "train.log_every_n_steps": LOG_EVERY,
        "data.max_train_examples": steps * BATCH,
        "data.max_val_examples": BATCH,
        "data.max_eval_examples": 64,
        "tracking.uri": f"sqlite:///{work}/mlflow.db",
        "ray.cpus_per_seed": 1,
    }
    return ["--profile", "cpu", *[a for k, v in settings.items() for a in ("--set", f"{k}={v}")]]


def training_points(client: MlflowClient, seed_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """A seed's logged training steps after the warm-up and their wall-clock times (s)."""
    run_id = json.loads((seed_dir / "run.json").read_text())["run_id"]
    history = [m for m in client.get_metric_history(run_id, "train/loss") if m.step >= WARMUP_STEPS]
    history.sort(key=lambda m: m.step)
    return np.array([m.timestamp / 1000 for m in history]), np.array([m.step for m in history])


def seeds_sharing_one_gpu(k: int, recipe: list[str], work: Path, dry_run: bool) -> dict:
    """Train k seeds at once on one GPU through `seedvar launch` (ray.gpus_per_seed = 1/k;
    on a CPU dry run, one core each): their total examples/s over the span in which all k
    were training (steps inside it interpolated from each seed's logged steps)."""
    output = work / f"sharing-{k}"
    gpus = 0 if dry_run else 1 / k
    sharing = ["--set", f"seeds={list(range(k))}", "--set", f"output_dir={output}"]
    started = time.perf_counter()
    seedvar(
        "launch",
        "--prepared",
        str(work / "prepared"),
        *recipe,
        *sharing,
        "--set",
        f"ray.gpus_per_seed={gpus}",
    )
    launch_s = time.perf_counter() - started
    client = MlflowClient(f"sqlite:///{work}/mlflow.db")
    points = [training_points(client, output / f"seed-{seed}") for seed in range(k)]
    begin, end = max(t[0] for t, _ in points), min(t[-1] for t, _ in points)
    if end <= begin:
        raise SystemExit(f"{k} seeds did not train at the same time (Ray started them apart)")
    steps = sum(np.interp(end, t, s) - np.interp(begin, t, s) for t, s in points)
    total = steps * BATCH / (end - begin)
    return {"examples_per_s_total": total, "overlap_s": end - begin, "launch_s": launch_s}


def study_hours(examples_per_s_per_gpu: float, seeds_per_gpu: int, gpus: int) -> float:
    """Hours of training of the 100-seed study on `gpus` GPUs, `seeds_per_gpu` on each."""
    waves = math.ceil(SEEDS / (gpus * seeds_per_gpu))
    seed_hours = MNLI_TRAIN * EPOCHS / (examples_per_s_per_gpu / seeds_per_gpu) / 3600
    return waves * seed_hours


def projection(examples_per_s: float) -> dict[str, float]:
    """Hours of training for one seed, and for the 100-seed study on 1 and on 8 GPUs at this
    throughput per GPU (seeds are independent: 8 GPUs take 13 rounds of 8 seeds)."""
    return {
        "hours_per_seed": MNLI_TRAIN * EPOCHS / examples_per_s / 3600,
        "hours_100_seeds": study_hours(examples_per_s, 1, 1),
        "hours_100_seeds_8_gpus": study_hours(examples_per_s, 1, GPUS_IN_A_NODE),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sharing", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--dry-run", action="store_true", help="check on CPU with a tiny model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = random_bert(Path(tmp) / "model", args.dry_run)
        config = load_config(None, profile="cpu")
        frame = load_task_set(config, str(REPO / "data/offline/mnli/train_sample.parquet"))
        frame = frame.sample(n=(args.steps + WARMUP_STEPS) * BATCH, random_state=0)
        tokenizer = load_tokenizer(str(model_dir))
        train = tokenize_cached(frame, tokenizer, 128, Path(tmp) / "cache", config.task.text)
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
        recipe = sharing_recipe(model_dir, Path(tmp), args.dry_run)
        seedvar("prepare", *recipe, "--output", str(Path(tmp) / "prepared"))
        sharing = {
            k: seeds_sharing_one_gpu(k, recipe, Path(tmp), args.dry_run) for k in args.sharing
        }
        one = sharing[min(sharing)]["examples_per_s_total"]
        for k, measured in sharing.items():
            results[f"{k}_seeds_at_once"] = {
                **measured,
                "gain_vs_one": measured["examples_per_s_total"] / one,
                "hours_100_seeds": study_hours(measured["examples_per_s_total"], k, 1),
                "hours_100_seeds_8_gpus": study_hours(
                    measured["examples_per_s_total"], k, GPUS_IN_A_NODE
                ),
            }
    print(json.dumps(results, indent=2))
    if not args.dry_run:
        (REPO / "benchmarks" / "results" / "gpu.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
