"""Resuming a seed: the one place seedvar reads Lightning's loop progress, checked against what
happened; and what an attempt that takes an interrupted one's work over says of it (resuming
from its checkpoint at a step, or, with nothing to resume from, starting over in one line)."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import lightning as L
import pytest
from transformers import BertConfig, BertForSequenceClassification

from seedvar.config import load_config
from seedvar.seeds.job import CHECKPOINT, SeedJob, attempt_record
from seedvar.training.datamodule import NLIDataModule
from seedvar.training.module import NLIClassifier
from seedvar.training.resume import ResumeCheckpoint, batches_done_in_epoch


class Record(L.Callback):
    """Before every training batch: Lightning's epoch, the batch index, and our reading."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int]] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:  # noqa: ANN001
        self.seen.append((trainer.current_epoch, batch_idx, batches_done_in_epoch(trainer)))


def tiny_fit(callbacks: list[L.Callback]) -> None:
    """6 steps (2 epochs of 3 batches) of a tiny random BERT."""
    rows = {"input_ids": [[101, 7, 102]] * 20, "labels": [0, 1, 2, 0] * 5}
    data = datasets.Dataset.from_dict(rows)
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=128,
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            intermediate_size=8,
            num_labels=3,
        )
    )
    datamodule = NLIDataModule(data, data, 0, 8, 8, data_seed=0, group_by_length=False)
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=2,
        logger=False,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(NLIClassifier(model, 1e-3, 0.0, 0.0, total_steps=6), datamodule=datamodule)


def test_batches_done_in_epoch_counts_the_finished_batches_of_the_current_epoch():
    record = Record()
    tiny_fit([record])
    assert record.seen == [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 0), (1, 1, 1), (1, 2, 2)]


def interrupted(tmp_path: Path, checkpoint: bytes | None) -> tuple[SeedJob, object]:
    """The work folder of a smoke seed's attempt that died after starting its MLflow run, with
    `checkpoint` as its training checkpoint (None: it died before its first); and the config."""
    config = load_config(None, profile="smoke").model_copy(
        update={"output_dir": str(tmp_path / "runs")}
    )
    earlier = SeedJob.of(config, note={"ray_node": "5f3e9a12" * 7, "ray_task": "task-of-the-crash"})
    earlier.claim(config)
    earlier.begin(config, "run-of-the-crash", {})
    if checkpoint is not None:
        (earlier.work_dir / CHECKPOINT).parent.mkdir()
        (earlier.work_dir / CHECKPOINT).write_bytes(checkpoint)
    return earlier, config


def test_a_seed_whose_earlier_attempt_left_no_checkpoint_says_it_starts_over_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    earlier, config = interrupted(tmp_path, checkpoint=None)
    capsys.readouterr()
    again = SeedJob.of(config, note={"ray_task": "task-of-the-crash"})
    resumable = again.claim(config)
    assert resumable.checkpoint is None and resumable.stale_run_id == "run-of-the-crash"
    said = capsys.readouterr().err
    assert said.count("\n") == 1, said
    assert said.startswith(f"seedvar: warning: seed 0 starts over: attempt {earlier.attempt_id} (")
    assert "left no training checkpoint to resume from" in said
    assert "one is saved every 15 minutes of training" in said  # the smoke profile's
    record = attempt_record(again.work_dir)  # what a driver reads of it
    assert record["took_over"]["attempt"] == earlier.attempt_id
    assert record["took_over"]["ray_task"] == "task-of-the-crash"
    assert record["continues"] == "starting over (no checkpoint to resume from)"


def test_a_seed_resumed_from_its_checkpoint_records_the_step_and_says_nothing_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    saved = ResumeCheckpoint(tmp_path / "resume.ckpt", None, every_n_steps=3)
    tiny_fit([saved])  # saved before step 3 (its only save)
    earlier, config = interrupted(tmp_path, (tmp_path / "resume.ckpt").read_bytes())
    capsys.readouterr()
    again = SeedJob.of(config)
    resumable = again.claim(config)
    assert resumable.checkpoint == again.checkpoint and resumable.step == 3
    assert capsys.readouterr().err == ""  # the driver tells of a retry; a resumed seed is quiet
    record = attempt_record(again.work_dir)
    assert record["continues"] == "resuming from its checkpoint at step 3"
    assert record["took_over"]["attempt"] == earlier.attempt_id
    assert json.loads((again.work_dir / "run.json").read_text())["run_id"] == "run-of-the-crash"
