"""Seeds trained stacked through a launch (`train.seeds_per_process`, seeds/group.py): each seed
published, tracked and adopted on its own, its predictions those of its solo run within the
stacked tolerance; a diverged seed fails alone; an interrupted group resumes whole from its
checkpoint, bit for bit; a checkpoint whose group is not all there starts its seed over; and
the settings it cannot take are refused in one line. K = 1 is today's path (the solo launch
here, and tests/test_train.py::test_one_seed_is_trained_evaluated_and_tracked)."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from seedvar.config import load_config
from seedvar.scale import launch as launching
from seedvar.seeds import group
from seedvar.seeds.finished import FinishedSeed
from seedvar.training import fit
from seedvar.training.resume import saved_at
from tests.helpers import QUICK, SMOKE, one_line_error, run_command, seedvar

# fp32 on the CPU, relative to the largest logit of a set: measured at most 4.7e-7 (tests/
# test_stacked.py measures the stacked core against its solo runs the same way)
TOLERANCE = 1e-6
SETS = ("mnli_matched", "mnli_mismatched", "hans")
LOGITS = ["logit_entailment", "logit_neutral", "logit_contradiction"]
# exact only in fp32, on uniform batches (grouped by length, a step's batches differ in size)
EXACT = ["train.precision=32-true", "train.eval_precision=32", "train.group_by_length=false"]


def study(*settings: str):  # noqa: ANN201
    return load_config(None, ["seeds=[0, 1, 2]", *EXACT, *settings], profile="smoke")


def logits(seed: FinishedSeed, name: str) -> np.ndarray:
    return pd.read_parquet(seed.predictions(name))[LOGITS].to_numpy(np.float64)


def runs(*seeds: FinishedSeed) -> list:  # noqa: ANN001
    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    return [client.get_run(seed.run_id()) for seed in seeds]


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("K = 1 trained seeds stacked")


@pytest.mark.slow
def test_seeds_trained_two_a_process_are_published_each_as_it_trains_alone(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    with monkeypatch.context() as patched:  # K = 1: today's path, never the stacked one
        patched.setattr(group, "fine_tune_stacked", _never)
        launching.launch(study("output_dir=alone"), where="here", echo=print)
    said: list[str] = []
    stacked, real = [], group.fine_tune_stacked

    def recorded(configs, *args):  # noqa: ANN001, ANN002, ANN202
        stacked.append([config.train.seed for config in configs])
        return real(configs, *args)

    with monkeypatch.context() as patched:
        patched.setattr(group, "fine_tune_stacked", recorded)
        report = launching.launch(
            study("output_dir=stacked", "train.seeds_per_process=2"), where="here", echo=said.append
        )
    assert report.finished == [0, 1, 2] and "(2 a process, stacked)" in said[0]
    assert stacked == [[0, 1]]  # seed 2, a group of one, alone
    differences = []
    for seed in (0, 1, 2):  # seeds 0 and 1 trained stacked, seed 2 alone
        mine, alone = FinishedSeed(Path("stacked"), seed), FinishedSeed(Path("alone"), seed)
        mine.check()  # its own manifest
        for name in SETS:
            theirs = logits(alone, name)
            differences.append(np.abs(logits(mine, name) - theirs).max() / np.abs(theirs).max())
        assert mine.metrics() == alone.metrics()
        pd.testing.assert_frame_equal(mine.trajectory(), alone.trajectory())
        run, solo = runs(mine, alone)
        assert run.info.status == "FINISHED" and run.info.run_id != solo.info.run_id
        assert run.data.params["train.seed"] == str(seed)
        curves = {key for key in run.data.metrics if not key.startswith("system/")}
        assert curves == {key for key in solo.data.metrics if not key.startswith("system/")}
        assert run.data.metrics["train/loss"] == pytest.approx(solo.data.metrics["train/loss"])
    assert max(differences) <= TOLERANCE, f"{max(differences):.1e} from the solo runs'"
    with monkeypatch.context() as patched:
        patched.setattr(group, "fine_tune_stacked", _never)
        again = launching.launch(
            study("output_dir=stacked", "train.seeds_per_process=2"), where="here", echo=print
        )
    assert again.already == [0, 1, 2] and again.finished == []  # adopted, none trained


@pytest.mark.slow
def test_a_diverged_seed_fails_alone_and_its_neighbour_is_published(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    real = fit.initialised

    def poisoned(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        models, streams = real(*args, **kwargs)
        with torch.no_grad():  # the second seed's head: its loss is non-finite at once
            models[1].classifier.weight.fill_(float("nan"))
        return models, streams

    monkeypatch.setattr(fit, "initialised", poisoned)
    config = study("seeds=[4, 5]", "train.seeds_per_process=2")
    report = launching.launch(config, where="here", echo=print)
    assert report.finished == [4] and list(report.failed) == [5]
    assert report.failed[5].error.startswith("training diverged: the loss became non-finite at")
    assert sorted(path.name for path in Path("runs").iterdir()) == ["seed-4"]
    FinishedSeed(Path("runs"), 4).check()
    client = MlflowClient(f"sqlite:///{study_dir}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    statuses = {
        run.info.run_name.split(" of ")[0]: run.info.status
        for run in client.search_runs([experiment], "tags.`seedvar.role` = 'seed'")
    }
    assert statuses == {"seed-4": "FINISHED", "seed-5": "FAILED"}


class _Interrupt(L.Callback):
    """Ctrl-C before the fourth step (after the checkpoint saved before the third)."""

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step == 3:
            raise KeyboardInterrupt


EVERY = "train.checkpoint_every_n_steps=2"


def interrupted(config, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """A launch of `config` interrupted (Ctrl-C) before its group's fourth step."""
    real = group.fine_tune_stacked
    with monkeypatch.context() as patched:
        patched.setattr(
            group,
            "fine_tune_stacked",
            lambda configs, tokenized, pad, callbacks, logger, checkpoint: real(
                configs, tokenized, pad, [*callbacks, _Interrupt()], logger, checkpoint
            ),
        )
        with pytest.raises(KeyboardInterrupt):
            launching.launch(config, where="here", echo=print)


@pytest.mark.slow
def test_a_group_interrupted_while_it_trains_resumes_whole_from_its_checkpoint(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    config = study("seeds=[0, 1]", "train.seeds_per_process=2", EVERY)
    interrupted(config, monkeypatch)
    assert not Path("runs").exists() or not list(Path("runs").iterdir())  # none published
    work = sorted(Path(".seedvar/runs").glob("seed-*.partial.*"))
    saved = [folder / "checkpoints" / "resume.ckpt" for folder in work]
    assert len(work) == 2 and not any((folder / "model").exists() for folder in work)
    assert saved[0].stat().st_ino == saved[1].stat().st_ino  # one file, in each seed's folder
    assert saved_at(saved[0]) == (2, [0, 1])
    capsys.readouterr()
    report = launching.launch(config, where="here", echo=print)
    assert report.finished == [0, 1] and "starts over" not in capsys.readouterr().err
    whole = launching.launch(
        study("seeds=[0, 1]", "train.seeds_per_process=2", EVERY, "output_dir=whole"),
        where="here",
        echo=print,
    )
    assert whole.finished == [0, 1]
    client = MlflowClient(f"sqlite:///{study_dir}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    for seed in (0, 1):  # resumed, bit for bit the uninterrupted run
        resumed, uninterrupted = FinishedSeed(Path("runs"), seed), FinishedSeed(Path("whole"), seed)
        resumed.check()
        for name in SETS:
            assert np.array_equal(logits(resumed, name), logits(uninterrupted, name)), name
        run = client.get_run(resumed.run_id())
        assert run.data.tags.get("seedvar.resumed") == "true" and run.info.status == "FINISHED"
        steps = [point.step for point in client.get_metric_history(run.info.run_id, "train/loss")]
        assert steps == sorted(set(steps))  # one curve, no step logged twice
    found = client.search_runs([experiment], "tags.`seedvar.role` = 'seed'")
    assert sorted(run.info.status for run in found) == ["FINISHED"] * 4  # none started over
    assert not list(Path(".seedvar/runs").glob("seed-*.partial.*"))


@pytest.mark.slow
def test_a_seed_whose_group_is_not_all_there_starts_over(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    interrupted(study("seeds=[0, 1]", "train.seeds_per_process=2", EVERY), monkeypatch)
    capsys.readouterr()
    alone = study("seeds=[1]", "train.seeds_per_process=2", EVERY)  # seed 1 without seed 0
    first = launching.launch(alone, where="here", echo=print)
    assert first.finished == [] and list(first.failed) == [1]
    held = "its training checkpoint is of seeds [0, 1] trained stacked, and seeds [1] resume"
    assert held in first.failed[1].error and "next attempt starts it over" in first.failed[1].error
    again = launching.launch(alone, where="here", echo=print)
    assert again.finished == [1] and "seed 1 starts over" in capsys.readouterr().err
    solo = launching.launch(study("seeds=[0]", EVERY), where="here", echo=print)  # K = 1
    assert solo.finished == [0]
    assert (
        "seed 0 starts over: its training checkpoint is of seeds [0, 1] trained stacked, and "
        "train.seeds_per_process is now 1" in capsys.readouterr().err
    )
    for seed in (0, 1):
        FinishedSeed(Path("runs"), seed).check()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["train.compile=true"], "train.compile is true, and stacked seeds are not compiled yet"),
        (["train.group_by_length=true"], "train.group_by_length is true"),
        (["train.precision=16-mixed"], "the precision is 16-mixed, whose loss scaling"),
        (["model.name=./roberta"], "model './roberta' is a roberta model, and only BERT's"),
    ],
)
def test_seeds_trained_stacked_are_refused_in_one_line_where_they_cannot_be(
    study_dir: Path, settings: list[str], message: str
):
    (study_dir / "roberta").mkdir()
    (study_dir / "roberta" / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    stacked = ["--set", "train.seeds_per_process=2", "--set", "train.group_by_length=false"]
    given = [part for setting in settings for part in ("--set", setting)]
    done = run_command(seedvar("launch", *SMOKE, *stacked, *given), timeout=QUICK, cwd=study_dir)
    one_line_error(
        done, f"train.seeds_per_process is 2 (seeds trained stacked in one process), but {message}"
    )
    assert not (study_dir / "runs").exists()


def test_a_sweep_with_seeds_trained_stacked_is_refused_in_one_line(study_dir: Path):
    stacked = ["--set", "train.seeds_per_process=2"]
    done = run_command(seedvar("sweep", *SMOKE, *stacked), timeout=QUICK, cwd=study_dir)
    one_line_error(done, "a sweep's trials train each seed alone")
