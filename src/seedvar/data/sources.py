"""Any declared set, from a file, a URL or the Hugging Face hub, in one canonical schema.

Canonical schema: id (str), the task's text fields (str), label (int: the index of the set's
label name), and the set's group columns (str; None where an example has no value).
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from collections.abc import Collection
from pathlib import Path

import pandas as pd

from seedvar.data.io import read_table
from seedvar.declared import Diagnostic, Fields, close_match
from seedvar.errors import DataError, first_line

HUB = "hub:"
OFFLINE_HINT = (
    "without network, use an offline profile (--profile cpu, which reads data/offline/) or "
    "point the set's source at a file"
)


def read_source(source: str, download_dir: Path) -> tuple[pd.DataFrame, str]:
    """The raw table of `source` (a file, an http(s) URL downloaded once into `download_dir`,
    or hub:DATASET[:CONFIG]:SPLIT) and how errors name it."""
    if source.startswith(HUB):
        return _from_hub(source), source
    if source.startswith(("http://", "https://")):
        return read_table(_download(source, download_dir)), source
    return read_table(Path(source)), source


def canonical(
    frame: pd.DataFrame,
    fields: Fields,
    text: list[str],
    labels: list[str],
    origin: str,
    groups: list[str] | None = None,
    drop_labels: list[str] | None = None,
) -> pd.DataFrame:
    """Bring a raw table to the canonical schema. `fields`: per canonical field, the source
    columns tried in order; `groups`: the group columns to keep, each required;
    `drop_labels`: label values that mark rows without a label."""
    require_columns(list(map(str, frame.columns)), fields, needed_fields(text, groups), origin)
    column = {name: source_column(frame.columns, fields, name) for name in [*text, "label", "id"]}
    label_column = column["label"] or "label"
    if drop_labels:
        frame = frame[~dropped(frame[label_column], drop_labels)]
    if frame.empty:
        raise DataError(f"{origin}: no labelled examples left; is this a test file?")
    ids = frame[column["id"]] if column["id"] else range(len(frame))
    result = pd.DataFrame({"id": [str(value) for value in ids]})
    for name in text:
        result[name] = frame[column[name]].to_list()
    result["label"] = map_labels(frame[label_column], labels, origin).to_list()
    for group in groups or []:
        values = frame[source_column(frame.columns, fields, group) or group].to_list()
        result[group] = [_group_value(value) for value in values]
    _require_text(result, text, origin)
    return result


def needed_fields(text: list[str], groups: list[str] | None) -> list[str]:
    """The canonical fields a set's source must hold: its text, its label, its groups."""
    return [*text, "label", *(groups or [])]


def require_columns(columns: list[str], fields: Fields, needed: list[str], origin: str) -> None:
    """DataError naming every field of `needed` that none of `columns` holds (a field's columns
    are tried as `fields` lists them, else its own name)."""
    missing = [name for name in needed if source_column(columns, fields, name) is None]
    if missing:
        tried = "; ".join(f"{n}: {fields.get(n, [n])}" for n in missing)
        found = ", ".join(columns[:12]) + (", ..." if len(columns) > 12 else "")
        raise DataError(
            f"{origin}: no column for {', '.join(missing)} (tried {tried}); found {found}: add "
            "the column's name to the set's fields"
        )


def source_column(columns: Collection[str], fields: Fields, name: str) -> str | None:
    """The column of a source that holds the canonical field `name` (None: none)."""
    return next((option for option in fields.get(name, [name]) if option in columns), None)


def dropped(labels: pd.Series, drop_labels: list[str]) -> pd.Series:
    """Which label values mark a row without a label (`drop_labels`)."""
    return labels.astype(str).str.strip().isin(drop_labels)


def _group_value(value: object) -> str | None:
    """A group value as text; None where there is none. A whole number reads as its digits
    (1, not 1.0: a column of integers with a gap is read as floats)."""
    if pd.isna(value) or value == "":
        return None
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def map_labels(values: pd.Series, names: list[str], origin: str) -> pd.Series:
    """Label names or integer ids -> integer ids in `names` order; unknown values are an error."""
    by_name = {name: index for index, name in enumerate(names)}
    by_name.update({str(index): index for index in range(len(names))})
    mapped = values.map(lambda value: by_name.get(str(value).strip()))
    unknown = sorted({str(value).strip() for value in values[mapped.isna()]})
    if not unknown:
        return mapped.astype("int64")
    found = {str(value).strip() for value in values}
    for name in names:
        close = None if name in found else close_match(name, unknown)
        if close:
            raise DataError(
                f"{origin}: the declared label {name!r} is none of its label values "
                f"({', '.join(sorted(found)[:8])}); did you mean {close!r}? fix the labels"
            )
    raise DataError(
        f"{origin}: unknown label value(s) {', '.join(map(repr, unknown[:5]))}; "
        f"expected {', '.join(names)} or 0-{len(names) - 1}"
    )


def _require_text(examples: pd.DataFrame, text: list[str], origin: str) -> None:
    """Every example has its text and its own id."""
    for column in text:
        missing = examples[column].map(lambda v: not isinstance(v, str))
        if missing.any():
            rows = ", ".join(examples.loc[missing, "id"].head(3))
            raise DataError(
                f"{origin}: {int(missing.sum())} example(s) have no {column} text (id {rows}); "
                "remove those rows or fill in the text"
            )
    repeated = examples["id"][examples["id"].duplicated()]
    if len(repeated):
        raise DataError(
            f"{origin}: {len(repeated)} repeated example id(s) ({', '.join(repeated.head(3))}); "
            "every example needs its own id: remove the duplicates or renumber the file"
        )


def check_groups(examples: pd.DataFrame, diagnostic: Diagnostic, origin: str) -> None:
    """A diagnostic set's groups hold values, only declared ones, and nest: each value of a
    group `within` another lies in one value of that group."""
    for group, declared in diagnostic.groups.items():
        present = examples[group].dropna()
        if present.empty:
            raise DataError(f"{origin}: group {group!r} has no values; fill in its column")
        values = present.str.split(declared.split).explode() if declared.split else present
        unknown = sorted(set(values) - set(declared.values or values))
        if unknown:
            raise DataError(
                f"{origin}: unknown {group} value(s) {', '.join(map(repr, unknown[:5]))}; "
                f"expected one of {', '.join(declared.values or [])[:200]}"
            )
        if declared.within:
            pairs = examples[[declared.within, group]].dropna().drop_duplicates()
            spread = pairs[group][pairs[group].duplicated()]
            if len(spread):
                value = spread.iloc[0]
                parents = sorted(pairs.loc[pairs[group] == value, declared.within])
                raise DataError(
                    f"{origin}: {group} {value!r} lies in several {declared.within} values "
                    f"({', '.join(parents)}); each {group} belongs to one: fix that column"
                )


def _from_hub(source: str) -> pd.DataFrame:
    import datasets

    *name, split = source.removeprefix(HUB).split(":")
    try:
        loaded = datasets.load_dataset(*name, split=split)
    except Exception as error:  # network, auth and hub errors come in many types
        raise DataError(
            f"cannot load {source} from the Hugging Face hub: {type(error).__name__}: "
            f"{first_line(error)}; {OFFLINE_HINT}"
        ) from None
    return loaded.to_pandas()


def _download(url: str, download_dir: Path) -> Path:
    suffix = Path(url.split("?")[0]).suffix or ".txt"
    target = download_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:12]}{suffix}"
    if target.is_file():
        return target
    download_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            partial.write_bytes(response.read())
    except OSError as error:
        raise DataError(f"cannot download {url} ({error}); {OFFLINE_HINT}") from None
    os.replace(partial, target)  # atomic; a concurrent download of the same file is identical
    return target
