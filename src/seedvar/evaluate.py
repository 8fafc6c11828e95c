"""Predictions of a model on the evaluation sets, per-example files and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import AutoModelForSequenceClassification, PreTrainedModel

from seedvar import tracking
from seedvar.config import Config
from seedvar.data.datamodule import PadToLongest
from seedvar.data.sets import load_study_sets
from seedvar.data.tokenized import tokenize_cached
from seedvar.device import autocast_dtype, evaluation_device
from seedvar.errors import ModelError, OutputExistsError
from seedvar.metrics import (
    MNLI_MATCHED,
    MNLI_MISMATCHED,
    accuracy,
    hans_metrics,
    to_hans_labels,
)
from seedvar.pretrained import ID2LABEL, load_tokenizer


@torch.inference_mode()
def predict_logits(
    model: PreTrainedModel,
    dataset: datasets.Dataset,
    pad_token_id: int,
    batch_size: int,
    description: str = "predicting",
    autocast: torch.dtype | None = None,
) -> np.ndarray:
    """Logits for every row of a tokenized set, in row order (batches grouped by length);
    `autocast`: a mixed-precision dtype for GPU inference."""
    model.eval()
    device = next(model.parameters()).device
    columns = {name: dataset[name] for name in dataset.column_names if name != "labels"}
    lengths = np.array([len(ids) for ids in columns["input_ids"]])
    order = np.argsort(-lengths, kind="stable")
    collate = PadToLongest(pad_token_id)
    outputs = []  # stay on the device: one copy to the host at the end, no sync per batch
    for start in tqdm(range(0, len(order), batch_size), desc=description, unit="batch"):
        rows = order[start : start + batch_size]
        batch = collate([{name: values[i] for name, values in columns.items()} for i in rows])
        batch = {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            outputs.append(model(**batch).logits.float())
    logits = np.empty((len(dataset), model.config.num_labels), dtype=np.float32)
    if outputs:
        logits[order] = torch.cat(outputs).cpu().numpy()
    return logits


def prediction_frame(set_name: str, frame: pd.DataFrame, logits: np.ndarray) -> pd.DataFrame:
    """Per-example predictions: id, gold, predicted (in the set's label space), 3 logits."""
    predicted = logits.argmax(axis=1)
    is_hans = set_name == "hans"
    result = pd.DataFrame(
        {
            "id": frame["id" if is_hans else "idx"].astype(str).to_numpy(),
            "gold": frame["label"].to_numpy(),
            "predicted": to_hans_labels(predicted) if is_hans else predicted,
        }
    )
    for index, label in ID2LABEL.items():
        result[f"logit_{label}"] = logits[:, index]
    if is_hans:
        for column in ("heuristic", "subcase", "template"):
            result[column] = frame[column].to_numpy()
    return result


def set_metrics(set_name: str, predictions: pd.DataFrame) -> dict[str, float]:
    """Paper-named metrics for one set's predictions."""
    if set_name == "hans":
        template = predictions["template"].to_numpy()
        return hans_metrics(
            predictions["gold"].to_numpy(),
            predictions["predicted"].to_numpy(),
            predictions["heuristic"].to_numpy(),
            predictions["subcase"].to_numpy(),
            template if pd.notna(template).any() else None,
        )
    name = MNLI_MATCHED if set_name == "mnli_matched" else MNLI_MISMATCHED
    return {name: accuracy(predictions["gold"].to_numpy(), predictions["predicted"].to_numpy())}


def evaluate_sets(
    model: PreTrainedModel,
    frames: dict[str, pd.DataFrame],
    tokenized: dict[str, datasets.Dataset],
    pad_token_id: int,
    batch_size: int,
    output_dir: Path,
    autocast: torch.dtype | None = None,
) -> dict[str, float]:
    """Predict every set; write predictions/<set>.parquet and metrics.json into `output_dir`."""
    predictions_dir = output_dir / "predictions"
    predictions_dir.mkdir(parents=True, exist_ok=True)
    metrics: dict[str, float] = {}
    for set_name, frame in frames.items():
        logits = predict_logits(
            model, tokenized[set_name], pad_token_id, batch_size, set_name, autocast
        )
        predictions = prediction_frame(set_name, frame, logits)
        predictions.to_parquet(predictions_dir / f"{set_name}.parquet", index=False)
        metrics.update(set_metrics(set_name, predictions))
    (output_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def evaluate_saved(
    config: Config, model_dir: Path, output_dir: Path, force: bool = False
) -> dict[str, float]:
    """Evaluate saved weights on the config's evaluation sets; outputs go to `output_dir`."""
    if (output_dir / "metrics.json").exists() and not force:
        raise OutputExistsError(
            f"{output_dir} already holds an evaluation; choose another --output, or --force"
        )
    if not (model_dir / "config.json").is_file():
        raise ModelError(
            f"{model_dir}: no config.json here; give a folder written by seedvar train"
        )
    tokenizer = load_tokenizer(str(model_dir))
    sets = load_study_sets(config.data)
    cache_dir = Path(config.data.cache_dir)
    tokenized = {
        name: tokenize_cached(frame, tokenizer, config.model.max_length, cache_dir)
        for name, frame in sets.evaluation.items()
    }
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    model = model.to(evaluation_device(config))
    with tracking.seed_run(
        config,
        run_name=f"evaluate {model_dir}",
        tags={"seedvar.model_dir": str(model_dir)},
        in_study=False,
    ) as run:
        run.log_params({"model_dir": str(model_dir), **tracking.provenance()})
        metrics = evaluate_sets(
            model,
            sets.evaluation,
            tokenized,
            tokenizer.pad_token_id,
            config.train.eval_batch_size,
            output_dir,
            autocast_dtype(config),
        )
        config.save(output_dir / "config.yaml")
        run.log_metrics(metrics)
        run.log_artifacts(output_dir)
    return metrics
