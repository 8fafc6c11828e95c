"""HANS (McCoy, Pavlick & Linzen 2019) from the official TSV (URL or path) or from Parquet.

Canonical schema: the shared example columns (data/io.py: id, premise, hypothesis, label with
0 entailment, 1 non-entailment), plus heuristic, subcase and template (None where the copy has
no templates).
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from pathlib import Path

import pandas as pd

from seedvar.data.io import example_frame, map_labels, read_table, require_columns
from seedvar.errors import DataError
from seedvar.metrics import HANS_LABELS, HEURISTICS, SUBCASES

SUBCASE_PREFIX = {"l": "lexical_overlap", "s": "subsequence", "c": "constituent"}
OFFLINE_HINT = (
    "without network, use the offline copy: --profile cpu, or "
    "--set data.hans=data/offline/hans/validation.parquet"
)


def load_hans(source: str, download_dir: Path) -> pd.DataFrame:
    """Load the HANS evaluation set from a URL (downloaded once into `download_dir`) or a file."""
    path = _download(source, download_dir) if source.startswith(("http://", "https://")) else None
    path = path or Path(source)
    return canonical_hans(read_table(path), str(path))


def canonical_hans(frame: pd.DataFrame, origin: str) -> pd.DataFrame:
    """Bring the official TSV layout or the Parquet layout to the canonical schema."""
    if {"sentence1", "sentence2", "gold_label"} <= set(frame.columns):
        frame = frame.rename(
            columns={"sentence1": "premise", "sentence2": "hypothesis", "gold_label": "label"}
        )
    require_columns(frame, ("premise", "hypothesis", "label", "heuristic", "subcase"), origin)
    if "pairID" in frame.columns:
        ids = frame["pairID"]
    elif "idx" in frame.columns:
        ids = frame["idx"]
    else:
        ids = range(len(frame))
    examples = example_frame(ids, frame, map_labels(frame["label"], HANS_LABELS, origin), origin)
    examples["heuristic"] = frame["heuristic"].astype(str).to_list()
    examples["subcase"] = frame["subcase"].astype(str).to_list()
    examples["template"] = (
        frame["template"].astype(str).to_list() if "template" in frame.columns else None
    )
    _require_official_groups(examples, origin)
    return examples


def _require_official_groups(examples: pd.DataFrame, origin: str) -> None:
    """Every heuristic and subcase is one of the official 3 and 30 (a subset is allowed)."""
    unknown = sorted(set(examples["heuristic"]) - set(HEURISTICS))
    if unknown:
        raise DataError(
            f"{origin}: unknown HANS heuristic(s) {', '.join(map(repr, unknown[:5]))}; "
            f"expected {', '.join(HEURISTICS)}"
        )
    unknown = sorted(set(examples["subcase"]) - set(SUBCASES))
    if unknown:
        raise DataError(
            f"{origin}: unknown HANS subcase(s) {', '.join(map(repr, unknown[:5]))}; "
            "expected the 30 official subcases, e.g. ln_subject/object_swap"
        )
    prefix = examples["subcase"].str[0].map(SUBCASE_PREFIX)
    mismatched = examples["heuristic"] != prefix
    if mismatched.any():
        row = examples[mismatched].iloc[0]
        expected = SUBCASE_PREFIX[row["subcase"][0]]
        raise DataError(
            f"{origin}: subcase {row['subcase']!r} belongs to heuristic {expected!r}, not "
            f"{row['heuristic']!r} (example id {row['id']}); fix the heuristic column"
        )


def _download(url: str, download_dir: Path) -> Path:
    target = download_dir / f"hans-{hashlib.sha256(url.encode()).hexdigest()[:12]}.txt"
    if target.is_file():
        return target
    download_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            partial.write_bytes(response.read())
    except OSError as error:
        raise DataError(f"cannot download HANS from {url} ({error}); {OFFLINE_HINT}") from None
    os.replace(partial, target)  # atomic; a concurrent download of the same file is identical
    return target
