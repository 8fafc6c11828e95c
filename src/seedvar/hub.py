"""Whether a study needs the Hugging Face hub, and a fast, one-line stop when it cannot be
reached (instead of minutes of retries inside transformers and datasets)."""

from __future__ import annotations

import difflib
import os
import socket
from pathlib import Path

from seedvar.config import Config
from seedvar.errors import ModelError

HUB_HOST = ("huggingface.co", 443)
OFFLINE_ALIASES = ("minilm-offline", "tiny-random-bert")
WELL_KNOWN = ("bert-base-uncased", "bert-base-cased", "bert-large-uncased", "roberta-base")
OFFLINE_STUDY = "`make study` (the demo, minutes) or `make study PROFILE=cpu` (12 seeds)"
# MiniLM-L6's fp32 training (the precision `auto` gives on a CPU), measured on 2 CPU cores:
# 120 s for 6,000 pairs x 1 epoch (docs/results/learning-curve); BERT-base has about 8 times
# MiniLM-L6's non-embedding parameters (85 M against 10.6 M), so about 8 times the compute.
CPU_SECONDS_PER_PAIR_EPOCH_MINILM = 120 / 6000
BERT_BASE_OVER_MINILM = 8


def hub_needs(config: Config, data: bool = True, model: bool = True) -> list[str]:
    """The settings that would load from the hub (only the data's or the model's if asked)."""
    sources = config.sources().items() if data else []
    needs = [key for key, value in sources if value.startswith("hub:")]
    name = config.model.name
    local = name.startswith(("/", ".", "~")) or Path(name).exists()  # a folder, maybe missing
    if model and name not in OFFLINE_ALIASES and not local:
        needs.insert(0, f"model.name={name}")
    return needs


def require_hub(config: Config, data: bool = True, model: bool = True) -> None:
    """ModelError, within seconds, if the study needs the hub and it is unreachable, or if
    its model is on neither the hub nor this disk."""
    needs = hub_needs(config, data, model)
    if not needs:
        return
    reason = unreachable_reason()
    name = config.model.name
    if reason is None:
        if needs[0].startswith("model.name="):
            require_on_hub(name)
        return
    guess = did_you_mean(name)
    if needs[0].startswith("model.name=") and guess:
        raise ModelError(
            f"model.name {name!r} is not a local folder, and the Hugging Face hub, where it "
            f"would be looked up, cannot be reached ({reason}); {guess}, or run an offline "
            f"study: {OFFLINE_STUDY}"
        )
    raise ModelError(
        f"the {config.profile} study loads {', '.join(needs)} from the Hugging Face hub, which "
        f"cannot be reached ({reason}); without it run an offline study: {OFFLINE_STUDY}"
        + _cpu_projection(config)
    )


def did_you_mean(name: str) -> str:
    """'did you mean X?' for a model name close to a well-known or offline one, else ''."""
    if name in WELL_KNOWN:
        return ""
    close = difflib.get_close_matches(name, [*WELL_KNOWN, *OFFLINE_ALIASES], n=1, cutoff=0.8)
    return f"did you mean {close[0]!r}?" if close else ""


def require_on_hub(name: str) -> None:
    """ModelError if the reachable hub has no model `name` (a typo, or a private model)."""
    from huggingface_hub import model_info  # here only: most commands never need it
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError

    try:
        model_info(name, timeout=10)
    except (RepositoryNotFoundError, HFValidationError):
        hint = did_you_mean(name) or "check the name"
        raise ModelError(
            f"model.name {name!r}: no such model on the Hugging Face hub and no local folder of "
            f"that name; {hint} (offline models: {', '.join(OFFLINE_ALIASES)})"
        ) from None


def unreachable_reason() -> str | None:
    """Why the hub cannot be reached, or None when it can."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false"):
        return "HF_HUB_OFFLINE is set"
    try:
        with socket.create_connection(HUB_HOST, timeout=3):
            return None
    except OSError as error:
        return error.strerror or str(error)


def _cpu_projection(config: Config) -> str:
    """On a machine without a GPU: what the paper study would cost on this CPU."""
    import torch  # here only: the check above must stay fast

    pairs = config.task.train_size
    if torch.cuda.is_available() or pairs is None or not config.task.train.startswith("hub:"):
        return ""
    per_seed = (
        pairs * config.train.epochs * CPU_SECONDS_PER_PAIR_EPOCH_MINILM * BERT_BASE_OVER_MINILM
    )
    days = per_seed * len(config.seeds) / 86_400
    return (
        f"; it also needs a GPU: on this machine's CPU its {len(config.seeds)} seeds would "
        f"take about {days:,.0f} days of training ({per_seed / 3600:,.0f} hours per seed, "
        "extrapolated from MiniLM-L6's fp32 training speed measured on 2 CPU cores)"
    )
