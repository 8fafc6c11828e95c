"""Training and evaluation throughput: seedvar against a plain Hugging Face Trainer baseline.

Side by side in one run, on the same machine, model, data, batch size, max length,
precision and number of steps. The baseline is the classic run_glue recipe: every pair
padded to max length, a Trainer with random batches, Trainer.predict for evaluation.
seedvar trains through its own `fine_tune` (the Lightning Trainer every seed uses), and
each of its speed-ups is measured on its own:

  train: baseline (pad to 128) -> dynamic padding -> dynamic padding + length-grouped batches
  eval:  baseline Trainer.predict (pad to 128) -> sorted by length + dynamic padding (no_grad)
         -> + inference_mode -> + the profile's larger evaluation batch
  tokenization: the study's sets tokenized once vs loaded from the cache later seeds reuse
  memory: peak resident memory of one seed; a worker's memory over 5 seeds in one process

Usage:  pip install -e '.[bench]' && python benchmarks/throughput.py [--steps 40]
Writes: benchmarks/results/throughput-<cpu|gpu>.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import datasets
import lightning as L
import numpy as np
import pandas as pd
import torch
from transformers import PreTrainedModel, Trainer, TrainerCallback, TrainingArguments

from seedvar.config import Config, load_config
from seedvar.data.mnli import load_mnli
from seedvar.data.tokenized import tokenize_cached
from seedvar.pretrained import OFFLINE_MINILM, load_model, load_tokenizer
from seedvar.training.device import resolve_precision
from seedvar.training.fit import fine_tune
from seedvar.training.predict import predict_logits

REPO = Path(__file__).resolve().parents[1]
MNLI = REPO / "data" / "offline" / "mnli"
MAX_LENGTH, BATCH = 128, 32
EVAL_BATCH = BATCH  # the baseline predicts at its training batch size


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


def seedvar_config(steps: int, group_by_length: bool) -> Config:
    overrides = [
        f"train.max_steps={steps}",
        f"train.batch_size={BATCH}",
        f"model.max_length={MAX_LENGTH}",
        f"train.group_by_length={group_by_length}",
    ]
    return load_config(None, overrides, profile="cpu")


def seedvar_train(tokenized: dict[str, datasets.Dataset], pad_id: int, config: Config) -> float:
    """Seconds for the configured steps through seedvar's own `fine_tune`."""
    clock = LightningClock()
    fine_tune(config, tokenized, pad_id, callbacks=[clock])
    return clock.seconds


def baseline_train(padded: datasets.Dataset, config: Config, workdir: str) -> tuple[float, Trainer]:
    """Seconds for the same steps with a Trainer on pad-to-128 batches; and the Trainer."""
    args = TrainingArguments(
        output_dir=workdir,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=EVAL_BATCH,
        max_steps=config.train.max_steps,
        learning_rate=config.train.learning_rate,
        weight_decay=config.train.weight_decay,
        warmup_steps=int(config.train.warmup_ratio * config.train.max_steps),
        use_cpu=not torch.cuda.is_available(),
        bf16=resolve_precision(config) == "bf16-mixed",
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    clock = TrainerClock()
    trainer = Trainer(
        model=load_model(OFFLINE_MINILM, 0), args=args, train_dataset=padded, callbacks=[clock]
    )
    trainer.train()
    return clock.seconds, trainer


def timed_predictions(
    model: PreTrainedModel, tokens: datasets.Dataset, pad_id: int, batch: int, inference_mode: bool
) -> tuple[float, np.ndarray]:
    """seedvar's evaluation; without inference_mode it runs under plain no_grad."""
    predict = predict_logits if inference_mode else predict_logits.__wrapped__
    started = time.perf_counter()
    with torch.no_grad():
        logits = predict(model, tokens, pad_id, batch)
    return time.perf_counter() - started, logits


def last_line_of_python(workdir: Path, *arguments: str) -> str:
    """Run `python *arguments` in a fresh folder that sees the repo's data; its last line."""
    workdir.mkdir()
    (workdir / "data").symlink_to(REPO / "data")
    done = subprocess.run(
        [sys.executable, *arguments], cwd=workdir, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def peak_memory_of_one_seed(workdir: Path) -> float:
    """Peak resident memory (MiB) of `seedvar train --profile cpu` on a short run."""
    command = [
        sys.executable,
        "-m",
        "seedvar.cli",
        "train",
        "--profile",
        "cpu",
        "--set",
        "data.max_train_examples=320",
        "--set",
        "data.max_eval_examples=500",
        "--set",
        "data.max_val_examples=100",
    ]
    script = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    return int(last_line_of_python(workdir, "-c", script, *command)) / 1024


GROWTH_SCRIPT = """
import gc, json
from seedvar.config import load_config
from seedvar.study.seed import run_seed
def rss_mib():
    line = next(l for l in open("/proc/self/status") if l.startswith("VmRSS"))
    return int(line.split()[1]) / 1024
after = []
for seed in range(5):
    run_seed(load_config(None, [f"train.seed={seed}", "data.max_train_examples=320",
             "data.max_eval_examples=300", "data.max_val_examples=100"], profile="cpu"))
    gc.collect()
    after.append(rss_mib())
print(json.dumps(after))
"""


def memory_over_seeds_in(workdir: Path) -> list[float]:
    """Resident memory (MiB) of one process after each of 5 seeds, as a worker runs them."""
    return json.loads(last_line_of_python(workdir, "-c", GROWTH_SCRIPT))


def tokenization(tokenizer, cache: Path) -> dict[str, float]:  # noqa: ANN001
    """The study's three MNLI files tokenized once, then loaded from the cache."""
    files = {
        "train": "train_sample",
        "validation_matched": "validation_matched",
        "validation_mismatched": "validation_mismatched",
    }
    frames = [load_mnli(str(MNLI / f"{file}.parquet"), split) for split, file in files.items()]
    timings = []
    for _ in range(2):
        started = time.perf_counter()
        for frame in frames:
            tokenize_cached(frame, tokenizer, MAX_LENGTH, cache)
        timings.append(time.perf_counter() - started)
    return {
        "examples": sum(map(len, frames)),
        "first_s": timings[0],
        "cached_s": timings[1],
        "speedup": timings[0] / timings[1],
    }


def throughput(seconds: dict[str, float], examples: int, tokens: int) -> dict[str, dict]:
    return {
        name: {"seconds": s, "examples_per_s": examples / s, "tokens_per_s": tokens / s}
        for name, s in seconds.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-examples", type=int, default=2000)
    args = parser.parse_args()
    tokenizer = load_tokenizer(OFFLINE_MINILM)
    pad_id = tokenizer.pad_token_id
    frame = load_mnli(str(MNLI / "train_sample.parquet"), "train").sample(
        n=args.steps * BATCH, random_state=0
    )
    evaluation = load_mnli(str(MNLI / "validation_matched.parquet"), "validation_matched")
    evaluation = evaluation.head(args.eval_examples)
    grouped = seedvar_config(args.steps, group_by_length=True)
    results: dict[str, object] = {
        "setup": {
            "machine": platform.machine(),
            "threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__,
            "model": "all-MiniLM-L6-v2 (offline)",
            "batch": BATCH,
            "eval_batch_baseline": EVAL_BATCH,
            "eval_batch_seedvar": grouped.train.eval_batch_size,
            "max_length": MAX_LENGTH,
            "train_steps": args.steps,
            "eval_examples": len(evaluation),
            "precision": resolve_precision(grouped),
        }
    }

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        results["tokenization"] = tokenization(tokenizer, cache)

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

        train = tokenize_cached(frame, tokenizer, MAX_LENGTH, cache)
        tokenized = {"train": train, "validation": train.select(range(BATCH))}
        baseline_s, trainer = baseline_train(padded(frame), grouped, str(Path(tmp) / "hf"))
        seconds = {
            "baseline_hf_trainer_pad128": baseline_s,
            "seedvar_dynamic_padding": seedvar_train(
                tokenized, pad_id, seedvar_config(args.steps, group_by_length=False)
            ),
            "seedvar_dynamic_padding_length_grouped": seedvar_train(tokenized, pad_id, grouped),
        }
        results["train"] = throughput(seconds, len(frame), real_tokens(train))
        results["train_ratios"] = {name: baseline_s / s for name, s in seconds.items()}

        eval_tokens = tokenize_cached(evaluation, tokenizer, MAX_LENGTH, cache)
        started = time.perf_counter()
        baseline_logits = trainer.predict(padded(evaluation)).predictions
        model = trainer.model
        seconds = {"baseline_hf_trainer_predict_pad128": time.perf_counter() - started}
        variants = (
            ("seedvar_sorted_dynamic_padding_no_grad", EVAL_BATCH, False),
            ("seedvar_sorted_inference_mode", EVAL_BATCH, True),
            ("seedvar_sorted_inference_mode_large_batch", grouped.train.eval_batch_size, True),
        )
        agreement = {}
        for name, batch, inference_mode in variants:
            seconds[name], logits = timed_predictions(
                model, eval_tokens, pad_id, batch, inference_mode
            )
            agreement[name] = float(np.mean(logits.argmax(1) == baseline_logits.argmax(1)))
        results["eval"] = throughput(seconds, len(evaluation), real_tokens(eval_tokens))
        base = seconds["baseline_hf_trainer_predict_pad128"]
        results["eval_ratios"] = {name: base / s for name, s in seconds.items()}
        results["eval_same_predictions_as_baseline"] = agreement

        after_each = memory_over_seeds_in(Path(tmp) / "growth")
        results["memory"] = {
            "peak_rss_one_seed_mib": peak_memory_of_one_seed(Path(tmp) / "one-seed"),
            "worker_rss_after_each_of_5_seeds_mib": after_each,
            "growth_after_5_vs_after_1": after_each[-1] / after_each[0] - 1,
        }

    device = "gpu" if torch.cuda.is_available() else "cpu"
    out = REPO / "benchmarks" / "results" / f"throughput-{device}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(pd.DataFrame(results["train"]).T.round(2).to_string())
    print(pd.DataFrame(results["eval"]).T.round(2).to_string())
    headline = (
        "train_ratios",
        "eval_ratios",
        "eval_same_predictions_as_baseline",
        "tokenization",
        "memory",
    )
    print(json.dumps({key: results[key] for key in headline}, indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
