"""HANS's templates: the generator's pairs map back to their template, every offline pair
matches one, and the committed `template` column is the one recovered."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chisquare

from seedvar.data.hans_templates import (
    SUBCASES,
    TEMPLATES,
    add_template_column,
    draw,
    generate,
    has_repeats,
    match_templates,
    template_column,
)

HANS = Path(__file__).resolve().parents[1] / "data" / "offline" / "hans"
SETS = ["validation", "train"]
SEVERAL = {
    "ln_preposition": 6,
    "ln_relative_clause": 12,
    "ln_passive": 2,
    "ln_conjunction": 4,
    "le_relative_clause": 4,
    "le_conjunction": 2,
    "le_passive": 2,
    "sn_past_participle": 2,
    "sn_NP/Z": 2,
    "se_conjunction": 2,
    "cn_disjunction": 2,
    "ce_conjunction": 2,
}


@pytest.fixture(scope="module", params=SETS)
def hans(request: pytest.FixtureRequest) -> pd.DataFrame:
    return pd.read_parquet(HANS / f"{request.param}.parquet")


@pytest.fixture(scope="module")
def matches(hans: pd.DataFrame) -> list[list[str]]:
    rows = zip(hans["premise"], hans["hypothesis"], hans["subcase"], strict=True)
    return [match_templates(*row) for row in rows]


def test_templates_per_subcase():
    """60 templates: 18 subcases have one, 12 have 2 to 12."""
    per_subcase = Counter(template.subcase for template in TEMPLATES.values())
    assert len(TEMPLATES) == 60 and set(per_subcase) == set(SUBCASES)
    assert {name: count for name, count in per_subcase.items() if count > 1} == SEVERAL
    assert sum(count == 1 for count in per_subcase.values()) == 18
    for subcase in SUBCASES:
        weights = [t.weight for t in TEMPLATES.values() if t.subcase == subcase]
        assert sum(weights) == pytest.approx(1)


@pytest.mark.parametrize("template_id", list(TEMPLATES))
def test_generated_pairs_map_back_to_their_template(template_id: str):
    rng = np.random.default_rng(0)
    subcase = TEMPLATES[template_id].subcase
    for _ in range(100):
        premise, hypothesis = generate(template_id, rng)
        assert match_templates(premise, hypothesis, subcase) == [template_id]


def test_only_a_repeated_word_makes_a_pair_ambiguous():
    """Pairs the filter rejects may fit several templates; they always fit their own."""
    rng = np.random.default_rng(1)
    ambiguous = 0
    for template_id, template in TEMPLATES.items():
        for _ in range(100):
            premise, hypothesis = draw(template_id, rng)
            found = match_templates(premise, hypothesis, template.subcase)
            assert template_id in found
            assert len(found) == 1 or has_repeats(premise)
            ambiguous += len(found) > 1
    assert ambiguous > 0


def test_a_pair_of_another_subcase_or_form_matches_nothing():
    premise, hypothesis = "The doctor saw the lawyer .", "The lawyer saw the doctor ."
    assert match_templates(premise, hypothesis, "ln_subject/object_swap") == ["temp1"]
    assert match_templates(premise, hypothesis, "ln_passive") == []
    assert match_templates(premise.lower(), hypothesis, "ln_subject/object_swap") == []
    assert match_templates(premise, "The lawyer saw the doctors .", "ln_subject/object_swap") == []
    assert (
        match_templates(
            "The doctor wrote the salad .", "The doctor wrote .", "se_understood_object"
        )
        == []
    )
    with pytest.raises(ValueError, match="unknown HANS subcase"):
        match_templates(premise, hypothesis, "swap")


def test_every_offline_pair_matches_one_template_of_its_subcase(
    hans: pd.DataFrame, matches: list[list[str]]
):
    assert Counter(map(len, matches)) == {1: len(hans)}
    assert not any(map(has_repeats, hans["premise"]))
    for heuristic, label, subcase in (
        hans[["heuristic", "label", "subcase"]].drop_duplicates().values
    ):
        assert SUBCASES[subcase] == (heuristic, label)


def test_the_committed_column_is_the_recovered_one(hans: pd.DataFrame):
    assert list(hans.columns)[-1] == "template"
    pd.testing.assert_series_equal(template_column(hans), hans["template"])
    assert set(hans["template"]) == set(TEMPLATES)


def test_template_column_names_the_first_row_that_matches_nothing(hans: pd.DataFrame):
    frame = hans.head(3).copy()
    frame.loc[1, "hypothesis"] = "The doctor slept ."
    with pytest.raises(ValueError, match="row 1 matches no template of ln_subject/object_swap"):
        template_column(frame)


def test_template_counts_fit_the_generator_weights():
    """Per subcase of the evaluation set, a template's share is its weight times the chance
    that its premise passes the generator's filter (estimated from 2,000 draws)."""
    hans = pd.read_parquet(HANS / "validation.parquet", columns=["subcase", "template"])
    rng = np.random.default_rng(2)
    for subcase in SEVERAL:
        ids = [t.id for t in TEMPLATES.values() if t.subcase == subcase]
        kept = [np.mean([not has_repeats(draw(i, rng)[0]) for _ in range(2000)]) for i in ids]
        expected = np.array([TEMPLATES[i].weight for i in ids]) * kept
        observed = hans.loc[hans["subcase"] == subcase, "template"].value_counts()[ids]
        test = chisquare(observed, expected / expected.sum() * observed.sum())
        assert test.pvalue > 0.001, (subcase, observed.to_dict())


def test_add_template_column_rewrites_the_file_in_place(tmp_path: Path):
    original = pd.read_parquet(HANS / "validation.parquet").iloc[::500]
    path = tmp_path / "hans.parquet"
    original.drop(columns="template").to_parquet(path, index=False)
    add_template_column(path)
    pd.testing.assert_frame_equal(pd.read_parquet(path), original.reset_index(drop=True))
    assert [p.name for p in tmp_path.iterdir()] == ["hans.parquet"]
