"""The `seedvar` command: errors as one line before any work, evaluate reproduces train."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from unittest.mock import Mock

import pytest

from seedvar.cli import main
from seedvar.errors import ModelError
from seedvar.pretrained import load_tokenizer
from seedvar.scale.cluster import SeedResources, this_machine
from tests.helpers import QUICK, SMOKE, STUDY, run_command


def test_bad_setting_is_one_line_and_exit_2(study_dir: Path, capsys: pytest.CaptureFixture):
    assert main(["train", "--seed", "1", *SMOKE, "--set", "train.learning_rate=-1"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert error.startswith("seedvar: error: invalid configuration")
    assert "train.learning_rate: Input should be greater than 0" in error
    assert not Path("runs").exists() and not Path("mlruns").exists()


def test_missing_data_file_stops_before_training(study_dir: Path, capsys):
    code = main(["train", *SMOKE, "--set", "task.train=data/offline/mnli/nope.parquet"])
    assert code == 2
    error = capsys.readouterr().err
    assert "data/offline/mnli/nope.parquet: file not found" in error
    assert not Path("runs").exists() and not Path("mlruns").exists()


def test_a_hub_study_without_the_hub_stops_at_once_naming_the_offline_study(study_dir: Path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    train = [sys.executable, "-m", "seedvar.cli", "train", *SMOKE]
    done = run_command([*train, "--set", "model.name=bert-base-uncased"], env=env, timeout=QUICK)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "seedvar: error: the smoke study loads model.name=bert-base-uncased from the Hugging "
        "Face hub, which cannot be reached (HF_HUB_OFFLINE is set); without it run an offline "
        "study: "
    )
    assert "`make study`" in done.stderr and "`make study PROFILE=cpu`" in done.stderr
    assert not Path("runs").exists()


def test_a_hub_model_that_cannot_load_names_the_offline_model(monkeypatch: pytest.MonkeyPatch):
    """A real transformers hub call in offline mode: the hub cannot be reached here. The hub
    client reads HF_HUB_OFFLINE once, when imported: set after that, its constant too (else the
    call waits out its network retries, about 50 s)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelError, match="cannot load model 'bert-base-uncased'") as error:
        load_tokenizer("bert-base-uncased")
    assert "--set model.name=minilm-offline" in str(error.value)


WITHOUT_RAY = (
    "import sys; sys.modules['ray'] = None; from seedvar.cli import main; sys.exit(main())"
)


def test_a_cluster_without_ray_names_the_extra(study_dir: Path):
    """The base install has no Ray: `seedvar launch` on a cluster says how to get it."""
    cluster = ["--set", "ray.address=auto"]
    done = run_command(
        [sys.executable, "-c", WITHOUT_RAY, "launch", *SMOKE, *cluster], timeout=QUICK
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "pip install -e '.[ray]'" in done.stderr and not Path("runs").exists()


@pytest.mark.slow
def test_without_ray_the_seeds_train_one_after_another(study_dir: Path):
    seeds = ["--set", "seeds=[0, 1]", "--set", "ray.cpus_per_seed=1"]
    checkpoints = ["--set", "train.checkpoint_every_n_steps=1"]  # Lightning's save, every step
    command = [sys.executable, "-c", WITHOUT_RAY, "launch", *SMOKE, *seeds, *checkpoints]
    done = run_command(command, timeout=STUDY)
    assert done.returncode == 0, done.stderr
    noise = ("weights_only", "MISSING", "newly initialized", "Warning", "Traceback", "Saving the")
    for line in (*noise, "Creating initial MLflow database tables"):
        assert line not in done.stdout + done.stderr  # the status line and a line per seed
    holds_two = this_machine().slots(SeedResources(1, 0)) >= 2  # else no Ray is needed
    assert ("Ray is not installed: seeds train one at a time" in done.stdout) == holds_two
    assert "up to 1 at once" in done.stdout
    assert sorted(p.name for p in Path("runs").iterdir()) == ["seed-0", "seed-1"]


@pytest.mark.slow
def test_evaluate_saved_weights_reproduces_the_training_run(study_dir: Path, capsys):
    assert main(["train", "--seed", "2", *SMOKE]) == 0
    assert "seed 2 finished" in capsys.readouterr().out
    assert main(["evaluate", "runs/seed-2/model", *SMOKE]) == 0
    trained = json.loads(Path("runs/seed-2/metrics.json").read_text())
    evaluated = json.loads(Path("runs/seed-2/evaluation/metrics.json").read_text())
    assert evaluated == pytest.approx(trained, abs=1e-9)
    assert main(["evaluate", "runs/seed-2/model", *SMOKE]) == 2  # never overwritten
    assert "--force" in capsys.readouterr().err


HEAVY = ("torch", "lightning", "transformers")
REPORT_HEAVY = f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"


@pytest.mark.parametrize(
    "command",
    ["prepare", "train", "evaluate runs/seed-0/model", "aggregate", "report", "sweep", "launch"],
)
def test_a_bad_value_stops_every_command_before_the_heavy_imports(study_dir: Path, command: str):
    code = f"import sys; from seedvar.cli import main; c = main(sys.argv[1:]); {REPORT_HEAVY}; "
    code += "sys.exit(c)"
    bad = [*command.split(), *SMOKE, "--set", "train.epochs=0"]
    done = run_command([sys.executable, "-c", code, *bad], timeout=QUICK)
    assert done.returncode == 2 and done.stdout.strip() == "[]", done.stdout + done.stderr
    assert done.stderr.startswith("seedvar: error: invalid configuration: train.epochs")


def test_an_unknown_key_gets_did_you_mean(study_dir: Path, capsys: pytest.CaptureFixture):
    assert main(["config", "--params", "nope.yaml"]) == 2
    assert "--params nope.yaml: no such file" in capsys.readouterr().err
    assert main(["config", "--set", "train.learnig_rate=1e-5"]) == 2
    assert "did you mean 'learning_rate'?" in capsys.readouterr().err


def test_a_spread_needs_two_seeds_per_trial(study_dir: Path, capsys: pytest.CaptureFixture):
    one = ["--set", "sweep.seeds_per_trial=1"]
    assert main(["config", *one, "--set", "sweep.mode=accuracy_and_spread"]) == 2
    assert "a trial's spread across seeds needs two seeds" in capsys.readouterr().err
    assert main(["config", *one, "--set", "sweep.mode=accuracy"]) == 0  # a search on accuracy


def test_a_misspelled_model_without_the_hub_gets_did_you_mean(study_dir: Path, capsys):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        assert main(["train", *SMOKE, "--set", "model.name=bert-base-uncsed"]) == 2
    error = capsys.readouterr().err
    assert "model.name 'bert-base-uncsed' is not a local folder" in error
    assert "did you mean 'bert-base-uncased'?" in error and "`make study`" in error


def test_a_model_the_reachable_hub_does_not_have_is_named(study_dir: Path, capsys):
    """The hub cannot be reached here: its answer for a name it does not know is mocked."""
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    def not_found(name: str, **_: object) -> None:
        response = Mock(status_code=404, headers={}, url=f"https://huggingface.co/{name}")
        raise RepositoryNotFoundError(f"404: {name}", response=response)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("seedvar.hub.unreachable_reason", lambda: None)
        patch.setattr(huggingface_hub, "model_info", not_found)
        assert main(["train", *SMOKE, "--set", "model.name=bert-base-uncsed"]) == 2
    error = capsys.readouterr().err
    assert "model.name 'bert-base-uncsed': no such model on the Hugging Face hub" in error
    assert "did you mean 'bert-base-uncased'?" in error and not Path("runs").exists()


def test_config_prints_integer_bounds_as_integers(study_dir: Path, capsys: pytest.CaptureFixture):
    assert main(["config", "--profile", "cpu"]) == 0
    assert "      high: 3000\n      log: false\n      step: 500\n" in capsys.readouterr().out


def test_config_gets_one_setting_as_json(study_dir: Path, capsys: pytest.CaptureFixture):
    assert main(["config", "--no-params", "--profile", "smoke", "--get", "seeds"]) == 0
    assert capsys.readouterr().out == "[0,1,2]\n"
    assert main(["config", "--profile", "smoke", "--get", "train.nope"]) == 2
    error = capsys.readouterr().err
    assert (
        error
        == "seedvar: error: --get train.nope: no such setting; `seedvar config` lists them all\n"
    )
