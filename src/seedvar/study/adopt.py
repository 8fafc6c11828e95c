"""Finished seeds that the keep (study/job.py) lacks but the workspace or DVC holds: a pulled
clone's seeds, or the view of runs/ that DVC removed before it ran the `train` stage. They are
taken into the keep, so that no finished seed is trained again."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from seedvar.config import Config, validate
from seedvar.files import temporary
from seedvar.study.job import CONFIG, METRICS, SeedJob, link_or_copy

LINK = link_or_copy  # files are linked into the keep, not copied


def adopt(job: SeedJob, config: Config) -> Path | None:
    """Keep the seed of `config`'s recipe that output_dir shows, or that DVC recorded there
    (dvc.lock and the DVC cache, in a DVC repository), when the keep lacks it; where it is
    kept now, or None."""
    view = job.folder
    if (view / METRICS).is_file():
        recipe = _recipe(config, (view / CONFIG).read_text(), str(view / CONFIG))
        if recipe is None:
            return None
        return _keep(
            job, recipe, lambda into: shutil.copytree(view, into, copy_function=link_or_copy)
        )
    if not Path(".dvc").is_dir() or view.is_absolute():
        return None
    from dvc.api import DVCFileSystem

    path = view.as_posix()
    try:
        fs = DVCFileSystem(".")
        recipe = _recipe(config, fs.read_text(f"{path}/{CONFIG}"), f"{path}/{CONFIG} (DVC)")
        if recipe is None or not fs.exists(f"{path}/{METRICS}"):
            return None
        return _keep(job, recipe, lambda partial: fs.get(path, str(partial), recursive=True))
    except OSError:  # not recorded by DVC, or not in its cache (not pulled)
        return None


def _recipe(config: Config, text: str, source: str) -> str | None:
    """The trained recipe's hash if `text` (a seed's config.yaml) is `config`'s recipe."""
    trained = validate(yaml.safe_load(text), source)
    return trained.hash() if trained.hash() == config.with_precisions_of(trained).hash() else None


def _keep(job: SeedJob, recipe: str, fill: Callable[[Path], object]) -> Path:
    """Fill a new folder of the keep with the seed of `recipe`, moved into place at once."""
    entry = job.recipes / recipe
    partial = temporary(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    fill(partial)
    os.rename(partial, entry)
    return entry
