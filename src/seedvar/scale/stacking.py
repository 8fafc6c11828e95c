"""Whether a study's seeds can train stacked, K in one process (`train.seeds_per_process` > 1,
training/stacked.py): told by the driver before any work, in one line naming what stops it."""

from __future__ import annotations

import json
from pathlib import Path

from seedvar.config import Config
from seedvar.errors import ConfigError
from seedvar.offline_models import OFFLINE_ALIASES

STACKABLE = "bert"  # the model family whose layers stack: Linear, LayerNorm, Embedding


def model_type(name: str) -> str | None:
    """The architecture (transformers' `model_type`) of model `name`: an offline alias's (BERT),
    a local folder's config.json, or the hub's; None where it cannot be told."""
    if name in OFFLINE_ALIASES:
        return STACKABLE
    found = Path(name).expanduser() / "config.json"
    if not found.is_file():
        try:
            from huggingface_hub import hf_hub_download  # a hub model's config: cached after

            found = Path(hf_hub_download(name, "config.json"))
        except Exception:  # not on the hub, or no network: the model's own load says why
            return None
    try:
        kind = json.loads(found.read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def require_stackable(config: Config) -> None:
    """ConfigError where `config` asks for seeds trained stacked and they cannot be."""
    seeds = config.train.seeds_per_process
    if seeds > 1 and (why := _problem(config)):
        raise ConfigError(
            f"train.seeds_per_process is {seeds} (seeds trained stacked in one process), but "
            f"{why}, or set train.seeds_per_process=1"
        )


def _problem(config: Config) -> str | None:
    """What keeps `config`'s seeds from training stacked: torch.compile, batches grouped by
    length, fp16's loss scaling (one seed's overflow would skip every seed's step), a model
    outside BERT's family."""
    train, name = config.train, config.model.name
    if train.compile:
        return "train.compile is true, and stacked seeds are not compiled yet; set it to false"
    if train.group_by_length:
        return (
            "train.group_by_length is true, and its batches of a step differ in size from seed "
            "to seed (each seed's short batch falls elsewhere), which stacked seeds do not take "
            "yet; set it to false (the paper's uniform batches)"
        )
    if train.precision == "16-mixed":
        return (
            "the precision is 16-mixed, whose loss scaling would skip every stacked seed's step "
            "when one seed's gradients overflow; use bf16-mixed or 32-true"
        )
    kind = model_type(name)
    if kind not in (None, STACKABLE):
        return (
            f"model {name!r} is a {kind} model, and only BERT's family stacks (bert-base-uncased, "
            "minilm-offline, tiny-random-bert); choose one of those"
        )
    return None
