"""When `seedvar train --together` (DVC's seed stage) trains the study's seeds at once, and
when its seed trains alone. Training itself: tests/test_pipeline.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from seedvar.config import load_config
from seedvar.errors import RayUnavailableError
from seedvar.scale import together
from seedvar.scale.cluster import ClusterInfo


def machine(monkeypatch: pytest.MonkeyPatch, cpus: float, gpus: float = 0.0) -> None:
    node = {"CPU": cpus, "GPU": gpus}
    monkeypatch.setattr(together, "this_machine", lambda: ClusterInfo(None, [node], None))


def study(tmp_path: Path, *settings: str):  # noqa: ANN201
    return load_config(None, [f"output_dir={tmp_path}", *settings], profile="smoke")


def test_an_unfinished_seed_takes_the_other_unfinished_seeds_along(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=2)
    chosen = together.study_to_train_together(study(tmp_path, "seeds=[0, 1, 2]"), 1, print)
    assert chosen is not None and chosen.seeds == [0, 1, 2]


def test_a_seed_outside_the_study_joins_it(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=2)
    chosen = together.study_to_train_together(study(tmp_path, "seeds=[0, 1]"), 7, print)
    assert chosen is not None and chosen.seeds == [0, 1, 7]


def test_room_for_one_seed_at_a_time_trains_it_alone(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=2)
    config = study(tmp_path, "seeds=[0, 1, 2]", "ray.cpus_per_seed=2")
    assert together.study_to_train_together(config, 0, print) is None


def test_the_last_unfinished_seed_trains_alone(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=8)
    assert together.study_to_train_together(study(tmp_path, "seeds=[0]"), 0, print) is None


def test_without_ray_seeds_train_one_at_a_time_and_say_how_to_change_that(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=2)
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "ray" else found(name)
    )
    said: list[str] = []
    assert together.study_to_train_together(study(tmp_path, "seeds=[0, 1]"), 0, said.append) is None
    assert said == [
        "Ray is not installed: seeds train one at a time (pip install -e '.[ray]' trains them "
        "at once)"
    ]


def test_gpus_decide_how_many_seeds_a_node_holds(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=16, gpus=1)
    gpu = ("seeds=[0, 1]", "train.accelerator=gpu")
    assert together.study_to_train_together(study(tmp_path, *gpu), 0, print) is None
    shared = together.study_to_train_together(
        study(tmp_path, *gpu, "ray.gpus_per_seed=0.5"), 0, print
    )
    assert shared is not None and shared.seeds == [0, 1]


def test_a_seed_bigger_than_the_machine_is_one_line(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=2)
    config = study(tmp_path, "seeds=[0, 1]", "ray.cpus_per_seed=4")
    with pytest.raises(RayUnavailableError, match="lower ray.cpus_per_seed"):
        together.study_to_train_together(config, 0, print)


def test_a_factorial_study_trains_together_with_each_job_keeping_its_pair(tmp_path, monkeypatch):
    machine(monkeypatch, cpus=2)
    design = ("seeds=[0, 1, 2, 3]", "factorial.init_seeds=[0, 1]", "factorial.data_seeds=[5, 6]")
    chosen = together.study_to_train_together(study(tmp_path, *design), 2, print)
    assert chosen is not None and chosen.seeds == [0, 1, 2, 3]
    pairs = [
        (chosen.with_seed(job).train.init_seed, chosen.with_seed(job).train.data_seed)
        for job in chosen.seeds
    ]
    assert pairs == [(0, 5), (0, 6), (1, 5), (1, 6)]
