"""Reading tables from disk, with one clear error per problem."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterable
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
        raise DataError(f"{path}: file not found; check the path in params.yaml or --set data.*")
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


def require_columns(frame: pd.DataFrame, columns: Iterable[str], origin: str) -> None:
    """Raise DataError naming the missing columns."""
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise DataError(
            f"{origin}: missing column(s) {', '.join(missing)}; "
            f"found {', '.join(map(str, frame.columns))}"
        )


def example_frame(
    ids: Iterable[object], frame: pd.DataFrame, labels: pd.Series, origin: str
) -> pd.DataFrame:
    """The canonical example schema shared by every set: id (str), premise, hypothesis,
    label (int). Missing text and repeated ids are errors that name the file."""
    result = pd.DataFrame(
        {
            "id": [str(value) for value in ids],
            "premise": frame["premise"].to_list(),
            "hypothesis": frame["hypothesis"].to_list(),
            "label": labels.to_list(),
        }
    )
    for column in ("premise", "hypothesis"):
        missing = result[column].isna() | ~result[column].map(lambda v: isinstance(v, str))
        if missing.any():
            rows = ", ".join(result.loc[missing, "id"].head(3))
            raise DataError(
                f"{origin}: {int(missing.sum())} example(s) have no {column} text (id {rows}); "
                "remove those rows or fill in the text"
            )
    repeated = result["id"][result["id"].duplicated()]
    if len(repeated):
        raise DataError(
            f"{origin}: {len(repeated)} repeated example id(s) ({', '.join(repeated.head(3))}); "
            "every example needs its own id: remove the duplicates or renumber the file"
        )
    return result


def map_labels(values: pd.Series, names: tuple[str, ...], origin: str) -> pd.Series:
    """Label names or integer ids -> integer ids in `names` order; unknown values are an error."""
    by_name = {name: index for index, name in enumerate(names)}
    by_name.update({str(index): index for index in range(len(names))})
    mapped = values.map(lambda value: by_name.get(str(value).strip()))
    unknown = sorted({str(value) for value in values[mapped.isna()]})
    if unknown:
        raise DataError(
            f"{origin}: unknown label value(s) {', '.join(map(repr, unknown[:5]))}; "
            f"expected {', '.join(names)} or 0-{len(names) - 1}"
        )
    return mapped.astype("int64")


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
