"""Tokenize a set once per (content, tokenizer, max length) and keep it on disk as Arrow."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import datasets
import pandas as pd
from transformers import PreTrainedTokenizerBase

from seedvar.data.io import fingerprint

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def tokenize_cached(
    frame: pd.DataFrame,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    cache_dir: Path,
    text: list[str],
) -> datasets.Dataset:
    """Token ids (unpadded) and labels for `frame`'s `text` fields (a pair or one sentence),
    from the cache when present."""
    # two tokenizers of the same type, name and vocabulary size are interchangeable
    tokenizer_identity = f"{type(tokenizer).__name__}:{tokenizer.name_or_path}:{len(tokenizer)}"
    key_text = f"{fingerprint(frame)}|{tokenizer_identity}|{max_length}"
    key = hashlib.sha256(key_text.encode()).hexdigest()[:20]
    target = cache_dir / "tokenized" / key
    if target.is_dir():
        return datasets.load_from_disk(str(target))
    source = datasets.Dataset.from_dict(
        {**{field: frame[field].to_list() for field in text}, "labels": frame["label"].to_list()}
    )
    encoded = source.map(
        lambda batch: tokenizer(
            *(batch[field] for field in text), truncation=True, max_length=max_length
        ),
        batched=True,
        batch_size=2000,
        remove_columns=text,
        desc="tokenizing",
    )
    keep = [name for name in encoded.column_names if name in (*MODEL_INPUTS, "labels")]
    encoded = encoded.select_columns(keep)
    partial = target.with_name(f"{key}.partial-{os.getpid()}")  # one per process: no clashes
    shutil.rmtree(partial, ignore_errors=True)
    save_quietly(encoded, partial)
    try:
        partial.rename(target)
    except OSError:  # another process cached the same set first; theirs is identical
        shutil.rmtree(partial, ignore_errors=True)
    return datasets.load_from_disk(str(target))


def save_quietly(dataset: datasets.Dataset, folder: Path) -> None:
    """`save_to_disk` without its "Saving the dataset" bar: a copy of what was just shown."""
    shown = not datasets.utils.are_progress_bars_disabled()
    datasets.utils.disable_progress_bars()
    try:
        dataset.save_to_disk(str(folder))
    finally:
        if shown:
            datasets.utils.enable_progress_bars()
