"""A finished seed as everything downstream of training reads it (aggregate, report, sweeps):
its published folder, `runs/seed-N`, read only. The files a finished seed holds are named here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from seedvar.config import Config, validate
from seedvar.errors import DataError
from seedvar.metrics import Column

RUN_STATE = "run.json"  # its MLflow run
METRICS = "metrics.json"
COLUMNS = "columns.json"  # each metric's column: name, MLflow key, set, size
CONFIG = "config.yaml"
DATA = "data.json"  # the content fingerprints of the sets the seed was trained and scored on
TRAJECTORY = "trajectory.csv"  # step, epoch, column, key, accuracy (seeds/trajectory.py)
PREDICTIONS = "predictions"  # one parquet file per evaluated set
MANIFEST = "manifest.json"  # every other file's size and sha256, written when it was published
WEIGHTS = "model"  # not checked by readers (none reads it), only listed


def file_hash(path: Path) -> str:
    """The sha256 of a file's content."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_of(folder: Path) -> dict[str, list]:
    """Every file of a seed's folder (but the manifest) as [size, sha256], by relative path."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    return {p.relative_to(folder).as_posix(): [p.stat().st_size, file_hash(p)] for p in files}


def damaged_files(folder: Path) -> list[str]:
    """The files of a published seed whose size or content differs from its manifest, or that
    are gone (the weights not checked); empty where intact or published before manifests."""
    path = folder / MANIFEST
    if not path.is_file():
        return []
    try:
        recorded = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return [MANIFEST]
    found = []
    for name, (size, digest) in recorded.items():
        file = folder / name
        if name.startswith(f"{WEIGHTS}/"):
            continue
        if not file.is_file() or file.stat().st_size != size or file_hash(file) != digest:
            found.append(name)
    return found


def read_config(path: Path) -> Config:
    """The recipe a seed's config.yaml records (a group's `optional`, recorded before every
    declared group was required, dropped: it never changed what a seed computed)."""
    raw = yaml.safe_load(path.read_text())
    for diagnostic in (raw.get("diagnostics") or {}).values():
        for group in (diagnostic or {}).get("groups", {}).values():
            group.pop("optional", None)
    return validate(raw, source=str(path))


@dataclass(frozen=True)
class FinishedSeed:
    """Seed `seed` as published under `output_dir`."""

    output_dir: Path
    seed: int

    @property
    def folder(self) -> Path:
        return self.output_dir / f"seed-{self.seed}"

    def check(self) -> None:
        """DataError naming a file of the published seed that was damaged after publication
        (its manifest's size or sha256 differs), and how to get the intact copy back."""
        damaged = damaged_files(self.folder)
        if damaged:
            raise DataError(
                f"{self.folder / damaged[0]} is damaged (it differs from the seed's "
                f"{MANIFEST}); `seedvar launch` (or `dvc repro --force -s train`) publishes the "
                f"intact copy kept in .seedvar/, or retrains seed {self.seed} where that is "
                "damaged too"
            )

    def metrics(self) -> dict[str, float] | None:
        """Its metrics, or None where the seed has not finished."""
        path = self.folder / METRICS
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise DataError(
                f"{path} is damaged (not JSON); restore it (`dvc checkout {self.folder}`, or "
                f"`seedvar adopt` of an intact copy) or retrain that seed (`seedvar train --seed "
                f"{self.seed} --force`)"
            ) from None

    def columns(self) -> list[Column]:
        """The columns of its metrics (name, MLflow key, set, size)."""
        return [Column(**column) for column in json.loads((self.folder / COLUMNS).read_text())]

    def config(self) -> Config:
        """The recipe it was trained with."""
        return read_config(self.folder / CONFIG)

    def trajectory(self) -> pd.DataFrame | None:
        """Its trajectory (the last value per step and column: a resumed attempt may have
        evaluated a step twice), or None where it was trained without one."""
        path = self.folder / TRAJECTORY
        if not path.is_file():
            return None
        frame = pd.read_csv(path)
        return frame.drop_duplicates(["step", "column"], keep="last").reset_index(drop=True)

    def predictions(self, set_name: str) -> Path:
        """Its per-example predictions on `set_name` (a parquet file)."""
        return self.folder / PREDICTIONS / f"{set_name}.parquet"

    def run_id(self) -> str:
        """Its MLflow run."""
        return json.loads((self.folder / RUN_STATE).read_text())["run_id"]
