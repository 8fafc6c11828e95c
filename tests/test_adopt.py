"""`seedvar adopt`: a seed finished on another machine, carried without its weights (a folder
committed to git), is kept as the study's and published by the launch, not trained again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from seedvar.cli import main
from seedvar.seeds.finished import MANIFEST, manifest_of
from tests.helpers import SMOKE


def _carry(seed: Path, into: Path) -> Path:
    """What a session commits of a finished seed: everything but its weights."""
    return Path(shutil.copytree(seed, into / seed.name, ignore=shutil.ignore_patterns("model")))


def _fresh_machine() -> None:
    """This clone as a new machine finds it: no keep, no published seeds, no tracking store."""
    for folder in (".seedvar", "runs", "mlruns"):
        shutil.rmtree(folder, ignore_errors=True)


def test_a_carried_seed_is_published_by_the_launch_without_training(
    study_dir: Path, capsys: pytest.CaptureFixture
):
    assert main(["train", "--seed", "1", *SMOKE]) == 0
    metrics = json.loads(Path("runs/seed-1/metrics.json").read_text())
    carried = _carry(Path("runs/seed-1"), study_dir / "carried")
    _fresh_machine()
    capsys.readouterr()

    assert main(["adopt", str(carried), *SMOKE]) == 0
    out = capsys.readouterr().out
    assert f"seed 1 kept from {carried} in " in out
    assert main(["launch", *SMOKE, "--set", "seeds=[1]"]) == 0
    out = capsys.readouterr().out
    assert "all 1 seeds are finished in runs: nothing to do" in out
    assert json.loads(Path("runs/seed-1/metrics.json").read_text()) == metrics
    assert not Path("runs/seed-1/model").exists()  # carried without its weights
    assert main(["aggregate", *SMOKE, "--set", "seeds=[1]"]) == 0
    assert Path("results/seeds.csv").read_text().count("\n") == 2  # the header and seed 1

    assert main(["adopt", str(carried), *SMOKE]) == 0  # again: the kept one is kept
    assert len(list(Path(".seedvar/runs/seed-1").iterdir())) == 1


def test_a_carried_seed_of_another_recipe_or_other_data_is_refused(
    study_dir: Path, capsys: pytest.CaptureFixture
):
    assert main(["train", "--seed", "0", *SMOKE]) == 0
    assert main(["prepare", *SMOKE]) == 0
    carried = _carry(Path("runs/seed-0"), study_dir / "carried")
    _fresh_machine()
    capsys.readouterr()

    assert main(["adopt", str(carried), *SMOKE, "--set", "train.epochs=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{carried} holds seed 0 of another recipe than this study's" in err
    assert main(["adopt", str(carried), *SMOKE, "--set", "seeds=[1, 2]"]) == 2
    assert "or a seed it does not list" in capsys.readouterr().err

    assert main(["adopt", str(study_dir / "data"), *SMOKE]) == 2
    assert "is not a finished seed (it lacks metrics.json or config.yaml)" in (
        capsys.readouterr().err
    )

    recorded = json.loads((carried / "data.json").read_text())
    edited = {name: "0" * len(digest) for name, digest in recorded.items()}
    (carried / "data.json").write_text(json.dumps(edited))
    assert main(["adopt", str(carried), *SMOKE, "--prepared", "prepared"]) == 2
    assert "data.json differs from that seed's manifest.json (damaged since" in (
        capsys.readouterr().err
    )
    (carried / MANIFEST).write_text(json.dumps(manifest_of(carried)))  # made on other data
    assert main(["adopt", str(carried), *SMOKE, "--prepared", "prepared"]) == 2
    assert "was scored on other versions of the study's sets than the prepared ones" in (
        capsys.readouterr().err
    )
    assert not Path(".seedvar/runs/seed-0").exists()  # nothing kept by a refusal
