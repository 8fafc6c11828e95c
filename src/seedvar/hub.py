"""Whether a study needs the Hugging Face hub, and a fast, one-line stop when it cannot be
reached (instead of minutes of retries inside transformers and datasets)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from seedvar.config import Config
from seedvar.declared import did_you_mean
from seedvar.errors import ModelError
from seedvar.offline_models import OFFLINE_ALIASES

HUB_HOST = ("huggingface.co", 443)
WELL_KNOWN = ("bert-base-uncased", "bert-base-cased", "bert-large-uncased", "roberta-base")
OFFLINE_STUDY = "`make study` (the demo, minutes) or `make study PROFILE=cpu` (12 seeds)"


def require_hub(config: Config, data: bool = True, model: bool = True) -> None:
    """ModelError, within seconds, if the study needs the hub (for its data or its model, if
    asked) and it is unreachable, or if its model is on neither the hub nor this disk."""
    sources = config.sources().items() if data else []
    needs = [key for key, value in sources if value.startswith("hub:")]
    name = config.model.name
    local = name.startswith(("/", ".", "~")) or Path(name).exists()  # a folder, maybe missing
    hub_model = model and name not in OFFLINE_ALIASES and not local
    if hub_model:
        needs.insert(0, f"model.name={name}")
    if not needs:
        return
    reason = unreachable_reason()
    if reason is None:
        if hub_model:
            require_on_hub(name)
        return
    guess = model_guess(name)
    if hub_model and guess:
        raise ModelError(
            f"model.name {name!r} is not a local folder, and the Hugging Face hub, where it "
            f"would be looked up, cannot be reached ({reason}){guess} or run an offline "
            f"study: {OFFLINE_STUDY}"
        )
    raise ModelError(
        f"the {config.profile} study loads {', '.join(needs)} from the Hugging Face hub, which "
        f"cannot be reached ({reason}); without it run an offline study: {OFFLINE_STUDY}"
    )


def model_guess(name: str) -> str:
    """ "; did you mean X?" for a model name close to a well-known or offline one, else ""."""
    return "" if name in WELL_KNOWN else did_you_mean(name, [*WELL_KNOWN, *OFFLINE_ALIASES], 0.8)


def require_on_hub(name: str) -> None:
    """ModelError if the reachable hub has no model `name` (a typo, or a private model)."""
    from huggingface_hub import model_info  # here only: most commands never need it
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError

    try:
        model_info(name, timeout=10)
    except (RepositoryNotFoundError, HFValidationError):
        hint = model_guess(name) or "; check the name"
        raise ModelError(
            f"model.name {name!r}: no such model on the Hugging Face hub and no local folder of "
            f"that name{hint} (offline models: {', '.join(OFFLINE_ALIASES)})"
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
