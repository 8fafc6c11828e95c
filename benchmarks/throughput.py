"""Training and evaluation throughput: seedvar against a plain Hugging Face Trainer baseline.

Side by side in one run, on the same machine, model, data, batch size, max length,
precision and number of steps. The baseline is the classic run_glue recipe: every pair
padded to max length, a Trainer with random batches, Trainer.predict for evaluation.
Each of seedvar's speed-ups is measured on its own:

  train: baseline (pad to 128) -> dynamic padding -> dynamic padding + length-grouped batches
  eval:  baseline Trainer.predict (pad to 128) -> seedvar (sorted by length, inference_mode)
  tokenization: first tokenization vs the on-disk cache that later seeds and stages reuse
  memory: peak resident memory of one seed (a child process running `seedvar train`)

Usage:  pip install -e '.[bench]' && python benchmarks/throughput.py [--steps 40]
Writes: benchmarks/results/throughput-<device>.json
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
from transformers import Trainer, TrainingArguments

from seedvar.data.datamodule import NLIDataModule
from seedvar.data.mnli import load_mnli
from seedvar.data.tokenized import tokenize_cached
from seedvar.evaluate import predict_logits
from seedvar.model import NLIClassifier
from seedvar.pretrained import OFFLINE_MINILM, load_model, load_tokenizer

REPO = Path(__file__).resolve().parents[1]
MNLI = REPO / "data" / "offline" / "mnli"
MAX_LENGTH, BATCH, EVAL_BATCH = 128, 32, 128


def real_tokens(dataset) -> int:
    return int(sum(len(ids) for ids in dataset["input_ids"]))


def seedvar_train(train, pad_id: int, steps: int, group_by_length: bool) -> float:
    """Seconds for `steps` optimizer steps with seedvar's LightningModule and DataModule."""
    module = NLIClassifier(load_model(OFFLINE_MINILM, 0), 2e-5, 0.01, 0.1)
    data = NLIDataModule(train, train, pad_id, BATCH, EVAL_BATCH, 0, group_by_length)
    trainer = L.Trainer(accelerator="cpu", max_steps=steps, logger=False, precision="32-true",
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=0)  # fmt: skip
    started = time.perf_counter()
    trainer.fit(module, datamodule=data)
    return time.perf_counter() - started


def baseline_trainer(padded, steps: int, workdir: str) -> Trainer:
    args = TrainingArguments(
        output_dir=workdir, per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=EVAL_BATCH, max_steps=steps, learning_rate=2e-5,
        weight_decay=0.01, warmup_steps=max(1, steps // 10),
        use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no",
        disable_tqdm=True, seed=0, dataloader_pin_memory=False,
    )  # fmt: skip
    return Trainer(model=load_model(OFFLINE_MINILM, 0), args=args, train_dataset=padded)


def peak_memory_of_one_seed(workdir: Path) -> float:
    """Peak resident memory (MiB) of `seedvar train --profile cpu` on a short run."""
    (workdir / "data").symlink_to(REPO / "data")
    command = [sys.executable, "-m", "seedvar.cli", "train", "--profile", "cpu",
               "--set", "data.max_train_examples=320", "--set", "data.max_eval_examples=500",
               "--set", "data.max_val_examples=100"]  # fmt: skip
    script = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script, *command], cwd=workdir,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout.strip().splitlines()[-1]) / 1024


GROWTH_SCRIPT = """
import gc, json
from seedvar.config import load_config
from seedvar.train import run_seed
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
    workdir.mkdir()
    (workdir / "data").symlink_to(REPO / "data")
    done = subprocess.run([sys.executable, "-c", GROWTH_SCRIPT], cwd=workdir, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-examples", type=int, default=2000)
    args = parser.parse_args()
    torch.manual_seed(0)
    tokenizer = load_tokenizer(OFFLINE_MINILM)
    frame = load_mnli(str(MNLI / "train_sample.parquet"), "train").sample(
        n=args.steps * BATCH, random_state=0
    )
    evaluation = load_mnli(str(MNLI / "validation_matched.parquet"), "validation_matched").head(
        args.eval_examples
    )
    results: dict[str, dict] = {"setup": {
        "machine": platform.machine(), "cpus": torch.get_num_threads(), "torch": torch.__version__,
        "model": "all-MiniLM-L6-v2 (offline)", "batch": BATCH, "eval_batch": EVAL_BATCH,
        "max_length": MAX_LENGTH, "train_steps": args.steps, "eval_examples": len(evaluation),
        "precision": "32-true",
    }}  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        started = time.perf_counter()
        train = tokenize_cached(frame, tokenizer, MAX_LENGTH, cache)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        tokenize_cached(frame, tokenizer, MAX_LENGTH, cache)
        warm = time.perf_counter() - started
        results["tokenization"] = {"first_s": cold, "cached_s": warm, "speedup": cold / warm}

        pad_all = lambda b: tokenizer(b["premise"], b["hypothesis"], truncation=True,  # noqa: E731
                                      max_length=MAX_LENGTH, padding="max_length")  # fmt: skip
        as_dataset = datasets.Dataset.from_pandas(frame.rename(columns={"label": "labels"}))
        padded = as_dataset.map(pad_all, batched=True, remove_columns=["premise", "hypothesis"])
        eval_padded = datasets.Dataset.from_pandas(
            evaluation.rename(columns={"label": "labels"})
        ).map(pad_all, batched=True, remove_columns=["premise", "hypothesis"])
        eval_tokens = tokenize_cached(evaluation, tokenizer, MAX_LENGTH, cache)

        examples = args.steps * BATCH
        tokens = real_tokens(train)
        trainer = baseline_trainer(padded, args.steps, str(Path(tmp) / "hf"))
        started = time.perf_counter()
        trainer.train()
        timings = {"baseline_hf_trainer_pad128": time.perf_counter() - started}
        timings["seedvar_dynamic_padding"] = seedvar_train(
            train, tokenizer.pad_token_id, args.steps, group_by_length=False
        )
        timings["seedvar_dynamic_padding_length_grouped"] = seedvar_train(
            train, tokenizer.pad_token_id, args.steps, group_by_length=True
        )
        results["train"] = {
            name: {"seconds": s, "examples_per_s": examples / s, "tokens_per_s": tokens / s}
            for name, s in timings.items()
        }
        base = timings["baseline_hf_trainer_pad128"]
        results["train_ratios"] = {name: base / s for name, s in timings.items()}

        started = time.perf_counter()
        baseline_logits = trainer.predict(eval_padded).predictions
        eval_base = time.perf_counter() - started
        model = trainer.model.eval()
        started = time.perf_counter()
        ours = predict_logits(model, eval_tokens, tokenizer.pad_token_id, EVAL_BATCH)
        eval_ours = time.perf_counter() - started
        eval_real = real_tokens(eval_tokens)
        results["eval"] = {
            name: {"seconds": s, "examples_per_s": len(evaluation) / s,
                   "tokens_per_s": eval_real / s}
            for name, s in (("baseline_hf_trainer_predict_pad128", eval_base),
                            ("seedvar_sorted_inference_mode", eval_ours))
        }  # fmt: skip
        results["eval_ratio"] = eval_base / eval_ours
        results["eval_same_predictions"] = float(
            np.mean(np.asarray(baseline_logits).argmax(1) == ours.argmax(1))
        )
        after_each = memory_over_seeds_in(Path(tmp) / "growth")
        results["memory"] = {
            "peak_rss_one_seed_mib": peak_memory_of_one_seed(Path(tmp)),
            "worker_rss_after_each_of_5_seeds_mib": after_each,
            "growth_after_5_vs_after_1": after_each[-1] / after_each[0] - 1,
        }

    out = (
        REPO
        / "benchmarks"
        / "results"
        / f"throughput-{'gpu' if torch.cuda.is_available() else 'cpu'}.json"
    )
    out.write_text(json.dumps(results, indent=2))
    print(pd.DataFrame(results["train"]).T.round(2).to_string())
    print(pd.DataFrame(results["eval"]).T.round(2).to_string())
    headline = ("train_ratios", "eval_ratio", "tokenization", "memory", "eval_same_predictions")
    print(json.dumps({key: results[key] for key in headline}, indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
