"""A study's declaration: every mistake between its fields is one line of ConfigError from
load_config, before any data is read."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from seedvar.config import load_config
from seedvar.data.sets import augmentation, load_evaluation_sets, load_study_sets
from seedvar.declared import task_to_diagnostic
from seedvar.errors import ConfigError, DataError
from seedvar.metrics import diagnostic_columns
from tests.helpers import MINE, OFFLINE, QUICK, challenge_csv, one_line_error, run_command, seedvar


def config_error(*overrides: str) -> str:
    """The one-line ConfigError of the smoke profile with these `--set` overrides."""
    with pytest.raises(ConfigError) as caught:
        load_config(None, list(overrides), profile="smoke")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("invalid configuration: ")
    return message


def params_with(path: Path, **mine: object) -> str:
    """A params file of the smoke study with the challenge set `mine` (MINE, changed)."""
    path.write_text(yaml.safe_dump({"profile": "smoke", "diagnostics": {"mine": MINE | mine}}))
    return str(path)


def test_the_papers_declaration_has_no_mistakes():
    config = load_config(None, profile="smoke")
    assert task_to_diagnostic(config.task, config.diagnostics["hans"], "hans") == [0, 1, 1]


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("task.labels=[entailment]", "task.labels: List should have at least 2 items"),
        (
            "task.labels=[entailment, entailment, contradiction]",
            "task.labels: ['entailment', 'entailment', 'contradiction'] names a label twice",
        ),
        ("task.text=[premise, claim]", "task.fields: no source columns for 'claim'"),
        (
            "task.validation=mnli_test",
            "task.validation: 'mnli_test' is not an evaluation set of the task; use one of "
            "mnli_matched, mnli_mismatched",
        ),
        (
            "task.evaluation.mnli_matched.headline=false",
            "task.evaluation: no set is a headline",
        ),
        ("task.text=[premise, premise]", "task.text: ['premise', 'premise'] names a field twice"),
    ],
)
def test_task_mistakes(override: str, problem: str):
    assert problem in config_error(override)


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        (  # a diagnostic label no task label is scored as
            "diagnostics.hans.labels=[entailment, non-entailment, other]",
            "diagnostics.hans.collapse: no label of the task MNLI maps to other",
        ),
        (  # a task label scored as no diagnostic label
            "diagnostics.hans.collapse={non-entailment: [neutral]}",
            "diagnostics.hans.collapse: the task's label 'contradiction' has no label of hans "
            "(entailment, non-entailment)",
        ),
        (  # an unknown task label in collapse
            "diagnostics.hans.collapse={non-entailment: [neutral, contradicton]}",
            "diagnostics.hans.collapse.non-entailment: 'contradicton' is not a label of the "
            "task MNLI (entailment, neutral, contradiction)",
        ),
        (  # an unknown diagnostic label in collapse
            "diagnostics.hans.collapse={nonentailment: [neutral, contradiction]}",
            "diagnostics.hans.collapse: 'nonentailment' is not a label of hans",
        ),
        (  # merged with the declared non-entailment: [neutral, contradiction]
            "diagnostics.hans.collapse={entailment: [entailment, neutral]}",
            "diagnostics.hans.collapse: 'neutral' is collapsed into two labels",
        ),
        (
            "diagnostics.hans.groups.subcase.within=heuristics",
            "diagnostics.hans.groups.subcase.within: 'heuristics' is not a group of hans",
        ),
        (
            "diagnostics.hans.stratify=subcases",
            "diagnostics.hans.stratify: 'subcases' is not a group",
        ),
        (
            "diagnostics.hans.groups.heuristic.by_label={neutral: neutral}",
            "diagnostics.hans.groups.heuristic.by_label: neutral not a label of hans",
        ),
        (
            "diagnostics.hans.groups.subcase.split=;",
            "diagnostics.hans.groups.subcase: a group is nested (within) or multi-valued "
            "(split), not both",
        ),
        ("diagnostics.hans.headline=[]", "diagnostics.hans.headline: List should have at least"),
        (
            "diagnostics.hans.collapse={non-entailment: [neutral, contradicton]}",
            "(entailment, neutral, contradiction); did you mean 'contradiction'?",
        ),
        (
            "diagnostics.hans.collapse={non-entailmnt: [neutral, contradiction]}",
            "'non-entailmnt' is not a label of hans (entailment, non-entailment); did you mean "
            "'non-entailment'?",
        ),
        (  # the labels of a new set, spelt otherwise than the task's: not "collapse them"
            "diagnostics.snli={source: data/offline/snli/validation.parquet, labels: "
            "[entailment, neutral, contradicton], headline: [snli overall]}",
            "diagnostics.snli.labels: 'contradicton' is not a label of the task MNLI (entailment, "
            "neutral, contradiction); did you mean 'contradiction'?",
        ),
        (
            "diagnostics.hans.groups.heuristic.by_label={entailment: e, non-entailmnt: n}",
            "by_label: non-entailmnt not a label of hans (entailment, non-entailment); did you "
            "mean 'non-entailment'?",
        ),
        (
            "task.augmentation.to_task={entailment: entailment, non-entailment: neutrl}",
            "task.augmentation.to_task: non-entailment: neutrl maps a label of ['entailment', "
            "'non-entailment'] onto one of ['entailment', 'neutral', 'contradiction']; fix the "
            "names; did you mean 'neutral'?",
        ),
        (
            "diagnostics.mnli_matched={source: x.parquet, labels: [entailment, neutral, "
            "contradiction], headline: [x]}",
            "diagnostics.mnli_matched: the name is taken",
        ),
    ],
)
def test_diagnostic_mistakes(override: str, problem: str):
    assert problem in config_error(override)


def test_every_mistake_is_named_in_the_one_line():
    message = config_error(
        "diagnostics.hans.groups.subcase.within=heuristics", "diagnostics.hans.stratify=subcases"
    )
    assert "'heuristics' is not a group of hans; " in message
    assert "'subcases' is not a group" in message


def test_a_headline_column_the_set_does_not_have_is_refused_when_the_set_is_loaded():
    """The columns of a group come from its data: the check runs when the sets load (`seedvar
    prepare`, a seed's start), before any training."""
    config = load_config(None, ["diagnostics.hans.headline=[Lexical (nonnent)]"], profile="smoke")
    with pytest.raises(DataError, match=re.escape("'Lexical (nonnent)' is not a column of hans")):
        load_study_sets(config)


@pytest.mark.parametrize(
    "name", ["id", "label", "gold", "predicted", "premise", "hypothesis", "logit_neutral"]
)
def test_a_group_named_like_a_column_seedvar_writes_is_refused(name: str):
    """A group's values are written under its name beside seedvar's own columns: a group
    called `gold` overwrote the gold labels (every column 0 %)."""
    message = config_error(f"diagnostics.hans.groups={{{name}: {{column: subcase}}}}")
    assert f"diagnostics.hans.groups.{name}: '{name}' is a column seedvar writes itself" in message
    assert f"e.g. by_{name}" in message


def test_a_sets_fields_are_merged_over_the_tasks():
    """A set that maps only its label column keeps the task's text and id columns (it used
    to replace them: `prepare` then failed with a traceback, KeyError: 'label')."""
    whole = load_evaluation_sets(load_config(None, profile="smoke"))[1]["hans"]
    config = load_config(None, ["diagnostics.hans.fields={label: [label]}"], profile="smoke")
    assert load_evaluation_sets(config)[1]["hans"].equals(whole)


def test_each_set_may_have_its_own_size_limit():
    config = load_config(
        None,
        ["diagnostics.hans.max_examples=60", "task.evaluation.mnli_matched.max_examples=50"],
        profile="smoke",
    )
    evaluation = load_evaluation_sets(config)[0]
    sizes = {name: len(frame) for name, frame in evaluation.items()}
    assert sizes == {"mnli_matched": 50, "mnli_mismatched": 300, "hans": 60}  # else 300 each
    assert evaluation["hans"]["subcase"].value_counts().eq(2).all()  # still even: 30 x 2


def test_a_disabled_augmentation_is_not_checked_against_the_diagnostic_sets():
    """The demo's augmentation (data.augment_examples: 0) names hans (disjoint_from): dropping
    hans was refused for a set that draws no pair."""
    snli = "{source: data/offline/snli/validation.parquet, labels: [entailment, neutral, "
    snli += "contradiction], headline: [snli overall]}"
    without_hans = ["diagnostics.hans=null", f"diagnostics.snli={snli}"]
    assert list(load_config(None, without_hans, profile="demo").diagnostics) == ["snli"]
    with pytest.raises(ConfigError, match="disjoint_from: 'hans' is not a diagnostic set"):
        load_config(None, [*without_hans, "data.augment_examples=100"], profile="demo")
    with pytest.raises(ConfigError, match="no diagnostic set is left, and a study needs one"):
        load_config(None, ["diagnostics.hans=null"], profile="demo")  # its only one


def test_held_out_groups_of_the_augmentation_are_never_drawn():
    """`task.augmentation.held_out` keeps whole groups out of the added pairs (an inoculation
    study evaluates on them), still drawn evenly over the rest; a value the set lacks is one
    line naming the values it has."""
    held_out = "task.augmentation.held_out={heuristic: [subsequence, constituent], "
    held_out += "subcase: [ln_subject/object_swap]}"
    config = load_config(None, ["data.augment_examples=270", held_out], profile="smoke")
    added = augmentation(config, {"hans": pd.DataFrame(columns=["premise", "hypothesis"])})
    source = pd.read_parquet(OFFLINE / "hans" / "train.parquet")
    drawn = source.set_index("augment-" + source["idx"].astype(str)).loc[added["id"]]
    assert set(drawn["heuristic"]) == {"lexical_overlap"}
    assert drawn["subcase"].value_counts().to_dict() == dict.fromkeys(
        sorted(
            set(source.query("heuristic == 'lexical_overlap'")["subcase"])
            - {"ln_subject/object_swap"}
        ),
        30,
    )
    assert config.recipe()["task.augmentation.held_out"] == {
        "heuristic": ["subsequence", "constituent"],
        "subcase": ["ln_subject/object_swap"],
    }  # in the recipe when set; a recipe of before it (none held out) keeps its hash
    assert "task.augmentation.held_out" not in load_config(None, profile="smoke").recipe()
    misspelt = load_config(
        None,
        ["data.augment_examples=10", "task.augmentation.held_out={heuristic: [constituant]}"],
        profile="smoke",
    )
    with pytest.raises(
        DataError,
        match=r"held_out.heuristic: 'constituant' is not a value of "
        r"heuristic in data/offline/hans/train.parquet; its values: constituent, ",
    ):
        augmentation(misspelt, {})


@pytest.mark.parametrize(
    ("overrides", "column"),
    [
        (["diagnostics.mine.groups={topic: {}}"], "topic (tried topic: ['topic'])"),
        (  # the units the evaluation noise resamples: never a silent fallback to examples
            [
                "diagnostics.mine.groups={topic: {}}",
                "diagnostics.mine.clusters=[topic]",
                "diagnostics.mine.strata=topic",
            ],
            "topic (tried topic: ['topic'])",
        ),
        (  # the group a set is drawn evenly over
            ["diagnostics.mine.groups={topic: {}}", "diagnostics.mine.stratify=topic"],
            "topic (tried topic: ['topic'])",
        ),
        (  # the set's fields, merged over the task's
            ["diagnostics.mine.fields.hypothesis=[claims]"],
            "hypothesis (tried hypothesis: ['claims'])",
        ),
        (["diagnostics.mine.fields.label=[gold_label]"], "label (tried label: ['gold_label'])"),
    ],
    ids=["group", "clusters", "stratify", "text", "label"],
)
def test_a_declared_column_the_file_lacks_is_one_line_in_config_and_before_loading(
    study_dir: Path, overrides: list[str], column: str
):
    """From the file's header alone: `seedvar config` said nothing, and `prepare` stopped only
    after loading every set."""
    challenge_csv(study_dir / "mine.csv")
    settings = ["--params", params_with(study_dir / "params.yaml")]
    settings += [part for override in overrides for part in ("--set", override)]
    done = run_command(seedvar("config", *settings), timeout=QUICK)
    one_line_error(
        done,
        f"diagnostics.mine (mine.csv): no column for {column}; found context, claim, verdict, "
        "phenomenon: add the column's name to the set's fields",
    )
    assert run_command(seedvar("prepare", *settings), timeout=QUICK).stderr == done.stderr
    assert not Path("prepared").exists()


def test_a_misspelled_label_the_files_values_show_is_one_line_with_did_you_mean(study_dir: Path):
    challenge_csv(study_dir / "mine.csv")
    collapse = {"non_entailment": ["neutral", "contradiction"]}
    params = params_with(
        study_dir / "params.yaml", labels=["entailment", "non_entailment"], collapse=collapse
    )
    done = run_command(seedvar("config", "--params", params), timeout=QUICK)
    one_line_error(
        done,
        "diagnostics.mine (mine.csv): the declared label 'non_entailment' is none of its label "
        "values (entailment, non-entailment); did you mean 'non-entailment'? fix the labels",
    )


def test_sources_on_the_hub_and_the_web_are_not_read_by_config(study_dir: Path):
    """The paper's sets (hub:..., an https URL) are checked when they load, not offline."""
    done = run_command(seedvar("config"), timeout=QUICK)
    assert done.returncode == 0 and "hub:nyu-mll/glue:mnli:train" in done.stdout, done.stderr


@pytest.mark.parametrize("name", ["id", "label", "gold", "predicted", "logit_neutral"])
def test_a_text_field_named_like_a_column_seedvar_writes_is_refused(name: str):
    """A text field named `gold` was written over by the gold labels (or over them)."""
    message = config_error(f"task.text=[premise, {name}]", f"task.fields.{name}=[hypothesis]")
    assert f"task.text: '{name}' is a column seedvar writes itself" in message
    assert f"e.g. {name}_text, and map it in task.fields" in message


@pytest.mark.parametrize("name", ["train", "validation"])
def test_a_set_named_like_one_seedvar_names_is_refused(name: str):
    source = "source: data/offline/mnli/validation_matched.parquet"
    message = config_error(f"task.evaluation.{name}={{{source}}}")
    assert f"task.evaluation.{name}: '{name}' is a set seedvar names itself" in message
    assert f"e.g. {name}_set" in message
    labels = "labels: [entailment, neutral, contradiction], headline: [x]"
    message = config_error(f"diagnostics.{name}={{{source}, {labels}}}")
    assert f"diagnostics.{name}: the name is taken (seedvar's); name the set otherwise" in message
    assert f"e.g. {name}_diagnostic" in message


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        (
            "{valeu}",
            "{valeu} is not a placeholder of a group's columns (set, group, value, name, "
            "name_lower, parent); did you mean 'value'?",
        ),
        (
            "{label}",
            "{label} is not a placeholder of a group's columns (set, group, value, name, "
            "name_lower, parent); {label} needs by_label",
        ),
        ("{0}", "{0} is not a placeholder of a group's columns"),
        ("{value", "'{value' is not a template (expected '}' before end of string)"),
    ],
)
def test_a_column_template_names_only_seedvars_placeholders(template: str, problem: str):
    """A template with another placeholder passed the config and stopped the load with a
    traceback (KeyError)."""
    for setting in ("column", "key"):
        message = config_error(f'diagnostics.hans.groups.subcase.{setting}="{template}"')
        assert f"diagnostics.hans.groups.subcase.{setting}: {problem}" in message


SUBCASE = "diagnostics.hans.groups.subcase.column"


@pytest.mark.parametrize(
    ("override", "setting", "column", "clash"),
    [
        (f'{SUBCASE}="seed"', "diagnostics.hans", "seed", "the seeds table's seed"),
        (
            f'{SUBCASE}="majority share hans"',
            "diagnostics.hans",
            "majority share hans",
            "the majority share of hans",
        ),
        (
            f'{SUBCASE}="MNLI dev acc."',
            "diagnostics.hans",
            "MNLI dev acc.",
            "a column of task.evaluation.mnli_matched",
        ),
        (
            f'{SUBCASE}="{{parent}}"',
            "diagnostics.hans",
            "lexical_overlap",
            "a column of diagnostics.hans",
        ),
        (
            'task.evaluation.mnli_mismatched.column="MNLI dev acc."',
            "task.evaluation.mnli_mismatched",
            "MNLI dev acc.",
            "a column of task.evaluation.mnli_matched",
        ),
    ],
)
def test_a_column_named_like_another_or_seedvars_own_is_refused_when_the_sets_load(
    override: str, setting: str, column: str, clash: str
):
    """A group column `seed` overwrote each seed's number in seeds.csv with an accuracy."""
    config = load_config(None, [override, "diagnostics.hans.highlight=[]"], profile="smoke")
    with pytest.raises(DataError) as caught:
        load_evaluation_sets(config)
    assert str(caught.value).startswith(
        f"{setting}: its column {column!r} is also {clash}; name them apart: put {{group}} in a "
        'group\'s column template (e.g. column: "{set}/{group}/{value}")'
    )


def test_integer_group_values_read_as_their_digits(study_dir: Path):
    """A CSV column of integers with a gap reads as floats: its columns were mine/1.0 ..."""
    challenge_csv(study_dir / "mine.csv", level=[1, 2, None, 3] * 10)
    groups = {"level": {"values": ["1", "2", "3"]}}
    config = load_config(
        Path(params_with(study_dir / "params.yaml", groups=groups, headline=["mine/1"]))
    )
    examples = load_evaluation_sets(config)[1]["mine"]
    columns = [c.name for c, _ in diagnostic_columns("mine", config.diagnostics["mine"], examples)]
    assert columns == ["mine overall", "mine/1", "mine/2", "mine/3"]
    assert sorted(examples["level"].dropna().unique()) == ["1", "2", "3"]
