"""Reading tables from disk, with one clear error per problem."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from seedvar.errors import DataError, first_line

FORMATS = {
    ".parquet": "Parquet",
    ".jsonl": "JSONL",
    ".json": "JSONL",
    ".tsv": "TSV",
    ".txt": "TSV",
    ".csv": "CSV",
}
# how pandas reads each delimited format (TSV: every field as its text, quotes included)
DELIMITED: dict[str, dict[str, Any]] = {
    "CSV": {},
    "TSV": {"sep": "\t", "quoting": csv.QUOTE_NONE, "dtype": str, "keep_default_na": False},
}


def read_table(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """Read a Parquet, JSONL, CSV or TSV file (only `columns`, if given) into a DataFrame;
    raise DataError for any problem."""
    fmt = _format(path)
    try:
        if fmt == "Parquet":
            frame = pd.read_parquet(path, columns=columns)
        elif fmt == "JSONL":
            frame = pd.read_json(path, lines=True, dtype=False)
            frame = frame if columns is None else frame[columns]
        else:
            frame = pd.read_csv(path, usecols=columns, **DELIMITED[fmt])
    except Exception as error:  # pandas/pyarrow raise many types for a broken file
        raise _unreadable(path, fmt, error) from None
    if frame.empty:
        raise DataError(f"{path}: the file holds no examples; point to a non-empty {fmt} file")
    return frame


def read_header(path: Path) -> list[str]:
    """The column names of a table file, read from its header alone (Parquet: its schema;
    CSV, TSV: the first line; JSONL: the first record); DataError for any problem."""
    fmt = _format(path)
    try:
        if fmt == "Parquet":
            return pq.read_schema(path).names
        if fmt == "JSONL":
            with path.open(encoding="utf-8") as lines:
                return list(json.loads(lines.readline()))
        return list(map(str, pd.read_csv(path, nrows=0, **DELIMITED[fmt]).columns))
    except Exception as error:  # a broken or empty file
        raise _unreadable(path, fmt, error) from None


def cheap_to_read_alone(path: Path) -> bool:
    """Whether one column of the file reads without parsing the others' text (not JSONL)."""
    return _format(path) != "JSONL"


def _format(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"{path}: file not found; check the source in params.yaml or --set")
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(
            f"{path}: unknown format {path.suffix!r}; use one of {', '.join(sorted(FORMATS))}"
        )
    return fmt


def _unreadable(path: Path, fmt: str, error: Exception) -> DataError:
    return DataError(
        f"{path}: cannot be read as {fmt} ({first_line(error)}); the file is truncated or not {fmt}"
    )


def fingerprint(frame: pd.DataFrame) -> str:
    """A short content hash of a DataFrame (rows, order and columns)."""
    hashed = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    digest = hashlib.sha256(hashed.tobytes())
    digest.update(",".join(map(str, frame.columns)).encode())
    return digest.hexdigest()[:16]


def subsample(frame: pd.DataFrame, limit: int | None, stratify: str | None = None) -> pd.DataFrame:
    """At most `limit` rows, the same for every seed (fixed sampling seed), maybe per stratum."""
    if limit is None or limit >= len(frame):
        return frame
    shuffled = frame.sample(frac=1.0, random_state=0)
    if stratify is None:
        chosen = shuffled.head(limit)
    else:
        per_group = max(1, limit // frame[stratify].nunique())
        chosen = shuffled.groupby(stratify, sort=False).head(per_group)
    return chosen.sort_index().reset_index(drop=True)
