"""HANS (McCoy, Pavlick & Linzen 2019) from the official TSV (URL or path) or from Parquet.

Canonical schema: id (str), premise, hypothesis, label (0 entailment, 1 non-entailment),
heuristic, subcase, template (None where the copy has no templates).
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from pathlib import Path

import pandas as pd

from seedvar.data.io import map_labels, read_table, require_columns
from seedvar.errors import DataError

HANS_LABELS = ("entailment", "non-entailment")
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
        ids = frame["pairID"].astype(str)
    elif "idx" in frame.columns:
        ids = frame["idx"].astype(str)
    else:
        ids = pd.Series(range(len(frame))).astype(str)
    template = frame["template"].astype(str) if "template" in frame.columns else None
    return pd.DataFrame(
        {
            "id": ids.to_list(),
            "premise": frame["premise"].astype(str).to_list(),
            "hypothesis": frame["hypothesis"].astype(str).to_list(),
            "label": map_labels(frame["label"], HANS_LABELS, origin).to_list(),
            "heuristic": frame["heuristic"].astype(str).to_list(),
            "subcase": frame["subcase"].astype(str).to_list(),
            "template": template.to_list() if template is not None else [None] * len(frame),
        }
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
