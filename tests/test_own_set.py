"""A user's own challenge set, added with one YAML block in params.yaml and no code: a CSV
with two text columns, a string label and a group column, through a real seed and the
aggregate."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from seedvar.config import load_config
from seedvar.errors import ConfigError, DataError
from seedvar.results.record import write_results
from seedvar.seeds.seed import run_seed
from tests.helpers import MINE, write_challenge_set

pytestmark = pytest.mark.slow


def test_a_challenge_set_declared_in_params_is_trained_on_and_aggregated(study_dir: Path):
    frame = write_challenge_set(study_dir / "mine.csv")
    (study_dir / "params.yaml").write_text(
        yaml.safe_dump({"profile": "smoke", "seeds": [0, 1], "diagnostics": {"mine": MINE}})
    )
    config = load_config(Path("params.yaml"))
    for seed in config.seeds:
        run_seed(config.with_seed(seed))
    write_results(config, Path("runs"), Path("results"))

    seeds = pd.read_csv("results/seeds.csv")
    assert {"mine overall", "mine/negation", "mine/quantifiers"} <= set(seeds.columns)
    for seed in config.seeds:  # each column is the accuracy on its group's examples
        predictions = pd.read_parquet(f"runs/seed-{seed}/predictions/mine.parquet")
        assert predictions["gold"].tolist() == [int(v != "entailment") for v in frame["verdict"]]
        hits = predictions["gold"] == predictions["predicted"]
        by_hand = hits[predictions["phenomenon"] == "negation"].mean()
        assert seeds.loc[seeds["seed"] == seed, "mine/negation"].item() == pytest.approx(by_hand)
    columns = json.loads(Path("runs/seed-0/columns.json").read_text())
    negation = next(c for c in columns if c["name"] == "mine/negation")
    assert negation == {"name": "mine/negation", "key": "mine/negation", "set": "mine", "size": 20}
    decision = json.loads(Path("results/verdict.json").read_text())
    assert "mine/negation" in decision["design"]["tested"]
    assert pd.read_csv("results/agreement/mine.csv")["n_seeds"].eq(2).all()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"groups": {"phenomenon": {"within": "topic"}}}, "'topic' is not a group of mine"),
        ({"collapse": {"non-entailment": ["neutral"]}}, "'contradiction' has no label of mine"),
        ({"collapse": {"contradicts": ["contradiction"]}}, "'contradicts' is not a label of mine"),
        ({"labels": ["entailment", "non-entailment", "other"]}, "maps to other"),
    ],
)
def test_a_bad_declaration_is_one_line_before_any_work(study_dir: Path, change: dict, message: str):
    declared = {**MINE, **change}
    params = {"profile": "smoke", "diagnostics": {"mine": declared}}
    (study_dir / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=message) as raised:
        load_config(Path("params.yaml"))
    assert "\n" not in str(raised.value)


def test_a_headline_column_the_set_does_not_have_stops_before_training(study_dir: Path):
    write_challenge_set(study_dir / "mine.csv")
    declared = {**MINE, "headline": ["mine/sarcasm"]}
    params = {"profile": "smoke", "diagnostics": {"mine": declared}}
    (study_dir / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(DataError, match=r"mine/sarcasm.*not a column of mine.*mine/negation"):
        run_seed(load_config(Path("params.yaml")))
    assert not Path("runs").exists() or not list(Path("runs").glob("seed-*"))
