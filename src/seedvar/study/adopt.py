"""Finished seeds that the keep (study/job.py) lacks but the workspace or DVC holds: a pulled
clone's seeds, or the view of runs/ that DVC removed before it ran the `train` stage. They are
taken into the keep, so that no finished seed is trained again."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from seedvar.config import Config, validate
from seedvar.files import temporary
from seedvar.study.job import (
    CONFIG,
    DATA,
    METRICS,
    SeedJob,
    data_of,
    entry_name,
    link_or_copy,
    trained_as,
)


def adopt(job: SeedJob, config: Config) -> Path | None:
    """Keep the seed of `config`'s recipe (and of the job's data) that output_dir shows, or
    that DVC recorded there (the workspace's or the last commit's dvc.lock, and the DVC cache,
    in a DVC repository), when the keep lacks it; where it is kept now, or None."""
    view = job.folder
    if (view / METRICS).is_file():
        recipe = _recipe(config, (view / CONFIG).read_text(), str(view / CONFIG))
        data = data_of(view)
        if recipe is None or not job.same_data(data):
            return None
        copy = partial(shutil.copytree, view, copy_function=link_or_copy)
        return _keep(job, entry_name(recipe, data), copy)
    if not Path(".dvc").is_dir() or view.is_absolute():
        return None
    from dvc.api import DVCFileSystem

    path = view.as_posix()
    for rev in (None, "HEAD"):  # as the workspace's dvc.lock records it, else the last commit
        try:
            fs = DVCFileSystem(".", rev=rev)
            recipe = _recipe(config, fs.read_text(f"{path}/{CONFIG}"), f"{path}/{CONFIG} (DVC)")
            data = (
                json.loads(fs.read_text(f"{path}/{DATA}")) if fs.exists(f"{path}/{DATA}") else None
            )
            if recipe is not None and job.same_data(data) and fs.exists(f"{path}/{METRICS}"):
                return _keep(job, entry_name(recipe, data), partial(_get, fs, path))
        except Exception:  # noqa: BLE001 (DVC's own: not recorded, not pulled, no commit)
            continue
    return None


def _get(fs: Any, path: str, into: Path) -> None:
    fs.get(path, str(into), recursive=True)


def _recipe(config: Config, text: str, source: str) -> str | None:
    """The trained recipe's hash if `text` (a seed's config.yaml) is `config`'s recipe."""
    trained = validate(yaml.safe_load(text), source)
    return trained.hash() if trained_as(trained, config) else None


def _keep(job: SeedJob, name: str, fill: Callable[[Path], object]) -> Path:
    """Fill a new folder of the keep (`name`: see `entry_name`), moved into place at once."""
    entry = job.recipes / name
    staging = temporary(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    fill(staging)
    os.rename(staging, entry)
    return entry
