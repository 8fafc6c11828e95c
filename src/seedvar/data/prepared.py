"""A study's prepared inputs on disk (canonical sets and their tokenized Arrow copies), written
once per study by `seedvar prepare` (DVC's `prepare` stage) and read by every seed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import datasets
import pandas as pd
from transformers import PreTrainedTokenizerBase

from seedvar.config import Config, short_hash
from seedvar.data.sets import StudySets, load_study_sets
from seedvar.data.tokenized import save_quietly, tokenize_cached
from seedvar.errors import ConfigError
from seedvar.pretrained import load_tokenizer
from seedvar.project import MANIFEST


@dataclass(frozen=True)
class StudyInputs:
    """Canonical frames and tokenized sets for one study."""

    sets: StudySets
    tokenized: dict[str, datasets.Dataset]


def inputs_key(config: Config) -> str:
    """What the prepared inputs depend on: the recipe's model (tokenizer, max length), its
    declared sets and data settings."""
    inputs = ("model.", "task.", "diagnostics", "data.")
    return short_hash(
        {key: value for key, value in config.recipe().items() if key.startswith(inputs)}
    )


Name = TypeVar("Name", bound=str)  # a set's name: a string, or an EvalSet


def tokenize_sets(
    frames: Mapping[Name, pd.DataFrame], tokenizer: PreTrainedTokenizerBase, config: Config
) -> dict[Name, datasets.Dataset]:
    """Tokenize every frame (through the on-disk cache) at the config's max length."""
    cache_dir = Path(config.data.cache_dir)
    return {
        name: tokenize_cached(
            frame, tokenizer, config.model.max_length, cache_dir, config.task.text
        )
        for name, frame in frames.items()
    }


def build_inputs(config: Config) -> StudyInputs:
    """Load every set from its source and tokenize it with the config's model's tokenizer."""
    sets = load_study_sets(config)
    return StudyInputs(sets, tokenize_sets(sets.named(), load_tokenizer(config.model.name), config))


def save_inputs(inputs: StudyInputs, config: Config, target: Path) -> None:
    """Write the inputs to `target` (atomically: a temporary folder, then a rename)."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name, frame in inputs.sets.named().items():
        frame.to_parquet(partial / f"{name}.parquet", index=False)
        save_quietly(inputs.tokenized[name], partial / "tokenized" / name)
    manifest = {
        "inputs_key": inputs_key(config),
        "model": config.model.name,
        "max_length": config.model.max_length,
        "fingerprints": inputs.sets.fingerprints(),
        "sizes": {name: len(frame) for name, frame in inputs.sets.named().items()},
    }
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def load_inputs(config: Config, source: Path) -> StudyInputs:
    """Read prepared inputs, refusing ones that were made for another model or data config."""
    manifest_path = source / MANIFEST
    if not manifest_path.is_file():
        raise ConfigError(f"{source}: no prepared inputs here; run `seedvar prepare` first")
    manifest = json.loads(manifest_path.read_text())
    if manifest["inputs_key"] != inputs_key(config):
        raise ConfigError(
            f"{source} was prepared for another model or data config; "
            "run `seedvar prepare` (or `dvc repro prepare`) again"
        )
    frames = {name: pd.read_parquet(source / f"{name}.parquet") for name in manifest["sizes"]}
    tokenized = {name: datasets.load_from_disk(str(source / "tokenized" / name)) for name in frames}
    return StudyInputs(StudySets.from_named(frames), tokenized)


def study_inputs(config: Config, prepared: Path | None) -> StudyInputs:
    """Prepared inputs when a folder is given, else built from the sources."""
    return load_inputs(config, prepared) if prepared else build_inputs(config)
