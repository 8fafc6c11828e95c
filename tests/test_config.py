"""Config resolution and validation: defaults < profile < params.yaml < --set."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedvar.config import load_config, parse_override
from seedvar.errors import ConfigError
from tests.helpers import REPO


def test_defaults_are_the_papers_recipe(tmp_path: Path):
    config = load_config(tmp_path / "absent.yaml")
    assert config.profile == "paper"
    assert config.model.name == "bert-base-uncased" and config.model.max_length == 128
    train = config.train
    assert (train.learning_rate, train.batch_size, train.epochs) == (2e-5, 32, 3)
    assert (train.warmup_ratio, train.weight_decay, train.gradient_clip) == (0.1, 0.01, 1.0)
    assert config.task.name == "MNLI" and config.task.train == "hub:nyu-mll/glue:mnli:train"
    assert config.diagnostics["hans"].source.endswith("evaluation_set.txt")


def test_a_new_task_replaces_the_task_and_keeps_the_diagnostic_sets():
    rte = load_config(None, profile="rte")
    assert rte.task.name == "RTE" and list(rte.task.evaluation) == ["rte"]
    assert rte.task.augmentation is None and rte.reference is None  # the paper's are dropped
    assert list(rte.diagnostics) == ["hans", "glue_diagnostic"]
    assert rte.diagnostics["hans"].collapse == {"non-entailment": ["not_entailment"]}
    assert rte.diagnostics["hans"].groups["subcase"].within == "heuristic"  # kept from defaults
    dropped = load_config(None, ["diagnostics.glue_diagnostic=null"], profile="rte")
    assert list(dropped.diagnostics) == ["hans"]


def test_the_local_files_are_the_declared_files_not_urls_or_hub_sets():
    """What the DVC stages must see change (preflight.require_tracked)."""
    assert load_config(None, profile="paper").local_files() == {
        "reference.runs": "data/offline/reference/mccoy2020_runs.csv"  # the rest: hub, https
    }
    assert load_config(
        None, ["diagnostics.hans.source=data/mine/hans.csv"], "rte"
    ).local_files() == {
        "task.train": "data/offline/rte/train.parquet",
        "task.evaluation.rte.source": "data/offline/rte/validation.parquet",
        "diagnostics.hans.source": "data/mine/hans.csv",
        "diagnostics.glue_diagnostic.source": "data/offline/glue_diagnostic/ax_b.parquet",
    }


def test_precedence_profile_file_overrides(tmp_path: Path):
    params = tmp_path / "params.yaml"
    params.write_text("profile: cpu\ntrain:\n  epochs: 2\n  learning_rate: 3e-5\n")
    config = load_config(params, ["train.epochs=4"])
    assert config.profile == "cpu" and config.model.name == "minilm-offline"
    assert config.train.learning_rate == 3e-5  # YAML reads 3e-5 as text; still a float here
    assert config.train.epochs == 4
    assert load_config(params, profile="smoke").model.name == "tiny-random-bert"


def test_seeds_can_be_set_apart():
    config = load_config(None, ["train.seed=3", "train.data_seed=7"])
    assert config.train.effective_init_seed == 3 and config.train.effective_data_seed == 7


def test_config_hash_ignores_where_results_are_logged():
    base = load_config(None)
    assert base.hash() == load_config(None, ["tracking.experiment=other"]).hash()
    assert base.hash() != load_config(None, ["train.seed=1"]).hash()


def test_where_a_study_runs_is_not_its_recipe():
    """A seed trained on Ray is the seed `seedvar train` (and a DVC stage) would train."""
    base = load_config(None)
    on_ray = load_config(None, ["ray.address=ray://head:10001", "ray.gpus_per_seed=0.5"])
    assert on_ray.ray.gpus_per_seed == 0.5 and base.ray.gpus_per_seed == "auto"
    assert (on_ray.hash(), on_ray.study_hash()) == (base.hash(), base.study_hash())
    assert not any(key.startswith("ray.") for key in on_ray.flat())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.lerning_rate=1e-5", "unknown key 'train.lerning_rate'.*learning_rate"),
        ("train.learning_rate=-1e-5", "train.learning_rate: Input should be greater than 0"),
        ("train.batch_size=0", "train.batch_size: Input should be greater than 0"),
        ("train.epochs=three", "train.epochs: Input should be a valid integer"),
        ("train.precision=fp8", "train.precision: Input should be"),
        ("nonsense=1", "unknown key 'nonsense'"),
        ("train.epochs", "expected KEY=VALUE"),
        ("seeds=[0, 1", r"--set 'seeds=\[0, 1': the value is not valid YAML \(.* at line 1"),
        ("profile=gpu", "unknown profile 'gpu'"),
        ("train.learning_rate=.inf", "train.learning_rate: Input should be a finite number"),
        (
            "train.epochs=true",
            r"train.epochs: Input should be a valid integer \(got True\) \(in --set\)",
        ),
        ("train.group_by_length=1", "train.group_by_length: Input should be a valid boolean"),
        ("ray.gpus_per_seed=2", "ray.gpus_per_seed: .*a share of one GPU from 0 to 1"),
        ("ray.gpus_per_seed=true", "ray.gpus_per_seed: .*0.5 for two seeds per GPU"),
        ("ray.cpus_per_seed=1.5", "ray.cpus_per_seed: .*whole number of CPUs"),
        ("ray.cpus_per_seed=0", "ray.cpus_per_seed: Input should be greater than 0"),
        ("ray.max_retries=-1", "ray.max_retries: Input should be greater than or equal to 0"),
        ("ray.adress=auto", "unknown key 'ray.adress'.*address"),
        ("factorial.init_seeds=[0, 1]", "give both init_seeds and data_seeds"),
        ("train.trajectory_examples=-1", "train.trajectory_examples: Input should be greater"),
    ],
)
def test_bad_config_gives_one_clear_error(override: str, message: str):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


FACTORIAL = ["factorial.init_seeds=[0, 1, 2]", "factorial.data_seeds=[7, 8]"]


def test_a_factorial_design_gives_each_seed_job_its_pair():
    config = load_config(None, [*FACTORIAL, "seeds=[0, 1, 2, 3, 4, 5]"])
    pairs = [
        (
            config.with_seed(k).train.effective_init_seed,
            config.with_seed(k).train.effective_data_seed,
        )
        for k in config.seeds
    ]
    assert pairs == [(0, 7), (0, 8), (1, 7), (1, 8), (2, 7), (2, 8)]
    job = config.with_seed(3)
    assert job.factorial.cells == [] and job.study_hash() == config.study_hash()
    assert job.hash() != config.with_seed(2).hash()  # each cell its own recipe
    with pytest.raises(ConfigError, match="seed job 6 is not in the 3 x 2 factorial design"):
        config.with_seed(6)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["seeds=[0, 1, 2]"],
            r"a 3 x 2 factorial design has 6 seed jobs: set seeds to \[0, 1, ..., 5\]",
        ),
        (["seeds=[0, 1, 2, 3, 4, 5]", "train.init_seed=4"], "remove them"),
        (["seeds=[0, 1, 2, 3]", "factorial.data_seeds=[7, 7]"], "2 distinct data-order seeds"),
    ],
)
def test_a_factorial_design_refuses_what_does_not_fit(overrides: list[str], message: str):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [*FACTORIAL, *overrides])


def test_bad_params_file(tmp_path: Path):
    params = tmp_path / "params.yaml"
    params.write_text("train: [1, 2\n")
    with pytest.raises(ConfigError) as bad_yaml:
        load_config(params)
    assert str(bad_yaml.value) == (
        f"{params}: not valid YAML (expected ',' or ']', but got '<stream end>' at line 2, "
        "column 1); fix its syntax"
    )
    params.write_text("train:\n  epochs: true\n")
    with pytest.raises(ConfigError, match=rf"got True\) \(in {params}\)"):
        load_config(params)
    params.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match="not a text file"):
        load_config(params)
    with pytest.raises(ConfigError, match="is a directory, not a params file"):
        load_config(tmp_path)
    params.write_text("- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(params)


def test_a_profile_extends_another_and_replaces_its_search_space():
    base, hp = load_config(None, profile="inoculation"), load_config(None, profile="hp-inoculation")
    assert hp.data == base.data and hp.task == base.task
    assert hp.plan.held_in == base.plan.held_in and hp.plan.looks == [12, 24]  # its own plan
    assert hp.train.learning_rate == base.train.learning_rate and hp.train.val_every_n_steps == 585
    assert hp.seeds == list(range(100, 112)) and set(base.seeds).isdisjoint(hp.seeds)
    assert set(hp.sweep.space) == {
        "learning_rate",
        "epochs",
        "warmup_ratio",
    }  # not augment_examples
    assert load_config(None, profile="hp-paper").model == load_config(None, profile="paper").model


@pytest.mark.parametrize("extends", ["nope", "looped"])
def test_a_profile_extending_a_missing_or_looped_profile_is_refused(
    extends: str, monkeypatch, tmp_path
):
    from seedvar import config as configuration

    for name, text in {"looped": "extends: other\n", "other": "extends: looped\n"}.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    (tmp_path / "first.yaml").write_text(f"extends: {extends}\n")
    (tmp_path / "defaults.yaml").write_bytes(configuration.DEFAULTS.read_bytes())
    monkeypatch.setattr(configuration, "PROFILES_DIR", tmp_path)
    monkeypatch.setattr(configuration, "DEFAULTS", tmp_path / "defaults.yaml")
    with pytest.raises(ConfigError, match=f"extends '{extends}'|extends 'looped'"):
        load_config(None, profile="first")


def test_parse_override_builds_nested_values():
    assert parse_override("data.max_train_examples=200") == {"data": {"max_train_examples": 200}}
    assert parse_override("tracking.uri=") == {"tracking": {"uri": None}}


def test_a_given_search_space_replaces_the_default_one():
    space = "sweep.space={learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}}"
    assert list(load_config(None, [space]).sweep.space) == ["learning_rate"]
    assert "epochs" in load_config(None, []).sweep.space


def _config_reference():  # noqa: ANN202 (a module loaded from its file)
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "config_reference", REPO / "docs/hooks/config_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_settings_table_is_the_one_defaults_yaml_gives(tmp_path: Path):
    hook = _config_reference()
    page = (REPO / "docs/configuration.md").read_text()
    defaults = REPO / "src/seedvar/profiles/defaults.yaml"
    assert hook.current(page, defaults) == page  # else: `make docs`
    assert "| `train.learning_rate` | `2.0e-05` |" in page
    changed = tmp_path / "defaults.yaml"
    changed.write_text(
        defaults.read_text().replace("learning_rate: 2.0e-05", "learning_rate: 3e-5")
    )
    assert hook.current(page, changed) != page  # a changed default makes the table stale
