"""Reading tables from disk, with one clear error per problem."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pandas as pd

from seedvar.errors import DataError, first_line

FORMATS = {
    ".parquet": "Parquet",
    ".jsonl": "JSONL",
    ".json": "JSONL",
    ".tsv": "TSV",
    ".txt": "TSV",
    ".csv": "CSV",
}


def read_table(path: Path) -> pd.DataFrame:
    """Read a Parquet, JSONL or TSV file into a DataFrame; raise DataError for any problem."""
    if not path.is_file():
        raise DataError(f"{path}: file not found; check the source in params.yaml or --set")
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(
            f"{path}: unknown format {path.suffix!r}; use one of {', '.join(sorted(FORMATS))}"
        )
    try:
        if fmt == "Parquet":
            frame = pd.read_parquet(path)
        elif fmt == "JSONL":
            frame = pd.read_json(path, lines=True, dtype=False)
        elif fmt == "CSV":
            frame = pd.read_csv(path)
        else:
            frame = pd.read_csv(
                path, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False
            )
    except Exception as error:  # pandas/pyarrow raise many types for a broken file
        reason = first_line(error)
        raise DataError(
            f"{path}: cannot be read as {fmt} ({reason}); the file is truncated or not {fmt}"
        ) from None
    if frame.empty:
        raise DataError(f"{path}: the file holds no examples; point to a non-empty {fmt} file")
    return frame


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
