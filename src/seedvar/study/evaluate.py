"""Predictions of a model on the evaluation sets, per-example files and metrics."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import torch
from transformers import AutoModelForSequenceClassification, PreTrainedModel

from seedvar import tracking
from seedvar.config import Config
from seedvar.data.prepared import tokenize_sets
from seedvar.data.sets import load_study_sets
from seedvar.errors import DivergedError, ModelError, OutputExistsError
from seedvar.files import temporary, write_atomically
from seedvar.metrics import EvalSet, set_metrics, to_hans_labels
from seedvar.pretrained import ID2LABEL, load_tokenizer
from seedvar.study.job import CONFIG, METRICS
from seedvar.training.device import (
    autocast_dtype,
    evaluation_device,
    resolve_eval_precision,
)
from seedvar.training.predict import predict_logits

HANS_GROUPS = ("heuristic", "subcase", "template")


def prediction_frame(eval_set: EvalSet, frame: pd.DataFrame, logits: np.ndarray) -> pd.DataFrame:
    """Per-example predictions: id, gold, predicted (in the set's label space), 3 logits."""
    predicted = logits.argmax(axis=1)
    is_hans = eval_set is EvalSet.HANS
    result = pd.DataFrame(
        {
            "id": frame["id"].to_numpy(),
            "gold": frame["label"].to_numpy(),
            "predicted": to_hans_labels(predicted) if is_hans else predicted,
        }
    )
    for index, label in ID2LABEL.items():
        result[f"logit_{label}"] = logits[:, index]
    if is_hans:
        for column in HANS_GROUPS:
            result[column] = frame[column].to_numpy()
    return result


def prediction_metrics(eval_set: EvalSet, predictions: pd.DataFrame) -> dict[str, float]:
    """Paper-named metrics of one set's predictions."""
    groups = None
    if eval_set is EvalSet.HANS:
        template = predictions["template"].to_numpy()
        groups = {
            "heuristic": predictions["heuristic"].to_numpy(),
            "subcase": predictions["subcase"].to_numpy(),
            "template": template if pd.notna(template).any() else None,
        }
    gold, predicted = predictions["gold"].to_numpy(), predictions["predicted"].to_numpy()
    return set_metrics(eval_set, gold, predicted, groups)


def evaluate_sets(
    model: PreTrainedModel,
    frames: dict[EvalSet, pd.DataFrame],
    tokenized: Mapping[str, datasets.Dataset] | Mapping[EvalSet, datasets.Dataset],
    pad_token_id: int,
    batch_size: int,
    output_dir: Path,
    autocast: torch.dtype | None = None,
) -> dict[str, float]:
    """Predict every set; write predictions/<set>.parquet and metrics.json into `output_dir`.

    A set whose predictions file is already there (an evaluation that was interrupted) is
    read back instead of predicted again. Non-finite logits raise DivergedError."""
    predictions_dir = output_dir / "predictions"
    predictions_dir.mkdir(exist_ok=True)  # in `output_dir`, which must exist
    metrics: dict[str, float] = {}
    for eval_set, frame in frames.items():
        path = predictions_dir / f"{eval_set}.parquet"
        if path.is_file():
            predictions = pd.read_parquet(path)
        else:
            logits = predict_logits(
                model, tokenized[eval_set], pad_token_id, batch_size, eval_set, autocast
            )
            if not np.isfinite(logits).all():
                raise DivergedError(
                    f"the model's predictions on {eval_set} are not finite (NaN or infinite "
                    "logits): training diverged; lower train.learning_rate"
                )
            predictions = prediction_frame(eval_set, frame, logits)
            partial = temporary(path)
            predictions.to_parquet(partial, index=False)
            os.replace(partial, path)
        metrics.update(prediction_metrics(eval_set, predictions))
    write_atomically(output_dir / METRICS, json.dumps(metrics, indent=2))
    return metrics


def evaluate_saved(
    config: Config, model_dir: Path, output_dir: Path, force: bool = False
) -> dict[str, float]:
    """Evaluate saved weights on the config's evaluation sets; outputs go to `output_dir`."""
    if (output_dir / METRICS).exists() and not force:
        raise OutputExistsError(
            f"{output_dir} already holds an evaluation; choose another --output, or --force"
        )
    if not (model_dir / "config.json").is_file():
        raise ModelError(
            f"{model_dir}: no config.json here; give a folder written by seedvar train"
        )
    tokenizer = load_tokenizer(str(model_dir))
    sets = load_study_sets(config.data)
    tokenized = tokenize_sets(sets.evaluation, tokenizer, config)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    model = model.to(evaluation_device(config))
    with tracking.open_run(
        config, run_name=f"evaluate {model_dir}", tags={"seedvar.model_dir": str(model_dir)}
    ) as run:
        precision = {"eval_precision": resolve_eval_precision(config)}
        run.log_params({"model_dir": str(model_dir), **precision, **tracking.provenance()})
        if force:  # predictions of an earlier evaluation would be read back, not redone
            shutil.rmtree(output_dir / "predictions", ignore_errors=True)
        output_dir.mkdir(parents=True, exist_ok=True)
        metrics = evaluate_sets(
            model,
            sets.evaluation,
            tokenized,
            tokenizer.pad_token_id,
            config.train.eval_batch_size,
            output_dir,
            autocast_dtype(config),
        )
        config.save(output_dir / CONFIG)
        run.log_metrics(metrics)
        run.log_folder(output_dir)
    return metrics
