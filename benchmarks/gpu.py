"""GPU throughput of BERT-base fine-tuning (random weights: the hub is not needed).

Measures training tokens/s and model FLOPs utilisation at batch 32 with MNLI-like lengths
(drawn from the real MNLI sample), bf16 mixed precision, fused AdamW and PyTorch SDPA
attention, with and without torch.compile; projects one full seed (392,702 examples x 3
epochs) and 100 seeds; and measures the gain from training several seeds at once on one GPU
(several processes). Writes benchmarks/results/gpu.json. Run by benchmarks/gpu.sh.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification

REPO = Path(__file__).resolve().parents[1]
MNLI_TRAIN, EPOCHS, SEEDS, BATCH = 392_702, 3, 100, 32
PEAK_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12}  # dense bf16 tensor cores


def mnli_lengths(count: int) -> np.ndarray:
    """Token lengths of real MNLI pairs (bert-base-uncased vocabulary), cut at 128."""
    from seedvar.data.mnli import load_mnli
    from seedvar.pretrained import OFFLINE_MINILM, load_tokenizer

    frame = load_mnli(str(REPO / "data/offline/mnli/train_sample.parquet"), "train").head(count)
    tokenizer = load_tokenizer(OFFLINE_MINILM)
    encoded = tokenizer(list(frame.premise), list(frame.hypothesis), truncation=True,
                        max_length=128)  # fmt: skip
    return np.array([len(ids) for ids in encoded["input_ids"]])


def train_throughput(steps: int, compile_model: bool, lengths: np.ndarray) -> dict[str, float]:
    """Tokens/s of real (unpadded) tokens over `steps` steps after a warm-up."""
    config = BertConfig(num_labels=3, attn_implementation="sdpa")
    model = BertForSequenceClassification(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, fused=True)
    step_fn = torch.compile(model) if compile_model else model
    rng = np.random.default_rng(0)
    # length-grouped batches, as seedvar trains: sort a window of batches by length
    window = np.sort(rng.choice(lengths, size=(steps + 10) * BATCH))[::-1]
    batches = window.reshape(steps + 10, BATCH)
    rng.shuffle(batches)
    tokens, started = 0, None
    for index, batch_lengths in enumerate(batches):
        if index == 10:
            torch.cuda.synchronize()
            started = time.perf_counter()
        longest = int(batch_lengths.max())
        ids = torch.randint(1000, 30000, (BATCH, longest), device="cuda")
        mask = (torch.arange(longest, device="cuda")[None] < torch.tensor(batch_lengths,
                device="cuda")[:, None]).long()  # fmt: skip
        labels = torch.randint(0, 3, (BATCH,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if index >= 10:
            tokens += int(batch_lengths.sum())
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    parameters = sum(p.numel() for p in model.parameters())
    return {"tokens_per_s": tokens / seconds, "examples_per_s": steps * BATCH / seconds,
            "flops_per_s": 6 * parameters * tokens / seconds, "parameters": parameters}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--child", action="store_true", help="one process of the concurrency test")
    args = parser.parse_args()
    lengths = mnli_lengths(20_000)
    if args.child:
        print(json.dumps(train_throughput(args.steps, False, lengths)))
        return
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
    results = {"device": name, "batch": BATCH, "mean_mnli_tokens": float(lengths.mean())}
    for label, compiled in (("eager", False), ("compiled", True)):
        measured = train_throughput(args.steps, compiled, lengths)
        seed_hours = MNLI_TRAIN * EPOCHS / measured["examples_per_s"] / 3600
        mfu = measured["flops_per_s"] / peak if peak else None
        results[label] = {**measured, "mfu": mfu, "hours_per_seed": seed_hours,
                          "hours_100_seeds": SEEDS * seed_hours}  # fmt: skip
    for processes in (2, 4):
        command = [sys.executable, __file__, "--child", "--steps", str(args.steps)]
        children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                    for _ in range(processes)]  # fmt: skip
        outputs = [
            json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children
        ]
        total = sum(o["examples_per_s"] for o in outputs)
        results[f"{processes}_seeds_at_once"] = {
            "examples_per_s_total": total,
            "gain_vs_one": total / results["eager"]["examples_per_s"],
            "hours_100_seeds": SEEDS * MNLI_TRAIN * EPOCHS / total / 3600,
        }
    out = REPO / "benchmarks" / "results" / "gpu.json"
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
