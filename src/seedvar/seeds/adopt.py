"""Finished seeds that the keep (seeds/job.py) lacks but the workspace, DVC or a folder holds: a
pulled clone's seeds, the view of runs/ that DVC removed before it ran the `train` stage, or
seed folders carried from another machine (`seedvar adopt`). They are taken into the keep, so
that no finished seed is trained again."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml

from seedvar.config import Config, validate
from seedvar.errors import DataError
from seedvar.files import link_or_copy, temporary
from seedvar.seeds.finished import CONFIG, DATA, MANIFEST, METRICS, damaged_files, read_config
from seedvar.seeds.job import SeedJob, data_of, entry_name, trained_as


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
        return _copy_kept(job, entry_name(recipe, data), view)
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
                return _keep(job, entry_name(recipe, data), partial(fs.get, path, recursive=True))
        except Exception:  # noqa: BLE001 (DVC's own: not recorded, not pulled, no commit)
            continue
    return None


def adopt_folder(config: Config, folder: Path, data: dict[str, str] | None) -> tuple[int, Path]:
    """Keep the finished seed in `folder` (a seed's folder, as runs/seed-N, made here or on
    another machine; its weights may be left out) as one of `config`'s seeds, on the sets whose
    fingerprints are `data` (None: checked when a launch reads its prepared sets); the seed
    and where it is kept. A folder that is not a finished seed of this study is refused."""
    if not (folder / METRICS).is_file() or not (folder / CONFIG).is_file():
        raise DataError(
            f"{folder} is not a finished seed (it lacks {METRICS} or {CONFIG}); give a seed's "
            "folder, as runs/seed-N"
        )
    damaged = damaged_files(folder)
    if damaged:
        raise DataError(
            f"{folder / damaged[0]} differs from that seed's {MANIFEST} (damaged since it was "
            "published); adopt an intact copy"
        )
    trained = read_config(folder / CONFIG)
    seed = next((s for s in config.seeds if trained_as(trained, config.with_seed(s))), None)
    if seed is None:
        raise DataError(
            f"{folder} holds seed {trained.train.seed} of another recipe than this study's "
            f"({config.model.name}, {config.train.epochs} epoch(s)) or a seed it does not list; "
            "give the study's --profile and --set options, or add the seed to seeds"
        )
    job = SeedJob.of(config.with_seed(seed), data=data)
    if not job.same_data(data_of(folder)):
        raise DataError(
            f"{folder} was scored on other versions of the study's sets than the prepared ones "
            f"({DATA} differs): it cannot stand for seed {seed} of this study"
        )
    kept = job.finished_dir(config.with_seed(seed))
    return seed, kept or _copy_kept(job, entry_name(trained.hash(), data_of(folder)), folder)


def _copy_kept(job: SeedJob, name: str, folder: Path) -> Path:
    """Keep a copy of the seed folder `folder` (hard links where they can go) as `name`."""
    return _keep(job, name, partial(shutil.copytree, folder, copy_function=link_or_copy))


def _recipe(config: Config, text: str, source: str) -> str | None:
    """The trained recipe's hash if `text` (a seed's config.yaml) is `config`'s recipe."""
    trained = validate(yaml.safe_load(text), source)
    return trained.hash() if trained_as(trained, config) else None


def _keep(job: SeedJob, name: str, fill: Callable[[str], object]) -> Path:
    """Fill a new folder of the keep (`name`: see `entry_name`; `fill` is given its path),
    moved into place at once."""
    entry = job.recipes / name
    staging = temporary(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    fill(str(staging))
    os.rename(staging, entry)
    return entry
