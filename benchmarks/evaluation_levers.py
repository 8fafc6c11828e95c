"""Levers for CPU evaluation, on a trained seed and the complete sets: which are faster than
seedvar's default, and do they predict the same labels?

Predicts MNLI-m, MNLI-mm and HANS (49,647 pairs) with one trained seed's weights in each way
below, through the same length-sorted, dynamically padded batches as `seedvar evaluate`.
The reference is full precision (fp32, batch 128, as the cpu profile predicted before
`train.eval_precision`). Every other way is compared with it: seconds, speed-up, the share
of identical labels, the largest logit difference, each set's accuracy. A way is worth
keeping only if labels agree on at least 99.9 % of the pairs.

  torch fp32            the reference
  torch bf16            bf16 autocast, batch 64: seedvar's default on CPUs with native bf16
  torch bf16, 1 thread  the same on one core: does the second core pay (or would one
                        single-threaded process per core do more)?
  onnxruntime fp32      exported to ONNX, BERT graph fusions of onnxruntime.transformers
                        (attention, skip-layer-norm, bias-GELU), all session optimizations
  onnxruntime int8      the fused graph with dynamic int8 quantization of its weights

The ways run set by set in turn (each set: every way), so machine noise falls on all of them.

Usage:  python benchmarks/evaluation_levers.py runs/seed-0/model   (about 10 min on 2 cores)
        python benchmarks/evaluation_levers.py --smoke DIR  (a fresh tiny model, into DIR)
Needs:  pip install -e '.[bench]'  (onnxruntime, onnx)
Writes: benchmarks/results/evaluation-levers-cpu.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import datasets
import numpy as np
import onnx
import onnxruntime
import smoke
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers.optimizer import optimize_model
from transformers import AutoModelForSequenceClassification, PreTrainedModel

from seedvar.config import Config, load_config
from seedvar.data.prepared import tokenize_sets
from seedvar.data.sets import load_study_sets
from seedvar.declared import task_to_diagnostic
from seedvar.pretrained import load_model, load_tokenizer
from seedvar.training.device import cpu_description
from seedvar.training.predict import predict_logits

REPO = Path(__file__).resolve().parents[1]
REFERENCE = "torch fp32, batch 128"
AGREEMENT_NEEDED = 0.999
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class Way:
    """One way to predict: a model (torch or an ONNX Runtime session), batch, precision."""

    model: torch.nn.Module
    batch_size: int
    autocast: torch.dtype | None = None
    threads: int | None = None


class OrtClassifier(torch.nn.Module):
    """An ONNX Runtime session behind the interface `predict_logits` uses, so ONNX Runtime
    gets exactly the batches torch gets."""

    def __init__(self, session: onnxruntime.InferenceSession, num_labels: int) -> None:
        super().__init__()
        self.session = session
        self.config = SimpleNamespace(num_labels=num_labels)
        self.anchor = torch.nn.Parameter(torch.empty(0))  # tells predict_logits the device

    def forward(self, **batch: torch.Tensor) -> SimpleNamespace:
        feed = {name: batch[name].numpy() for name in INPUTS}
        (logits,) = self.session.run(["logits"], feed)
        return SimpleNamespace(logits=torch.from_numpy(logits))


def export_onnx(weights: Path, folder: Path) -> Path:
    """The model as ONNX with dynamic batch and length, BERT-fused by onnxruntime.transformers.
    Exported with eager attention: onnxruntime fuses that graph into its Attention operator,
    not the one of torch's scaled-dot-product attention."""
    model = AutoModelForSequenceClassification.from_pretrained(weights, attn_implementation="eager")
    exported = folder / "model.onnx"
    example = {name: torch.ones(2, 16, dtype=torch.long) for name in INPUTS}
    dynamic = {name: {0: "batch", 1: "length"} for name in INPUTS}
    torch.onnx.export(
        model.eval(),
        (),
        exported,
        kwargs=example,
        input_names=list(INPUTS),
        output_names=["logits"],
        dynamic_axes=dynamic,
        opset_version=17,
        dynamo=False,
    )
    fused = folder / "model-fused.onnx"
    config = model.config
    optimized = optimize_model(
        str(exported),
        model_type="bert",
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
    )
    print("onnxruntime fusions:", optimized.get_fused_operator_statistics())
    optimized.save_model_to_file(str(fused))
    return fused


def ort_model(path: Path, num_labels: int) -> OrtClassifier:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return OrtClassifier(session, num_labels)


def ways_to_measure(weights: Path, folder: Path) -> dict[str, Way]:
    model = AutoModelForSequenceClassification.from_pretrained(weights)
    fused = export_onnx(weights, folder)
    quantized = folder / "model-int8.onnx"
    quantize_dynamic(  # the fused operators hide types from shape inference: they are fp32
        fused,
        quantized,
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    labels = model.config.num_labels
    return {
        REFERENCE: Way(model, 128),
        "torch bf16, batch 64": Way(model, 64, torch.bfloat16),
        "torch bf16, batch 64, 1 thread": Way(model, 64, torch.bfloat16, threads=1),
        "onnxruntime fp32 (fused), batch 64": Way(ort_model(fused, labels), 64),
        "onnxruntime int8 (fused, dynamic), batch 64": Way(ort_model(quantized, labels), 64),
    }


def predict_timed(
    way: Way, data: datasets.Dataset, pad_token_id: int, description: str
) -> tuple[np.ndarray, float]:
    """The way's logits for a tokenized set, and the seconds they took."""
    model = cast(PreTrainedModel, way.model)  # an OrtClassifier stands in for one
    before = torch.get_num_threads()
    torch.set_num_threads(way.threads or before)
    try:
        started = time.perf_counter()
        logits = predict_logits(
            model, data, pad_token_id, way.batch_size, description, way.autocast
        )
        return logits, time.perf_counter() - started
    finally:
        torch.set_num_threads(before)


def compare(
    config: Config, sets: dict, logits: dict[str, dict[str, np.ndarray]]
) -> dict[str, dict]:
    """Per set: pairs, and per way its agreement with the reference and its accuracy."""
    per_set = {}
    for name, frame in sets.items():
        gold = frame["label"].to_numpy()
        labels = {way: found[name].argmax(1) for way, found in logits.items()}
        if name in config.diagnostics:  # scored in its own labels (HANS: 2-way)
            to_set = np.asarray(task_to_diagnostic(config.task, config.diagnostics[name], name))
            labels = {way: to_set[predicted] for way, predicted in labels.items()}
        per_set[name] = {
            "pairs": len(frame),
            "ways": {
                way: {
                    "same_label": float(np.mean(labels[way] == labels[REFERENCE])),
                    "max_abs_logit_difference": float(
                        np.abs(logits[way][name] - logits[REFERENCE][name]).max()
                    ),
                    "accuracy": float(np.mean(labels[way] == gold)),
                }
                for way in logits
            },
        }
    return per_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, nargs="?", help="a trained seed's model folder")
    parser.add_argument(
        "--max-pairs", type=int, help="evaluate at most this many pairs a set (a quick try)"
    )
    smoke.add_option(parser)
    args = parser.parse_args()
    settings = [] if args.max_pairs is None else [f"data.max_eval_examples={args.max_pairs}"]
    out = REPO / "benchmarks" / "results" / "evaluation-levers-cpu.json"
    if args.smoke:
        settings, out = [*smoke.SETTINGS, *settings], args.smoke / out.name
    elif args.model is None:
        parser.error("the model folder of a trained seed is needed (or --smoke DIR)")
    config = load_config(None, settings, profile="cpu")
    if args.smoke:  # a fresh tiny model stands in for a trained seed's
        args.model = args.smoke / "model"
        load_model(config.model.name, 0, config.task.labels).save_pretrained(args.model)
        load_tokenizer(config.model.name).save_pretrained(args.model)
    tokenizer = load_tokenizer(str(args.model))
    sets = load_study_sets(config).evaluation
    tokenized = tokenize_sets(sets, tokenizer, config)
    with tempfile.TemporaryDirectory() as folder:
        ways = ways_to_measure(args.model, Path(folder))
        first = next(iter(tokenized.values()))
        warm_up = first.select(range(min(256, len(first))))
        for how in ways.values():  # kernels and sessions set up before anything is timed
            predict_timed(how, warm_up, tokenizer.pad_token_id, "warming up")
        seconds = dict.fromkeys(ways, 0.0)
        logits: dict[str, dict[str, np.ndarray]] = {way: {} for way in ways}
        for name, data in tokenized.items():
            for way, how in ways.items():
                logits[way][name], took = predict_timed(how, data, tokenizer.pad_token_id, name)
                seconds[way] += took
                print(f"{name}: {way}: {took:.1f} s")
    per_set = compare(config, sets, logits)
    pairs = sum(item["pairs"] for item in per_set.values())
    summary = {}
    for way in ways:
        same = sum(s["ways"][way]["same_label"] * s["pairs"] for s in per_set.values()) / pairs
        summary[way] = {
            "seconds": seconds[way],
            "speedup": seconds[REFERENCE] / seconds[way],
            "same_label_all_pairs": same,
            "predicts_the_same": same >= AGREEMENT_NEEDED,
        }
    results = {
        "model": str(args.model),
        "cpu": cpu_description(),
        "threads": torch.get_num_threads(),
        "onnxruntime": onnxruntime.__version__,
        "torch": torch.__version__,
        "ways": summary,
        "sets": per_set,
    }
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
