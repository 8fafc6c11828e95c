"""The study through real `dvc repro` (smoke profile) in a temporary git repository."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import (
    QUICK,
    dvc_project,
    run_command,
    run_ok,
    seed_runs,
    set_params,
    stages_ran,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def project(tmp_path: Path, dvc_environment: None) -> Path:
    """A git + DVC repository holding the pipeline on the smoke profile, seeds 0-2."""
    return dvc_project(tmp_path, profile="smoke", seeds=[0, 1, 2])


@pytest.fixture(scope="module")
def reproduced(dvc_environment: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The smoke study (seeds 0-2) after its first `dvc repro`, and what that printed; shared by
    the tests below, the one that changes it last."""
    project = dvc_project(tmp_path_factory.mktemp("study"), profile="smoke", seeds=[0, 1, 2])
    return project, run_ok("dvc", "repro", cwd=project)


def test_seeds_trained_at_once_predict_what_seeds_trained_one_after_another(
    reproduced: tuple[Path, str],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
):
    """Bit for bit, at the same thread count (1: what a seed at once has here; a float sum
    depends on the thread count, so 2 threads differ in the last bits of the logits)."""
    project = reproduced[0]
    alone = dvc_project(tmp_path_factory.mktemp("alone"), profile="smoke", seeds=[0, 1, 2])
    set_params(alone, ray={"address": None, "cpus_per_seed": 2, "gpus_per_seed": None})
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # torch's thread count in `seedvar train`
    output = run_ok("dvc", "repro", "aggregate", cwd=alone)
    assert "at once" not in output  # 2 CPUs a seed on 2 cores: one seed at a time, no Ray
    assert _most_at_once(seed_runs(alone)) == 1
    for seed in range(3):
        for path in (project / "runs" / f"seed-{seed}" / "predictions").iterdir():
            theirs = alone / "runs" / f"seed-{seed}" / "predictions" / path.name
            assert pd.read_parquet(path).equals(pd.read_parquet(theirs)), path
    assert (project / "results" / "seeds.csv").read_text() == (
        alone / "results" / "seeds.csv"
    ).read_text()


def test_dvc_repro_runs_the_study_and_reruns_only_what_changed(reproduced: tuple[Path, str]):
    project, first = reproduced
    assert stages_ran(first) == {"prepare", "seed@0", "seed@1", "seed@2", "aggregate", "report"}
    assert "3 of 3 seeds to train" in first and "up to 2 at once" in first  # in seed@0's stage
    seeds = pd.read_csv(project / "results" / "seeds.csv")
    assert seeds["seed"].tolist() == [0, 1, 2] and "ln_subject/object_swap" in seeds
    headline = json.loads((project / "results" / "headline.json").read_text())
    assert headline["seeds"]["count"] == 3 and "hans/lexical_nonent" in headline
    assert headline["verdict"]["outcome"] == "inconclusive"  # 3 seeds: never conclusive
    for name in ("report.html", "report.md", "groups.png", "std.svg"):
        assert (project / "report" / name).is_file()
    assert "mnli/matched_accuracy" in run_ok("dvc", "metrics", "show", cwd=project)

    client = MlflowClient(f"sqlite:///{project}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    study = client.search_runs([experiment], "tags.`seedvar.role` = 'study'")
    assert len(study) == 1 and study[0].info.status == "FINISHED"
    children = client.search_runs(
        [experiment], f"tags.`mlflow.parentRunId` = '{study[0].info.run_id}'"
    )
    names = sorted(run.info.run_name for run in children)
    assert [name.split(" of ")[0] for name in names] == ["seed-0", "seed-1", "seed-2"]
    assert all(name.endswith(study[0].info.run_name.removeprefix("study ")) for name in names)
    commit = run_ok("git", "rev-parse", "HEAD", cwd=project).strip()
    assert {run.data.tags["mlflow.source.git.commit"] for run in [*study, *children]} == {commit}
    assert "study/hans/lexical_nonent/std" in study[0].data.metrics
    assert {a.path for a in client.list_artifacts(study[0].info.run_id)} == {"results", "report"}
    assert _most_at_once(children) == 2  # 2 cores, 1 per seed

    assert stages_ran(run_ok("dvc", "repro", cwd=project)) == set()  # nothing changed, nothing runs

    set_params(project, seeds=[0, 1, 2, 3])
    assert stages_ran(run_ok("dvc", "repro", cwd=project)) == {"seed@3", "aggregate", "report"}
    assert len(pd.read_csv(project / "results" / "seeds.csv")) == 4
    assert [len(seed_runs(project, seed)) for seed in range(4)] == [1, 1, 1, 1]  # only seed 3

    set_params(project, train={"learning_rate": 0.0005})
    changed = run_ok("dvc", "repro", cwd=project)
    assert {"seed@0", "seed@1", "seed@2", "seed@3"} <= stages_ran(changed)
    assert "4 of 4 seeds to train (0 finished before)" in changed  # a new recipe: all, at once
    retrained = [max(seed_runs(project, seed), key=_started) for seed in range(4)]
    assert {run.data.params["train.learning_rate"] for run in retrained} == {"0.0005"}
    assert _most_at_once(retrained) == 2


def _started(run) -> int:  # noqa: ANN001
    return run.info.start_time


def _most_at_once(runs: list) -> int:
    """The most seed runs that were training at the same moment."""
    ends = [(run.info.start_time, 1) for run in runs] + [(run.info.end_time, -1) for run in runs]
    running = most = 0
    for _, change in sorted(ends):
        running += change
        most = max(most, running)
    return most


def test_killed_repro_redoes_only_unfinished_seeds(project: Path, spawn):
    run_ok("dvc", "repro", "prepare", cwd=project)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    repro = spawn(["dvc", "repro"], cwd=project, **quiet)
    deadline = time.monotonic() + 240
    while not _published(project):  # a first seed is done
        assert repro.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(repro.pid, signal.SIGKILL)
    repro.wait(timeout=QUICK)
    done = _published(project)
    assert 1 <= len(done) < 3

    rerun = run_ok("dvc", "repro", cwd=project)
    assert {"seed@1", "seed@2", "aggregate", "report"} <= stages_ran(rerun)
    assert len(pd.read_csv(project / "results" / "seeds.csv")) == 3
    for seed in done:  # kept, not trained again
        assert [run.info.status for run in seed_runs(project, seed)].count("FINISHED") == 1


def test_a_seed_finished_after_dvc_was_killed_is_reused_not_retrained(project: Path, spawn):
    set_params(project, seeds=[0])
    run_ok("dvc", "repro", "prepare", cwd=project)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    repro = spawn(["dvc", "repro"], cwd=project, **quiet)
    deadline = time.monotonic() + 240
    while not list((project / "runs").glob("seed-0.partial*")):
        assert repro.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(repro.pid, signal.SIGKILL)  # dvc only: its `seedvar train` child goes on alone
    repro.wait(timeout=QUICK)
    lock = project / "runs" / "seed-0.lock"
    while not (project / "runs" / "seed-0" / "metrics.json").exists() or _locked(lock):
        assert time.monotonic() < deadline
        time.sleep(0.2)

    rerun = run_ok("dvc", "repro", cwd=project)
    assert {"seed@0", "aggregate", "report"} <= stages_ran(rerun)
    runs = seed_runs(project, 0)
    assert [run.info.status for run in runs] == ["FINISHED"]  # trained once, kept on rerun


def _published(project: Path) -> list[int]:
    """The seeds published in the project's runs/ (not the work folders of attempts)."""
    folders = [path.parent.name for path in (project / "runs").glob("seed-*/metrics.json")]
    return sorted(int(name[5:]) for name in folders if name[5:].isdigit())


def _locked(path: Path) -> bool:
    """Whether a process holds the seed lock at `path`."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_the_paper_study_without_the_hub_stops_before_any_work(
    tmp_path: Path, dvc_environment: None, monkeypatch: pytest.MonkeyPatch
):
    project = dvc_project(tmp_path, profile="paper")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub out of reach, on any machine
    done = run_command(["dvc", "repro"], cwd=project, timeout=QUICK)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert not [line for line in output.splitlines() if "Running stage 'seed@" in line], output
    assert not (project / "prepared").exists() and not (project / "runs").exists()  # no work
    errors = [line for line in done.stderr.splitlines() if line.startswith("seedvar: error:")]
    assert len(errors) == 1 and "cannot be reached" in errors[0], output
    assert "make study PROFILE=cpu" in errors[0]


SMOKE_SIZE = {  # an offline study's declaration, at the smoke profile's size
    "model": {"name": "tiny-random-bert", "max_length": 64},
    "data": {"max_train_examples": 200, "max_val_examples": 100, "max_eval_examples": 300},
    "train": {"epochs": 1, "batch_size": 16, "learning_rate": 1.0e-3},
}


FACTORIAL = {"factorial": {"init_seeds": [0, 1], "data_seeds": [5, 6]}, "seeds": [0, 1, 2, 3]}


@pytest.mark.parametrize(
    ("profile", "in_distribution", "diagnostic", "design"),
    [
        (
            "cpu",
            "MNLI dev acc.",
            ["SNLI dev acc.", "glue_diagnostic/logic", "Lexical (nonent)"],
            {"seeds": [0, 1]},
        ),
        ("rte", "RTE dev acc.", ["glue_diagnostic/logic", "Lexical (nonent)"], FACTORIAL),
    ],
)
def test_each_offline_study_runs_through_dvc_repro_at_smoke_size(
    tmp_path: Path,
    dvc_environment: None,
    profile: str,
    in_distribution: str,
    diagnostic: list,
    design: dict,
):
    """The rte study as a 2 x 2 factorial design: a seed stage per cell, both seeds tagged
    in MLflow, the seed variance split by source, a trajectory per seed."""
    project = dvc_project(tmp_path, profile=profile, **design, **SMOKE_SIZE)
    assert "aggregate" in stages_ran(run_ok("dvc", "repro", cwd=project))
    seeds = pd.read_csv(project / "results" / "seeds.csv")
    assert seeds["seed"].tolist() == design["seeds"]
    assert {in_distribution, *diagnostic} <= set(seeds)
    components = pd.read_csv(project / "results" / "components.csv")
    per_seed = pd.read_csv(project / "results" / "trajectory_seeds.csv")
    assert sorted(set(per_seed["seed"])) == design["seeds"] and per_seed["step"].min() == 0
    if "factorial" in design:
        assert set(components["source"]) == {"init", "data order", "interaction"}
        assert len(seed_runs(project)) == 4  # the later seed stages kept their cells
        tags = {
            run.info.run_name.split(" of ")[0]: (
                run.data.tags["seedvar.init_seed"],
                run.data.tags["seedvar.data_seed"],
            )
            for run in seed_runs(project)
        }
        assert tags == {
            "seed-0": ("0", "5"),
            "seed-1": ("0", "6"),
            "seed-2": ("1", "5"),
            "seed-3": ("1", "6"),
        }
    else:
        assert set(components["source"]) == {"seed (init and data order together)"}
    decision = json.loads((project / "results" / "verdict.json").read_text())
    assert decision["design"]["reference"] == [in_distribution]
    assert set(diagnostic) <= set(decision["design"]["tested"])
    # a smoke study has fewer than 10 seeds: no conclusive outcome, whatever the rule
    assert decision["outcome"] == "inconclusive" and decision["rule"] not in (
        "passes",
        "none passes",
    )
    sets = {path.stem for path in (project / "results" / "agreement").iterdir()}
    assert {"hans", "glue_diagnostic"} <= sets
