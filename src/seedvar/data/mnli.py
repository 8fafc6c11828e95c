"""MNLI from the Hugging Face hub or from local files, in one canonical schema.

Canonical schema (data/io.py): id (str, the GLUE idx where known), premise, hypothesis,
label (0 entailment, 1 neutral, 2 contradiction).
Supported files: Parquet/JSONL with premise, hypothesis, label (like data/offline/mnli); the
GLUE TSVs (train.tsv, dev_matched.tsv, dev_mismatched.tsv); the MultiNLI 1.0 JSONL release.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from seedvar.data.io import example_frame, map_labels, read_table, require_columns
from seedvar.errors import DataError, first_line
from seedvar.metrics import MNLI_LABELS

HUB_DATASET = ("nyu-mll/glue", "mnli")
SPLITS = ("train", "validation_matched", "validation_mismatched")
OFFLINE_HINT = (
    "without network, use the offline data: --profile cpu, or "
    "--set data.mnli_train=data/offline/mnli/train_sample.parquet "
    "(and data.mnli_validation_matched / data.mnli_validation_mismatched)"
)


def load_mnli(source: str, split: str) -> pd.DataFrame:
    """Load one MNLI split from `source`: "hub" or a file path."""
    if split not in SPLITS:
        raise ValueError(f"unknown MNLI split {split!r}")
    if source == "hub":
        return _from_hub(split)
    path = Path(source)
    return canonical_mnli(read_table(path), str(path))


def canonical_mnli(frame: pd.DataFrame, origin: str) -> pd.DataFrame:
    """Bring any supported MNLI layout to the canonical schema."""
    if {"sentence1", "sentence2", "gold_label"} <= set(frame.columns):
        # GLUE TSV or MultiNLI JSONL: '-' marks pairs without a consensus label (GLUE drops them).
        frame = frame[frame["gold_label"].astype(str).str.strip() != "-"]
        frame = frame.rename(
            columns={"sentence1": "premise", "sentence2": "hypothesis", "gold_label": "label"}
        )
        if "idx" not in frame.columns and "index" in frame.columns:
            frame = frame.rename(columns={"index": "idx"})
    require_columns(frame, ("premise", "hypothesis", "label"), origin)
    if frame.empty:
        raise DataError(f"{origin}: no labelled examples left; is this an MNLI test file?")
    ids = frame["idx"] if "idx" in frame.columns else range(len(frame))
    return example_frame(ids, frame, map_labels(frame["label"], MNLI_LABELS, origin), origin)


def _from_hub(split: str) -> pd.DataFrame:
    import datasets

    name = f"{HUB_DATASET[0]}, config {HUB_DATASET[1]}"
    try:
        loaded = datasets.load_dataset(*HUB_DATASET, split=split)
    except Exception as error:  # network, auth and hub errors come in many types
        raise DataError(
            f"cannot load MNLI {split} from the Hugging Face hub ({name}): "
            f"{type(error).__name__}: {first_line(error)}; "
            f"{OFFLINE_HINT}"
        ) from None
    return canonical_mnli(loaded.to_pandas(), f"{name} {split}")
