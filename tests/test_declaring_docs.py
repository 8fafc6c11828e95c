"""docs/declaring.md's examples, run as the page says: a block marked `<!-- example: NAME -->`
is a params.yaml (run here with `--profile smoke`), and a `text` block right after it is what
it prints or the columns it gives."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from seedvar.config import Config, load_config
from seedvar.data.sets import load_evaluation_sets
from seedvar.errors import ConfigError
from seedvar.metrics import diagnostic_columns
from tests.helpers import OFFLINE, QUICK, REPO, challenge_csv, one_line_error, run_command, seedvar

DOC = REPO / "docs" / "declaring.md"
SIX = "Lexical (entailed), Lexical (nonent), Subseq (entailed), Subseq (nonent), "
SIX += "Constituent (entailed), Constituent (nonent)"


def example(name: str) -> tuple[str, str | None]:
    """The YAML block marked `name` and the text block right after it (None where none is)."""
    pattern = rf"<!-- example: {name} -->\n```yaml\n(.*?)```\n(?:\n```text\n(.*?)\n```)?"
    found = re.search(pattern, DOC.read_text(), re.S)
    assert found, f"no example {name!r} in {DOC}"
    return found[1], found[2]


def write_example(name: str) -> str | None:
    """params.yaml in the cwd: the example `name`; what the page says it gives."""
    params, outcome = example(name)
    Path("params.yaml").write_text(params)
    return outcome


def seedvar_config() -> list[str]:
    return seedvar("config", "--params", "params.yaml", "--profile", "smoke")


def loaded(config: Config, name: str) -> tuple[pd.DataFrame, list[str]]:
    """The whole set `name` as the study loads it, and its columns."""
    examples = load_evaluation_sets(config)[1][name]
    columns = diagnostic_columns(name, config.diagnostics[name], examples)
    return examples, [column.name for column, _ in columns]


def smoke_config() -> Config:
    return load_config(Path("params.yaml"), profile="smoke")


def test_a_sets_fields_merge_over_the_tasks(study_dir: Path):
    write_example("merged-fields")
    assert run_command(seedvar_config(), timeout=QUICK).returncode == 0
    examples, _ = loaded(smoke_config(), "ax")
    raw = pd.read_parquet(OFFLINE / "glue_diagnostic" / "ax_b.parquet")
    assert examples["id"].tolist() == raw["idx"].tolist()  # the task's id: [idx, ...]
    assert examples["label"].tolist() == (raw["label"] == "not_entailment").astype(int).tolist()
    assert examples["premise"].tolist() == raw["sentence1"].tolist()


def test_one_sets_own_size(study_dir: Path):
    write_example("max-examples")
    evaluation = load_evaluation_sets(smoke_config())[0]
    assert {name: len(frame) for name, frame in evaluation.items()} == {
        "mnli_matched": 300,  # the smoke profile's data.max_eval_examples
        "mnli_mismatched": 300,
        "hans": 3000,
    }
    assert evaluation["hans"]["subcase"].value_counts().eq(100).all()


def test_by_label_replaces_the_per_value_columns(study_dir: Path):
    outcome = write_example("by-label")
    assert outcome == SIX
    _, columns = loaded(smoke_config(), "hans")
    assert [column for column in columns if " (" in column] == SIX.split(", ")
    assert not {"hans/lexical_overlap", "Lexical"} & set(columns)


def test_two_groups_over_one_column_give_both(study_dir: Path):
    write_example("two-groups")
    _, columns = loaded(smoke_config(), "hans")
    assert [column for column in columns if column.split(" (")[0] == "Lexical"] == [
        "Lexical (entailed)",
        "Lexical (nonent)",
        "Lexical",
    ]
    assert {"Subseq", "Constituent", *SIX.split(", ")} <= set(columns)


def test_integer_group_values_are_text(study_dir: Path):
    write_example("integer-groups")
    challenge_csv(study_dir / "mine.csv", level=[1, 2, None, 3] * 10)
    _, columns = loaded(smoke_config(), "mine")
    assert columns == ["mine overall", "mine/1", "mine/2", "mine/3"]
    unquoted = Path("params.yaml").read_text().replace('["1", "2", "3"]', "[1, 2, 3]")
    Path("params.yaml").write_text(unquoted)
    refused = "diagnostics.mine.groups.level.values.0: Input should be a valid string (got 1)"
    assert refused in DOC.read_text()
    with pytest.raises(ConfigError, match=re.escape(refused)):
        smoke_config()


@pytest.mark.parametrize("name", ["reserved", "missing-column"])
def test_a_mistake_is_the_line_the_page_shows(study_dir: Path, name: str):
    outcome = write_example(name)
    challenge_csv(study_dir / "mine.csv")
    done = run_command(seedvar_config(), timeout=QUICK)
    assert outcome is not None
    one_line_error(done, outcome.removeprefix("seedvar: error: "))
    assert done.stderr.strip() == outcome


def test_the_challenge_set_of_the_page_is_a_valid_declaration(study_dir: Path):
    write_example("own-set")
    challenge_csv(study_dir / "mine.csv")
    done = run_command(seedvar_config(), timeout=QUICK)
    assert done.returncode == 0, done.stderr
