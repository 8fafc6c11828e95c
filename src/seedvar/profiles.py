"""Named bundles of settings; `profile` in params.yaml (or --profile) picks one.

- paper: McCoy, Min & Linzen (2020): bert-base-uncased, full MNLI from the hub, official HANS.
- cpu:   the offline MiniLM package and the real offline data in data/offline/, trained
         briefly so that a 5-seed study finishes on 2 CPU cores within an hour, evaluated
         on the complete MNLI-m/mm and HANS sets.
- smoke: a tiny random-init BERT and a few hundred examples: a whole study in seconds.
"""

from typing import Any

OFFLINE_DATA: dict[str, Any] = {
    "mnli_train": "data/offline/mnli/train_sample.parquet",
    "mnli_validation_matched": "data/offline/mnli/validation_matched.parquet",
    "mnli_validation_mismatched": "data/offline/mnli/validation_mismatched.parquet",
    "hans": "data/offline/hans/validation.parquet",
    "hans_train": "data/offline/hans/train.parquet",
}

PROFILES: dict[str, dict[str, Any]] = {
    "paper": {},
    "cpu": {
        "seeds": [0, 1, 2, 3, 4],
        "model": {"name": "minilm-offline"},
        "data": {**OFFLINE_DATA, "max_train_examples": 6000, "max_val_examples": 1000},
        "train": {"epochs": 1, "learning_rate": 5e-5, "eval_batch_size": 128},
    },
    "smoke": {
        "seeds": [0, 1, 2],
        "model": {"name": "tiny-random-bert", "max_length": 64},
        "data": {
            **OFFLINE_DATA,
            "max_train_examples": 200,
            "max_val_examples": 100,
            "max_eval_examples": 300,
        },
        "train": {"epochs": 1, "batch_size": 16, "learning_rate": 1e-3, "log_every_n_steps": 2},
    },
}
