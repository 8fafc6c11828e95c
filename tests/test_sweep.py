"""Sweeps on the smoke profile with real Optuna storage (SQLite) and a real MLflow store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from seedvar import tracking
from seedvar.cli import main
from seedvar.config import load_config
from seedvar.errors import ConfigError, DataError
from seedvar.report.sweep import write_sweep_outputs
from seedvar.scale import launch as launching
from seedvar.seeds.seed import Every
from seedvar.sweep.pruning import stop_with_trial
from seedvar.sweep.trial import run_sweep
from tests.helpers import QUICK, STUDY, run_command

pytestmark = pytest.mark.slow
SPACE = (
    "sweep.space={learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}, "
    "augment_examples: {low: 0, high: 300, step: 100}}"
)
SMOKE = ["sweep.seeds_per_trial=2", "sweep.n_trials=3", "data.max_eval_examples=300", SPACE]
STORAGE = "sqlite:///sweeps/optuna.db"


def _sweep_runs(name: str) -> list:
    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    trials = f"tags.`seedvar.sweep` = '{name}' and tags.`seedvar.role` = 'trial'"
    return client.search_runs([experiment], trials)


def _children(parent_id: str) -> list:
    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    return client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{parent_id}'")


def test_sweep_trains_k_seeds_per_trial_and_writes_its_outputs(study_dir: Path):
    config = load_config(None, SMOKE, profile="smoke")
    study = run_sweep(config)
    loaded = optuna.load_study(study_name="seedvar-sweep", storage=STORAGE)
    states = [trial.state.name for trial in loaded.trials]
    assert len(states) == 3 and set(states) <= {"COMPLETE", "PRUNED"}
    first = loaded.trials[0]
    assert first.user_attrs["default"] is True and first.params["learning_rate"] == 1e-3
    assert first.params["augment_examples"] == 0
    assert {"mean/MNLI dev acc.", "std/hans headline mean", "std/ln_subject/object_swap"} <= set(
        first.user_attrs
    )
    assert first.value == first.user_attrs["mean/MNLI dev acc."]
    assert loaded.metric_names == ["mean MNLI dev acc."]
    assert loaded.user_attrs["profile"] == "smoke" and loaded.user_attrs["mode"] == "accuracy"

    trials = _sweep_runs("seedvar-sweep")
    assert sorted(run.info.run_name for run in trials) == ["trial 0", "trial 1", "trial 2"]
    for run in trials:
        seeds = _children(run.info.run_id)
        assert "train.seed" not in run.data.params and run.data.tags["mlflow.note.content"]
        if run.info.status == "FINISHED":
            assert sorted(child.info.run_name.split(" of ")[0] for child in seeds) == [
                "seed-0",
                "seed-1",
            ]
            assert {child.data.tags["seedvar.sweep"] for child in seeds} == {"seedvar-sweep"}
            assert "mean/hans/ln_subject/object_swap" in run.data.metrics

    written = write_sweep_outputs(config, study, Path("results/sweep"))
    table = pd.read_csv("results/sweep/trials.csv")
    assert table["trial"].tolist() == [0, 1, 2] and "param/learning_rate" in table
    assert {"optimization_history.png", "accuracy_vs_spread.png"} <= {p.name for p in written}
    report = Path("results/sweep/report.md").read_text()
    assert "configurations completed" in report
    completed = int((table["state"] == "COMPLETE").sum())  # each one's verdict, or why ignored
    assert completed >= 1 and report.count("\n- trial ") == completed

    again = run_sweep(config)  # already at n_trials: nothing more runs
    assert len(again.trials) == 3
    complete = next(t for t in loaded.trials if t.state.name == "COMPLETE")
    damaged = Path(complete.user_attrs["output_dir"]) / "seed-0" / "metrics.json"
    damaged.unlink()  # the view is hard links into the keep: a new file, not the kept one
    damaged.write_text("{}")
    with pytest.raises(DataError, match=f"^{damaged} is damaged"):  # the manifest's check
        write_sweep_outputs(config, study, Path("results/sweep"))


def test_pruned_trials_are_pruned_in_optuna_and_mlflow(study_dir, monkeypatch):
    always = optuna.pruners.ThresholdPruner(lower=2.0)  # accuracy < 2: prune at first report
    monkeypatch.setattr(optuna.pruners, "MedianPruner", lambda **_: always)
    config = load_config(
        None, [*SMOKE, "sweep.n_trials=2", "sweep.study_name=pruned"], profile="smoke"
    )
    study = run_sweep(config)
    assert [trial.state.name for trial in study.trials] == ["PRUNED", "PRUNED"]
    for run in _sweep_runs("pruned"):
        assert run.info.status == "KILLED" and run.data.tags["seedvar.pruned"] == "true"
        (seed,) = _children(run.info.run_id)  # pruned during its first seed
        assert seed.info.status == "KILLED" and seed.data.tags["seedvar.pruned"] == "true"


def test_a_one_seed_search_prunes_on_validations_within_the_epoch(study_dir: Path):
    steps = ["sweep.seeds_per_trial=1", "train.val_every_n_steps=4", "sweep.study_name=search"]
    config = load_config(None, [*SMOKE, *steps, "sweep.n_trials=2"], profile="smoke")
    study = run_sweep(config)
    first = study.trials[0]  # 13 steps of 16 pairs: validated at steps 4, 8 and 12
    assert sorted(first.intermediate_values) == [4, 8, 12]
    assert first.state.name == "COMPLETE" and first.value == first.user_attrs["mean/MNLI dev acc."]
    assert study.trials[0].user_attrs["seeds"] == [0]
    written = {p.name for p in write_sweep_outputs(config, study, Path("results/search"))}
    report = Path("results/search/report.md").read_text()
    assert "measures no seed spread and gives no verdict" in report and "nan" not in report
    assert "accuracy_vs_spread.png" not in written  # one seed a trial: no spread to plot


def test_multi_objective_mode_returns_a_pareto_front(study_dir: Path):
    config = load_config(
        None, [*SMOKE, "sweep.mode=accuracy_and_spread", "sweep.study_name=pareto"], profile="smoke"
    )
    study = run_sweep(config)
    assert len(study.directions) == 2 and len(study.trials) == 3
    front = study.best_trials
    assert front and all(len(trial.values) == 2 for trial in front)
    for trial in front:  # nobody on the front is beaten on both objectives
        assert not any(
            o.values[0] >= trial.values[0]
            and o.values[1] <= trial.values[1]
            and o.values != trial.values
            for o in study.trials
        )


def test_interrupted_sweep_resumes_and_retries_the_dead_trial(study_dir: Path, spawn):
    command = [
        sys.executable,
        "-m",
        "seedvar.cli",
        "sweep",
        "--profile",
        "smoke",
        *[arg for item in SMOKE for arg in ("--set", item)],
        "--set",
        "sweep.heartbeat_seconds=1",
        "--set",
        "sweep.pruner=none",
    ]
    sweep = spawn(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while True:  # wait until trial 1 is training its first seed, then kill the sweep
        assert sweep.poll() is None and time.monotonic() < deadline
        if (
            list(Path(".seedvar/sweeps/seedvar-sweep").glob("*/seed-0.partial*"))
            and len(list(Path(".seedvar/sweeps/seedvar-sweep").glob("*/seed-1"))) == 1
        ):
            break
        time.sleep(0.2)
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.wait(timeout=QUICK)
    time.sleep(3)  # past the heartbeat grace period: the dead trial is stale

    resumed = run_command(command, timeout=STUDY)
    assert resumed.returncode == 0, resumed.stderr
    study = optuna.load_study(study_name="seedvar-sweep", storage=STORAGE)
    states = [trial.state.name for trial in study.trials]
    assert states.count("COMPLETE") == 3 and states.count("FAIL") == 1 and len(states) == 4
    (dead,) = [trial for trial in study.trials if trial.state.name == "FAIL"]
    (retry,) = [t for t in study.trials if t.system_attrs.get("failed_trial") == dead.number]
    assert retry.params == dead.params and retry.state.name == "COMPLETE"


def test_ctrl_c_fails_the_trial_for_a_retry_and_ends_its_runs_killed(study_dir: Path, spawn):
    options = [arg for item in SMOKE for arg in ("--set", item)]
    command = [sys.executable, "-m", "seedvar.cli", "sweep", "--profile", "smoke", *options]
    with Path("sweep.err").open("w") as errors:  # a file: a full pipe would stall the sweep
        sweep = spawn(command, stdout=subprocess.DEVNULL, stderr=errors)
    deadline = time.monotonic() + 240
    while not list(Path(".seedvar/sweeps/seedvar-sweep").glob("*/seed-0.partial*/run.json")):
        assert sweep.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)  # until the first trial's first seed has its MLflow run
    sweep.send_signal(signal.SIGINT)
    assert sweep.wait(timeout=QUICK) == 130
    last_line = Path("sweep.err").read_text().strip().splitlines()[-1]
    assert last_line == "seedvar: interrupted; run the same command again to resume"
    study = optuna.load_study(study_name="seedvar-sweep", storage=STORAGE)
    (failed,) = study.trials[:1]
    assert failed.state.name == "FAIL"
    (queued,) = [t for t in study.trials if t.user_attrs.get("retry_of") == failed.number]
    assert queued.state.name == "WAITING"
    assert queued.system_attrs["fixed_params"] == failed.params  # run first on resuming
    (trial_run,) = _sweep_runs("seedvar-sweep")
    assert trial_run.info.status == "KILLED"
    assert {run.info.status for run in _children(trial_run.info.run_id)} == {"KILLED"}


def test_a_space_key_given_replaces_that_key_and_a_whole_space_replaces_the_space():
    one_key = load_config(None, ["sweep.space.epochs={choices: [1, 2]}"], profile="cpu")
    assert set(one_key.sweep.space) == set(load_config(None, profile="cpu").sweep.space)
    assert one_key.sweep.space["epochs"].choices == [1, 2]
    assert one_key.sweep.space["epochs"].low is None  # the key replaced, not merged
    whole = load_config(None, ["sweep.space={epochs: {choices: [1]}}"], profile="cpu")
    assert set(whole.sweep.space) == {"epochs"}
    assert set(load_config(None, profile="smoke").sweep.space) == {"learning_rate"}


def test_a_grid_sweep_runs_each_configuration_once_and_reuses_adopted_seeds(
    study_dir: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    grid = ["--set", "sweep.sampler=grid", "--set", "sweep.pruner=none"]
    grid += ["--set", "sweep.space={augment_examples: {choices: [0, 100]}}"]
    sweep = ["--profile", "smoke", *grid, *[a for item in SMOKE[:3] for a in ("--set", item)]]
    shown = ["--profile", "smoke", "--set", "data.augment_examples=100"]
    for seed in ("0", "1"):  # the study of 100 pairs, trained beside the sweep
        assert main(["train", "--seed", seed, *shown, "--set", "data.max_eval_examples=300"]) == 0
    trained = {s: Path(f"runs/seed-{s}/metrics.json").read_text() for s in (0, 1)}
    capsys.readouterr()

    adopt = ["adopt", "runs/seed-0", "runs/seed-1", "--sweep", *shown, "--set", "seeds=[5]"]
    assert main([*adopt, "--set", "data.max_eval_examples=300"]) == 0
    assert "2 seeds kept: `seedvar sweep` reuses them" in capsys.readouterr().out  # its 0 and 1
    assert main(["sweep", *sweep]) == 2  # 3 trials asked of a grid of 2
    assert "n_trials 3 is more than the grid's 2 configurations; set it to 2" in (
        capsys.readouterr().err
    )
    monkeypatch.setattr(launching, "STATUS_SECONDS", 0.0)  # a status line after every seed
    assert main(["sweep", *sweep, "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count(" was found finished in ") == 2 and out.count(" finished in ") == 4
    assert "] 1/4 finished, 0 running, 1 waiting, 0 failed; " in out  # counts trial 1's seeds
    assert "] 2/4 finished, 0 running, 2 waiting, 0 failed; " in out  # trial 1 started
    study = optuna.load_study(study_name="seedvar-sweep", storage=STORAGE)
    assert [trial.state.name for trial in study.trials] == ["COMPLETE", "COMPLETE"]
    assert sorted(trial.params["augment_examples"] for trial in study.trials) == [0, 100]
    (shown_trial,) = [t for t in study.trials if t.params["augment_examples"] == 100]
    folder = Path(shown_trial.user_attrs["output_dir"])
    reused = {s: (folder / f"seed-{s}/metrics.json").read_text() for s in (0, 1)}
    assert reused == trained  # not trained again


def test_the_grid_sampler_needs_choices():
    with pytest.raises(ConfigError, match="give learning_rate choices, not low/high"):
        load_config(None, ["sweep.sampler=grid"], profile="smoke")


def test_a_seed_stops_once_its_trial_was_pruned_or_failed_on_another_seed(tmp_path: Path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/optuna.db")
    study = optuna.create_study(storage=storage)
    running, pruned, failed = study.ask(), study.ask(), study.ask()
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    study.tell(failed, state=optuna.trial.TrialState.FAIL)
    stop_with_trial(storage, running._trial_id)()  # still running: the seed goes on
    with pytest.raises(tracking.RunPruned, match="pruned on its first seed"):
        stop_with_trial(storage, pruned._trial_id)()
    with pytest.raises(tracking.RunStopped, match="failed on another seed") as stopped:
        stop_with_trial(storage, failed._trial_id)()
    assert not isinstance(stopped.value, tracking.RunPruned)

    checks: list[float] = []
    every = Every(lambda: checks.append(time.monotonic()), seconds=3600.0)
    for _ in range(5):
        every.on_train_batch_start()
    assert len(checks) == 1  # the first batch's check, then none within the hour
