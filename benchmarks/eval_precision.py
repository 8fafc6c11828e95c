"""Does bf16 evaluation on a CPU predict what fp32 does? A trained seed, the complete sets.

Predicts MNLI-m, MNLI-mm and HANS (49,647 pairs) with one trained seed's weights twice: as
the cpu profile did before (fp32, batch 128) and as it does now (`train.eval_precision`
auto: bf16 autocast on CPUs with native bf16, batch 64). Reports seconds, the share of
identical labels, the largest logit difference and each set's accuracy both ways. seedvar
keeps bf16 evaluation only where labels agree on at least 99.9 % of the pairs.

Usage:  python benchmarks/eval_precision.py runs/seed-0/model
Writes: benchmarks/results/eval-precision-cpu.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification

from seedvar.config import load_config
from seedvar.data.prepared import tokenize_sets
from seedvar.data.sets import load_study_sets
from seedvar.metrics import EvalSet, to_hans_labels
from seedvar.pretrained import load_tokenizer
from seedvar.training.predict import predict_logits

REPO = Path(__file__).resolve().parents[1]
WAYS = {"before: fp32, batch 128": (None, 128), "now: bf16, batch 64": (torch.bfloat16, 64)}
AGREEMENT_NEEDED = 0.999


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="a trained seed's model folder")
    args = parser.parse_args()
    config = load_config(None, [], profile="cpu")
    tokenizer = load_tokenizer(str(args.model))
    sets = load_study_sets(config.data)
    tokenized = tokenize_sets(sets.evaluation, tokenizer, config)
    model = AutoModelForSequenceClassification.from_pretrained(args.model)
    seconds: dict[str, float] = {}
    logits: dict[str, dict[str, np.ndarray]] = {}
    for way, (autocast, batch) in WAYS.items():
        started = time.perf_counter()
        logits[way] = {
            name: predict_logits(model, data, tokenizer.pad_token_id, batch, autocast=autocast)
            for name, data in tokenized.items()
        }
        seconds[way] = time.perf_counter() - started
    before, now = WAYS
    per_set = {}
    for name, frame in sets.evaluation.items():
        gold = frame["label"].to_numpy()
        labels = {way: logits[way][name].argmax(1) for way in WAYS}
        if name == EvalSet.HANS:  # HANS is scored on entailment vs non-entailment
            labels = {way: to_hans_labels(predicted) for way, predicted in labels.items()}
        per_set[name] = {
            "pairs": len(frame),
            "same_label": float(np.mean(labels[before] == labels[now])),
            "max_abs_logit_difference": float(
                np.abs(logits[before][name] - logits[now][name]).max()
            ),
            "accuracy": {way: float(np.mean(labels[way] == gold)) for way in WAYS},
        }
    pairs = sum(item["pairs"] for item in per_set.values())
    same = sum(item["same_label"] * item["pairs"] for item in per_set.values()) / pairs
    results = {
        "model": str(args.model),
        "threads": torch.get_num_threads(),
        "seconds": seconds,
        "speedup": seconds[before] / seconds[now],
        "same_label_all_pairs": same,
        "kept": same >= AGREEMENT_NEEDED,
        "sets": per_set,
    }
    out = REPO / "benchmarks" / "results" / "eval-precision-cpu.json"
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
