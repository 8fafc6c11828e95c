"""DVC sees the whole recipe, and a study travels through a DVC remote: real `dvc status`,
`dvc exp run`, `dvc push` and `dvc pull` in temporary git repositories."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers import (
    ONE_AT_A_TIME,
    QUICK,
    STUDY,
    commit,
    dvc_project,
    run_command,
    run_ok,
    seed_runs,
    stages_ran,
)

pytestmark = pytest.mark.slow
SEED_STAGES = {"train"}


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory, dvc_environment: None) -> Path:
    """A smoke study of two seeds, reproduced and committed in clone `a`."""
    project = dvc_project(
        tmp_path_factory.mktemp("clones") / "a", profile="smoke", seeds=[0, 1], ray=ONE_AT_A_TIME
    )
    run_ok("dvc", "repro", cwd=project)
    commit(project, "study")
    return project


def test_dvc_plots_show_needs_no_network_and_names_the_seed(study: Path, tmp_path: Path):
    run_ok("dvc", "plots", "show", "-o", str(tmp_path), cwd=study)
    page = (tmp_path / "index.html").read_text()
    assert "<script src=" not in page and "vegaEmbed(" in page  # Vega is inside the page
    assert '"field": "seed"' in page  # in the scatter's tooltip, each point's seed in its data
    assert set(re.findall(r'"seed": "(\d+)"', page)) == {"0", "1"}


def changed_stages(project: Path) -> set[str]:
    """The stages `dvc status` reports as changed."""
    status = json.loads(run_ok("dvc", "status", "--json", cwd=project))
    return {name.split(":")[-1] for name in status}


@pytest.fixture
def edited(study: Path) -> Iterator[callable]:
    """Edit a file of the study for one test; restored afterwards."""
    originals: dict[Path, str] = {}

    def edit(relative: str, old: str, new: str) -> None:
        path = study / relative
        originals.setdefault(path, path.read_text())
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))

    yield edit
    for path, text in originals.items():
        path.write_text(text)
    assert changed_stages(study) == set()


def test_a_reproduced_study_is_up_to_date(study: Path):
    assert changed_stages(study) == set()


def test_the_cache_links_the_seeds_weights_rather_than_copying_them(study: Path):
    """One copy of a seed's weights on disk: the workspace's is a hard link to the cache's (on
    this machine's file system, which has no reflinks)."""
    weights = (study / "runs" / "seed-0" / "model" / "model.safetensors").stat()
    cache = (study / ".dvc" / "cache").rglob("*")
    assert [path for path in cache if path.is_file() and path.stat().st_ino == weights.st_ino]


def test_a_profile_value_is_part_of_every_seeds_recipe(study: Path, edited):
    edited("src/seedvar/profiles/smoke.yaml", "learning_rate: 1.0e-03", "learning_rate: 2.0e-03")
    assert SEED_STAGES | {"prepare"} <= changed_stages(study)


def test_a_training_default_is_part_of_every_seeds_recipe(study: Path, edited):
    edited("src/seedvar/profiles/defaults.yaml", "gradient_clip: 1.0", "gradient_clip: 0.5")
    assert changed_stages(study) >= SEED_STAGES


def test_training_code_is_part_of_every_seeds_recipe(study: Path, edited):
    edited("src/seedvar/training/module.py", '"""The LightningModule', '"""The Lightning module')
    assert changed_stages(study) == SEED_STAGES


def test_report_code_reruns_only_the_report(study: Path, edited):
    edited("src/seedvar/report/study.py", "OURS, PAPER = ", "OURS, PAPER =  ")
    assert changed_stages(study) == {"report"}


def test_a_sentence_edited_reruns_only_the_report(study: Path, edited):
    edited(
        "src/seedvar/report/wording.py", "does not reproduce: every", "does not reproduce; every"
    )
    assert changed_stages(study) == {"report"}


def test_a_misspelt_profile_gets_seedvars_one_line_through_dvc_repro(tmp_path: Path):
    project = dvc_project(tmp_path / "misspelt", profile="smoek", seeds=[0])
    done = run_command(["dvc", "repro"], cwd=project, timeout=STUDY)
    assert done.returncode != 0
    assert "unknown profile 'smoek'; choose one of" in done.stdout + done.stderr
    assert "No such file" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "setting", ["train.learning_rate=3e-5", "train.epochs=2", "data.max_train_examples=100"]
)
def test_dvc_exp_run_sets_documented_keys(study: Path, setting: str):
    queued = run_ok("dvc", "exp", "run", "--queue", "-S", setting, cwd=study)
    assert f"Queueing with overrides '{{'params.yaml': ['{setting}']}}'" in queued
    run_ok("dvc", "queue", "remove", "--all", cwd=study)


@pytest.mark.parametrize("how", ["--temp", "--queue"])
def test_temporary_and_queued_experiments_track_into_the_workspace(study: Path, how: str):
    """DVC runs them in a copy of the workspace that it deletes afterwards: their MLflow runs
    and finished seeds go to the workspace's store and keep (anchored at DVC_ROOT). The
    experiment runs the seeds' stages (`train`), which are what write there."""
    rate = {"--temp": "0.002", "--queue": "0.003"}[how]
    run_ok("dvc", "exp", "run", how, "-S", f"train.learning_rate={rate}", "train", cwd=study)
    if how == "--queue":
        run_ok("dvc", "queue", "start", cwd=study)
        deadline = time.monotonic() + STUDY
        while "Success" not in run_ok("dvc", "queue", "status", cwd=study):
            assert "Failed" not in run_ok("dvc", "queue", "status", cwd=study)
            assert time.monotonic() < deadline
            time.sleep(2)
    runs = [r for r in seed_runs(study) if r.data.params["train.learning_rate"] == rate]
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]
    kept = [yaml.safe_load(p.read_text()) for p in study.glob(".seedvar/runs/seed-*/*/config.yaml")]
    assert sum(config["train"]["learning_rate"] == float(rate) for config in kept) == 2
    assert changed_stages(study) == set()  # the workspace itself is as it was


@pytest.fixture(scope="module")
def clone(study: Path) -> Path:
    """A fresh clone of the pushed study, pulled."""
    run_ok("dvc", "push", cwd=study)
    clone = study.parent / "b"
    run_ok("git", "clone", "-q", str(study), str(clone), cwd=study.parent)
    run_ok("dvc", "pull", cwd=clone)  # exits 0: every output of every pipeline is there
    return clone


def test_a_pulled_clone_is_up_to_date_with_the_verdict_and_its_plots(study: Path, clone: Path):
    leftovers = [  # what an attempt that died leaves behind, and a view being published
        study / ".seedvar" / "runs" / "seed-1.partial.0123abcd",
        study / "runs" / "seed-1.partial-0123abcd",
    ]
    for folder in leftovers:
        folder.mkdir()
    try:
        assert changed_stages(study) == set()  # not part of the study
    finally:
        for folder in leftovers:
            folder.rmdir()
    assert changed_stages(clone) == set()
    verdict = json.loads((clone / "results" / "verdict.json").read_text())
    assert verdict == json.loads((study / "results" / "verdict.json").read_text())
    diff = run_ok("dvc", "plots", "diff", "-o", "plots", cwd=clone)
    assert "failed to load" not in diff
    page = (clone / "plots" / "index.html").read_text()
    assert set(re.findall(r'"seed": "(\d+)"', page)) == {"0", "1"}
    assert "report_std.png" in page  # the wide panels are on the page too


def test_fewer_seeds_leave_the_workspace_and_come_back_without_training(clone: Path):
    fewer = run_ok("dvc", "exp", "run", "-S", "seeds=[0]", cwd=clone)
    assert "all 1 seeds are finished" in fewer  # the pulled seed 0, taken from DVC's cache
    assert not (clone / "runs" / "seed-1").exists()  # out of the workspace, in the cache
    again = run_ok("dvc", "exp", "run", "-S", "seeds=[0,1]", cwd=clone)
    assert "all 2 seeds are finished" in again or "train" not in stages_ran(again)
    assert "aggregate" in stages_ran(again)
    assert (clone / "runs" / "seed-1" / "metrics.json").is_file()
    assert len(seed_runs(clone)) == 0  # the clone has trained nothing
    run_ok("git", "checkout", "--", "params.yaml", "dvc.lock", cwd=clone, timeout=QUICK)
    run_ok("dvc", "checkout", cwd=clone, timeout=QUICK)


def test_a_pushed_study_is_pulled_into_a_fresh_clone_and_reproduces(clone: Path):
    assert stages_ran(run_ok("dvc", "repro", cwd=clone)) == set()  # trains nothing
    seed = clone / "runs" / "seed-1"
    run_ok("seedvar", "evaluate", str(seed / "model"), "--output", "again", cwd=clone)
    assert json.loads((clone / "again" / "metrics.json").read_text()) == json.loads(
        (seed / "metrics.json").read_text()
    )


RECORD_IMPORTS = """
import atexit, json, runpy, sys
out = sys.argv[1]
files = lambda: sorted(str(getattr(m, "__file__", None)) for m in list(sys.modules.values()))
atexit.register(lambda: json.dump(files(), open(out, "w")))
sys.argv = ["seedvar", *sys.argv[2:]]
runpy.run_module("seedvar.cli", run_name="__main__", alter_sys=True)
"""
ELSEWHERE = {  # each stage's command, its outputs written beside the study's, not over them
    "prepare": ["prepare", "--output", "elsewhere/prepared"],
    "train": [  # seed 0 trained again, in this process
        *("launch", "--prepared", "prepared", "--set", "seeds=[0]"),
        *("--set", "output_dir=elsewhere/runs"),
    ],
    "aggregate": ["aggregate", "--results", "elsewhere/results"],
    "report": ["report", "--results", "results", "--output", "elsewhere/report"],
}


def test_a_stages_code_dependencies_are_exactly_the_modules_it_imports(study: Path):
    """Each stage's command run as DVC runs it (its outputs pointed elsewhere): every seedvar
    module it imported lies in one of the stage's declared dependencies, and every declared
    module (or folder of modules) holds one it imported: nothing reruns a stage for code it
    never runs."""
    stages = yaml.safe_load((study / "dvc.yaml").read_text())["stages"]
    package = Path(__import__("seedvar").__file__).parent  # the installed src/seedvar
    imported, missing, extra = {}, {}, {}
    for name, stage in stages.items():
        assert stage["cmd"].split()[1] == ELSEWHERE[name][0]
        record = study / "elsewhere" / f"{name}.json"
        record.parent.mkdir(exist_ok=True)
        run_ok(sys.executable, "-c", RECORD_IMPORTS, str(record), *ELSEWHERE[name], cwd=study)
        found = [Path(f) for f in json.loads(record.read_text())]
        files = ["src/seedvar/cli.py"] + [  # the command, run as __main__
            f"src/seedvar/{f.relative_to(package).as_posix()}"
            for f in found
            if f.is_relative_to(package)
        ]
        deps = [dep.replace("${profile}", "smoke") for dep in stage["deps"]]
        imported[name] = files
        missing[name] = [f for f in files if not any(f == d or f.startswith(f"{d}/") for d in deps)]
        code = [d for d in deps if d.startswith("src/seedvar") and "/profiles" not in d]
        extra[name] = [d for d in code if not any(f == d or f.startswith(f"{d}/") for f in files)]
    assert "src/seedvar/training/fit.py" in imported["train"]  # it did train
    assert not any(missing.values()), f"add to dvc.yaml's deps: {json.dumps(missing, indent=1)}"
    assert not any(extra.values()), f"drop from dvc.yaml's deps: {json.dumps(extra, indent=1)}"
