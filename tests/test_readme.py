"""The README's commands, run as written: `make study` on a smoke-sized project, the profile
switches through the same Makefile target (the hours-long runs as the command they become),
`make test`'s recipe."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import QUICK, REPO, dvc_project, make, run_command, run_ok

pytestmark = pytest.mark.slow


def readme_commands() -> list[str]:
    """Every command line of the README's bash blocks, without its comment."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    lines = (line.split("  #")[0].strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line]


def test_the_readme_shows_only_commands_tested_here():
    assert readme_commands() == [
        "make study",
        "make test",
        "make study PROFILE=paper",
        "make study PROFILE=cpu",
    ]


@pytest.fixture
def project(tmp_path: Path, dvc_environment: None) -> Path:
    """A fresh project of the smoke profile with the repo's Makefile and lock files."""
    project = dvc_project(tmp_path / "clone", profile="smoke", seeds=[0])
    shutil.copy2(REPO / "Makefile", project)
    shutil.copytree(REPO / "requirements", project / "requirements")
    return project


def test_make_study_runs_the_main_job(project: Path):
    output = run_ok(*make("study"), cwd=project)
    assert "Running stage 'train'" in output and "Running stage 'report'" in output
    assert (project / "results" / "verdict.json").is_file()
    assert "MLflow runs table: http://127.0.0.1:5000/#/experiments/" in output


def test_make_study_with_a_profile_runs_that_profiles_seeds(project: Path):
    output = run_ok(*make("study", "PROFILE=cpu", "DVC=echo dvc"), cwd=project)
    assert "dvc exp run -S profile=cpu -S seeds=[0,1,2,3,4,5,6,7,8,9,10,11]" in output


def test_make_study_with_a_misspelled_profile_is_one_line_and_runs_no_dvc(project: Path):
    before = run_ok("git", "status", "--porcelain", cwd=project, timeout=QUICK)
    done = run_command(make("study", "PROFILE=cpuu"), cwd=project, timeout=QUICK)
    assert done.returncode != 0 and "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("seedvar: error:")]
    assert errors == [
        "seedvar: error: unknown profile 'cpuu'; "
        "choose one of cpu, demo, hp-inoculation, hp-paper, inoculation, paper, rte, smoke"
    ], done.stderr
    assert "ERROR" not in done.stderr  # DVC's own errors: it did not run
    after = run_ok("git", "status", "--porcelain", cwd=project, timeout=QUICK)
    assert after == before and not (project / "dvc.lock").exists()  # params.yaml as it was


def test_make_study_of_the_paper_without_the_hub_stops_before_any_work(project: Path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = run_command(make("study", "PROFILE=paper"), cwd=project, env=env, timeout=QUICK)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("seedvar: error:")]
    assert len(errors) == 1 and "cannot be reached" in errors[0], done.stderr
    assert not (project / "prepared").exists() and not list(project.glob("runs/seed-*"))


def test_make_test_lints_type_checks_builds_the_docs_and_runs_pytest():
    """The recipe `make test` runs, expanded (`make -n`), in order: CI runs `make test` itself
    on a clean clone (.ci/run), so running its lint, type check and docs build again here would
    only repeat them (about 110 s of the suite)."""
    arguments = ("-n", "test", "PYTEST_ARGS=-q tests/test_recipe.py")
    done = run_command(make(*arguments), cwd=REPO, timeout=QUICK)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-5:] == [
        "ruff check .",
        "ruff format --check .",
        "mypy",
        "if [ -f mkdocs.yml ]; then NO_MKDOCS_2_WARNING=1 mkdocs build --strict; fi",
        "python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q tests/test_recipe.py",
    ]
