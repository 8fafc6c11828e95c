"""Predictions of a model on the evaluation sets, per-example files and metrics."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
from transformers import PreTrainedModel

from seedvar import tracking
from seedvar.config import Config
from seedvar.data.prepared import tokenize_sets
from seedvar.data.sets import load_study_sets
from seedvar.declared import task_to_diagnostic
from seedvar.errors import DivergedError, ModelError, OutputExistsError
from seedvar.files import temporary, write_atomically
from seedvar.metrics import (
    Column,
    diagnostic_columns,
    in_distribution_column,
    majority_share_column,
    majority_share_key,
    set_metrics,
)
from seedvar.pretrained import load_tokenizer, load_trained
from seedvar.seeds.finished import COLUMNS, CONFIG, METRICS
from seedvar.training.device import autocast_dtype, evaluation_device, resolve_eval_precision
from seedvar.training.predict import predict_logits


def write_predictions(predictions: pd.DataFrame, path: Path) -> None:
    """Write per-example predictions losslessly and compactly (a seed's 30,000 HANS rows: 112 kB
    against snappy's 344 kB): logits as float16 where every one survives the round trip (a bf16
    model's always do), byte-stream split; ids delta-encoded; zstd at its highest level."""
    logits = [c for c in predictions.columns if c.startswith("logit_")]
    frame = predictions.copy()
    for column in logits:
        values = frame[column].to_numpy(np.float32)
        if np.array_equal(values.astype(np.float16).astype(np.float32), values):
            frame[column] = values.astype(np.float16)
    ids = "DELTA_BINARY_PACKED" if frame["id"].dtype.kind in "iu" else "DELTA_BYTE_ARRAY"
    frame.to_parquet(
        path,
        index=False,
        compression="zstd",
        compression_level=19,
        use_dictionary=[c for c in frame.columns if c not in logits and c != "id"],
        column_encoding={"id": ids} | dict.fromkeys(logits, "BYTE_STREAM_SPLIT"),
    )


def prediction_frame(
    config: Config, set_name: str, frame: pd.DataFrame, logits: np.ndarray
) -> pd.DataFrame:
    """Per-example predictions: id, gold and predicted (in the set's own labels: a diagnostic
    set's through its collapse), one logit per task label, the set's group columns."""
    predicted = logits.argmax(axis=1)
    diagnostic = config.diagnostics.get(set_name)
    if diagnostic is not None:
        predicted = np.asarray(task_to_diagnostic(config.task, diagnostic, set_name))[predicted]
    result = pd.DataFrame(
        {"id": frame["id"].to_numpy(), "gold": frame["label"].to_numpy(), "predicted": predicted}
    )
    for index, label in enumerate(config.task.labels):
        result[f"logit_{label}"] = logits[:, index]
    for group in diagnostic.groups if diagnostic else ():
        result[group] = frame[group].to_numpy()
    return result


def set_columns(
    config: Config, set_name: str, predictions: pd.DataFrame
) -> list[tuple[Column, np.ndarray]]:
    """The columns of one set, each with the mask of its examples."""
    declared = config.task.evaluation.get(set_name)
    if declared is not None:
        column = in_distribution_column(set_name, declared, len(predictions))
        return [(column, np.ones(len(predictions), dtype=bool))]
    return diagnostic_columns(set_name, config.diagnostics[set_name], predictions)


def prediction_metrics(
    config: Config, set_name: str, predictions: pd.DataFrame
) -> tuple[dict[str, float], list[Column]]:
    """Metrics of one set's predictions (by column name) and its columns."""
    columns = set_columns(config, set_name, predictions)
    gold, predicted = predictions["gold"].to_numpy(), predictions["predicted"].to_numpy()
    share = Column(
        majority_share_column(set_name), majority_share_key(set_name), set_name, len(gold)
    )
    return set_metrics(columns, gold, predicted), [column for column, _ in columns] + [share]


def evaluate_sets(
    model: PreTrainedModel,
    config: Config,
    frames: dict[str, pd.DataFrame],
    tokenized: Mapping[str, datasets.Dataset],
    pad_token_id: int,
    output_dir: Path,
) -> tuple[dict[str, float], list[Column]]:
    """Predict every set; write predictions/<set>.parquet, metrics.json and columns.json (each
    column's name, MLflow key, set and size) into `output_dir`; return metrics and columns.

    A set whose predictions file is already there (an evaluation that was interrupted) is
    read back instead of predicted again. Non-finite logits raise DivergedError."""
    predictions_dir = output_dir / "predictions"
    predictions_dir.mkdir(exist_ok=True)  # in `output_dir`, which must exist
    metrics: dict[str, float] = {}
    columns: list[Column] = []
    for set_name, frame in frames.items():
        path = predictions_dir / f"{set_name}.parquet"
        if path.is_file():
            predictions = pd.read_parquet(path)
        else:
            logits = predict_logits(
                model,
                tokenized[set_name],
                pad_token_id,
                config.train.eval_batch_size,
                set_name,
                autocast_dtype(config),
            )
            if not np.isfinite(logits).all():
                raise DivergedError(
                    f"the model's predictions on {set_name} are not finite (NaN or infinite "
                    "logits): training diverged; lower train.learning_rate"
                )
            predictions = prediction_frame(config, set_name, frame, logits)
            partial = temporary(path)
            write_predictions(predictions, partial)
            os.replace(partial, path)
        set_values, set_columns_found = prediction_metrics(config, set_name, predictions)
        metrics |= set_values
        columns += set_columns_found
    write_atomically(output_dir / METRICS, json.dumps(metrics, indent=2))
    catalogue = [asdict(column) for column in columns]
    write_atomically(output_dir / COLUMNS, json.dumps(catalogue, indent=2))
    return metrics, columns


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
    sets = load_study_sets(config)
    tokenized = tokenize_sets(sets.evaluation, tokenizer, config)
    model = load_trained(model_dir, evaluation_device(config))
    tags = {"seedvar.model_dir": str(model_dir)}
    with tracking.ending(tracking.start_run(config, f"evaluate {model_dir}", tags)) as run:
        precision = {"eval_precision": resolve_eval_precision(config)}
        run.log_params({"model_dir": str(model_dir), **precision, **tracking.provenance()})
        if force:  # predictions of an earlier evaluation would be read back, not redone
            shutil.rmtree(output_dir / "predictions", ignore_errors=True)
        output_dir.mkdir(parents=True, exist_ok=True)
        metrics, columns = evaluate_sets(
            model,
            config,
            sets.evaluation,
            tokenized,
            tokenizer.pad_token_id,
            output_dir,
        )
        config.save(output_dir / CONFIG)
        run.log_metrics(metrics, columns)
        run.log_folder(output_dir)
    return metrics
