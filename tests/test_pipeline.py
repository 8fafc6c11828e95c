"""The study through real `dvc repro` (smoke profile) in a temporary git repository."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from seedvar.results.aggregate import read_headline
from seedvar.scale.cluster import SeedResources, this_machine
from tests.helpers import (
    MINE,
    ONE_AT_A_TIME,
    QUICK,
    commit,
    dvc_project,
    run_command,
    run_ok,
    seed_runs,
    set_params,
    stages_ran,
    write_challenge_set,
)

pytestmark = pytest.mark.slow


def at_once(seeds: int) -> int:
    """How many seeds this machine trains at once with one CPU each (`ray.cpus_per_seed=1`,
    the smoke profile's), at most `seeds`: computed, so that the tests hold on any core count."""
    return min(seeds, this_machine().slots(SeedResources(1, 0)))


@pytest.fixture(scope="module")
def reproduced(dvc_environment: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The smoke study (seeds 0-2) after its first `dvc repro`, and what that printed. (That
    seeds trained at once predict what they predict one after another, bit for bit, is checked
    by benchmarks/seeds_at_once.py's smoke run, in tests/test_benchmarks.py.)"""
    project = dvc_project(
        tmp_path_factory.mktemp("study"), profile="smoke", seeds=[0, 1, 2], ray=ONE_CPU
    )
    return project, run_ok("dvc", "repro", cwd=project)


# docs/dvc.md's experiments at a glance: the headline column the paper is about, the seed count,
# the verdict and every param that changed, in 120 columns
GLANCE = (
    *("dvc", "exp", "show", "--no-pager", "--only-changed", "--drop"),
    r"^(?!Experiment|seeds|verdict|hans/ln_subject/object_swap.std|train\.).*",
)
ONE_CPU = {"address": None, "cpus_per_seed": 1, "gpus_per_seed": None}


def test_dvc_repro_runs_the_study_and_reruns_only_what_changed(
    reproduced: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
):
    project, first = reproduced
    assert stages_ran(first) == {"prepare", "train", "aggregate", "report"}
    assert f"3 of 3 seeds to train (0 finished before), up to {at_once(3)} at once" in first
    seeds = pd.read_csv(project / "results" / "seeds.csv")
    assert seeds["seed"].tolist() == [0, 1, 2] and "ln_subject/object_swap" in seeds
    headline = read_headline(project / "results" / "headline.json")
    assert headline["seeds"]["count"] == 3 and "hans/lexical_nonent" in headline
    assert headline["verdict"]["outcome"] == "inconclusive"  # 3 seeds: never conclusive
    for name in ("report.html", "report.md", "groups.png", "std.svg"):
        assert (project / "report" / name).is_file()
    stage = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]["report"]
    declared = {next(iter(o)) if isinstance(o, dict) else o for o in stage["outs"] + stage["plots"]}
    written = {f"report/{p.name}" for p in (project / "report").iterdir() if p.name != ".gitignore"}
    assert written <= declared, written - declared  # the stage writes only what it declares
    monkeypatch.setenv("COLUMNS", "120")  # the terminal's width, to DVC's table
    glance = run_ok(*GLANCE, cwd=project).splitlines()
    assert max(map(len, glance)) <= 120 and "…" not in "".join(glance), "\n".join(glance)
    assert glance[1].split() == [
        "Experiment",
        "hans/ln_subject/object_swap.std",
        "seeds.count",
        "verdict.outcome",
    ]
    assert glance[3].split() == ["workspace", "0", "3", "inconclusive"]
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    assert [out["path"] for out in lock["train"]["outs"]] == ["runs"]  # its own output, whole
    assert "persist" not in (project / "dvc.yaml").read_text()

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
    assert _most_at_once(children) == at_once(3)

    assert stages_ran(run_ok("dvc", "repro", cwd=project)) == set()  # nothing changed, nothing runs

    first_params = (project / "params.yaml").read_text()
    set_params(project, seeds=[0, 1, 2, 3])
    more = run_ok("dvc", "repro", cwd=project)
    assert stages_ran(more) == {"train", "aggregate", "report"}
    assert "1 of 4 seeds to train (3 finished before)" in more  # kept, not trained again
    assert len(pd.read_csv(project / "results" / "seeds.csv")) == 4
    assert [len(seed_runs(project, seed)) for seed in range(4)] == [1, 1, 1, 1]  # only seed 3

    set_params(project, train={"learning_rate": 0.0005})
    changed = run_ok("dvc", "repro", cwd=project)
    assert "train" in stages_ran(changed)
    assert "4 of 4 seeds to train (0 finished before)" in changed  # a new recipe: all, at once
    retrained = [max(seed_runs(project, seed), key=_started) for seed in range(4)]
    assert {run.data.params["train.learning_rate"] for run in retrained} == {"0.0005"}
    assert _most_at_once(retrained) == at_once(4)

    (project / "params.yaml").write_text(first_params)  # as at first
    back = run_ok("dvc", "repro", cwd=project)
    assert "train" not in stages_ran(back)  # DVC's run-cache has it: no persist in the way
    assert len(seed_runs(project)) == 8 and len(pd.read_csv(project / "results" / "seeds.csv")) == 3


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


def test_the_paper_study_without_the_hub_stops_before_any_work(
    tmp_path: Path, dvc_environment: None, monkeypatch: pytest.MonkeyPatch
):
    project = dvc_project(tmp_path, profile="paper")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub out of reach, on any machine
    done = run_command(["dvc", "repro"], cwd=project, timeout=QUICK)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert not [line for line in output.splitlines() if "Running stage 'train'" in line], output
    assert not (project / "prepared").exists() and not (project / "runs").exists()  # no work
    errors = [line for line in done.stderr.splitlines() if line.startswith("seedvar: error:")]
    assert len(errors) == 1 and "cannot be reached" in errors[0], output
    assert "make study PROFILE=cpu" in errors[0]


def test_a_declared_file_is_a_dependency_of_the_stage_that_reads_it(
    tmp_path: Path, dvc_environment: None
):
    """A diagnostic set of the user's own, declared in params.yaml from a CSV in data/: once
    the study ran, editing the CSV is a changed dependency of the prepare stage, and the next
    `dvc repro` scores the seed on the edited set (the finished seed of the old one is kept
    beside it, not published as if it were of the new)."""
    mine = {**MINE, "source": "data/mine/test.csv"}
    project = dvc_project(tmp_path, profile="smoke", seeds=[0], diagnostics={"mine": mine})
    (project / "data" / "mine").mkdir()
    frame = write_challenge_set(project / "data" / "mine" / "test.csv")
    commit(project, "my own set")
    run_ok("dvc", "repro", "train", cwd=project)  # the stages that read the set
    assert len(pd.read_parquet(project / "prepared" / "mine.parquet")) == len(frame)
    status = ("dvc", "status", "prepare")
    assert "up to date" in run_ok(*status, cwd=project, timeout=QUICK)
    gold_before = pd.read_parquet(project / "runs/seed-0/predictions/mine.parquet")["gold"]

    frame.loc[0, "verdict"] = {"entailment": "non-entailment"}.get(
        frame.loc[0, "verdict"], "entailment"
    )
    frame.to_csv(project / "data" / "mine" / "test.csv", index=False)
    changed = run_ok(*status, cwd=project, timeout=QUICK)
    assert "prepare:" in changed and "modified:" in changed and "data" in changed, changed

    run_ok("dvc", "repro", "train", cwd=project)
    gold = pd.read_parquet(project / "runs/seed-0/predictions/mine.parquet")["gold"]
    assert (gold != gold_before).sum() == 1  # scored on the edited set: its one changed label
    assert len(list((project / ".seedvar/runs/seed-0").iterdir())) == 2  # both seeds kept
    finished = [r for r in seed_runs(project, 0) if r.info.status == "FINISHED"]
    assert len(finished) == 2


def test_a_declared_file_outside_data_stops_the_stage_in_one_line(
    tmp_path: Path, dvc_environment: None
):
    project = dvc_project(tmp_path, profile="smoke", diagnostics={"mine": MINE})  # mine.csv
    write_challenge_set(project / "mine.csv")
    done = run_command(["dvc", "repro", "prepare"], cwd=project, timeout=QUICK)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("seedvar: error:")]
    assert errors == [
        "seedvar: error: diagnostics.mine.source: mine.csv: not inside the project's data/ "
        "folder, so DVC would not see the file change; move it into data/ (e.g. data/mine/) "
        "and point the setting there"
    ], done.stderr
    assert not (project / "prepared").exists()


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
    project = dvc_project(tmp_path, profile=profile, ray=ONE_AT_A_TIME, **design, **SMOKE_SIZE)
    assert "aggregate" in stages_ran(run_ok("dvc", "repro", cwd=project))
    seeds = pd.read_csv(project / "results" / "seeds.csv")
    assert seeds["seed"].tolist() == design["seeds"]
    assert {in_distribution, *diagnostic} <= set(seeds)
    components = pd.read_csv(project / "results" / "components.csv")
    per_seed = pd.read_csv(project / "results" / "trajectory_seeds.csv")
    assert sorted(set(per_seed["seed"])) == design["seeds"] and per_seed["step"].min() == 0
    if "factorial" in design:
        assert set(components["source"]) == {"init", "data order", "interaction"}
        assert len(seed_runs(project)) == 4  # each cell trained once
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
