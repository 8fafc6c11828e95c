"""One definition of the recipe: every hash, the prepared-inputs key and aggregate's
one-recipe check agree on what changes a seed's result."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedvar.config import Config, load_config
from seedvar.data.prepared import inputs_key
from seedvar.errors import SeedvarError
from seedvar.results.aggregate import as_trained, require_one_recipe
from seedvar.seeds.finished import CONFIG, METRICS

TRAINED_HERE = ["train.precision=32-true", "train.eval_precision=32"]  # what `auto` chose
CHANGES = {
    "nothing": ([], True),
    "the cache folder": (["data.cache_dir=/elsewhere/cache"], True),
    "the reference runs": (["reference.runs=other/runs.csv"], True),
    "the logging interval": (["train.log_every_n_steps=7"], True),
    "the MLflow experiment": (["tracking.experiment=another"], True),
    "the learning rate": (["train.learning_rate=3e-5"], False),
    "the training precision": (["train.precision=bf16-mixed"], False),
    "the evaluation precision": (["train.eval_precision=bf16"], False),
}


def smoke(*overrides: str) -> Config:
    return load_config(None, list(overrides), profile="smoke")


def finish(runs: Path, seed: int, config: Config) -> None:
    """A seed folder as a finished seed leaves it: its recorded config and its metrics."""
    folder = runs / f"seed-{seed}"
    folder.mkdir(parents=True)
    config.with_seed(seed).save(folder / CONFIG)
    (folder / METRICS).write_text("{}")


@pytest.mark.parametrize("change, together", CHANGES.values(), ids=CHANGES)
def test_seeds_aggregate_together_exactly_when_their_study_hashes_are_equal(
    tmp_path: Path, change: list[str], together: bool
):
    first, second = smoke(*TRAINED_HERE), smoke(*TRAINED_HERE, *change)
    finish(tmp_path, 0, first)
    finish(tmp_path, 1, second)
    same_hash = first.with_seed(0).study_hash() == second.with_seed(1).study_hash()
    study = as_trained(smoke("seeds=[0, 1]"), tmp_path)  # declared `auto`, as trained
    try:
        require_one_recipe(study, tmp_path, [0, 1])
        accepted = True
    except SeedvarError as refusal:
        accepted = False
        assert str(refusal).count("seed 1:") == 1
    assert accepted == same_hash == together


@pytest.mark.parametrize("setting", ["data.cache_dir=/moved/cache", "reference.runs=x.csv"])
def test_moving_files_outside_the_recipe_leaves_every_hash_alone(setting: str):
    before, after = smoke(), smoke(setting)
    assert before.hash() == after.hash() and before.study_hash() == after.study_hash()
    assert inputs_key(before) == inputs_key(after)


def test_a_seed_is_in_its_own_recipe_not_in_its_studys():
    zero, one = smoke().with_seed(0), smoke().with_seed(1)
    assert zero.hash() != one.hash() and zero.study_hash() == one.study_hash()
    assert "train.seed" in zero.recipe() and "train.seed" not in zero.recipe(per_seed=False)


def test_an_auto_precision_takes_the_value_its_seeds_were_trained_at(tmp_path: Path):
    finish(tmp_path, 0, smoke("train.precision=bf16-mixed", "train.eval_precision=bf16"))
    study = as_trained(smoke("seeds=[0]"), tmp_path)
    assert (study.train.precision, study.train.eval_precision) == ("bf16-mixed", "bf16")
    require_one_recipe(study, tmp_path, [0])  # accepted: the study is what its seed was
