"""The study's verdict: simulated studies, degenerate cases, the paper's 100 runs, sweeps."""

from __future__ import annotations

import math
from dataclasses import astuple
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seedvar.config import load_config
from seedvar.declared import primary_column
from seedvar.study.verdict import (
    Design,
    correlate,
    detection_power,
    minimum_seeds,
    predicts,
    seed_variance,
    sweep_verdict,
    verdict,
)

PAPER_RUNS = Path(__file__).resolve().parents[1] / "data/offline/reference/mccoy2020_runs.csv"
N_MNLI, N_HEURISTIC = 9815, 5000

CONFIG = load_config(None, profile="smoke")  # the paper's declaration: MNLI -> HANS
HANS = CONFIG.diagnostics["hans"]
MNLI_MATCHED = primary_column(CONFIG.task)  # "MNLI dev acc."
HANS_OVERALL = HANS.overall.column  # "Overall accuracy"
_HEURISTIC = HANS.groups["heuristic"]
HEURISTIC_COLUMNS = [
    f"{_HEURISTIC.names[h]} ({gold})"
    for gold in _HEURISTIC.by_label.values()
    for h in _HEURISTIC.values
]
NON_ENTAILED = tuple(HANS.headline)  # Lexical, Subseq, Constituent (nonent)
PAPER_SIZES = {
    MNLI_MATCHED: N_MNLI,
    **dict.fromkeys(HEURISTIC_COLUMNS, N_HEURISTIC),
    HANS_OVERALL: 30000,
    **dict.fromkeys(HANS.groups["subcase"].values, 1000),
}  # examples per column in the full evaluation sets
DESIGN = Design(reference=(MNLI_MATCHED,), tested=NON_ENTAILED, chance=1 / 3)
PREDICTED = [*NON_ENTAILED, HANS_OVERALL]  # the columns MNLI-m accuracy is said to predict


def simulate(
    seed: int,
    n_studies: int,
    n_seeds: int,
    hans_seed_std: float,
    mnli_seed_std: float = 0.001,
    mnli_accuracy: float = 0.84,
) -> list[pd.DataFrame]:
    """Studies whose seeds have true accuracies around fixed means; observed = Binomial(n, p)/n."""
    rng = np.random.default_rng(seed)
    p_mnli = np.clip(rng.normal(mnli_accuracy, mnli_seed_std, (n_studies, n_seeds)), 0, 1)
    p_hans = np.clip(rng.normal(0.3, hans_seed_std, (n_studies, n_seeds, 3)), 0, 1)
    mnli = rng.binomial(N_MNLI, p_mnli) / N_MNLI
    hans = rng.binomial(N_HEURISTIC, p_hans) / N_HEURISTIC
    return [
        pd.DataFrame({MNLI_MATCHED: mnli[i], **dict(zip(NON_ENTAILED, hans[i].T, strict=True))})
        for i in range(n_studies)
    ]


def reproduce_rate(studies: list[pd.DataFrame]) -> float:
    return float(
        np.mean([verdict(t, PAPER_SIZES, DESIGN).outcome == "reproduces" for t in studies])
    )


def constant_table(n_seeds: int, mnli: float = 0.84, hans: float = 0.3) -> pd.DataFrame:
    return pd.DataFrame({MNLI_MATCHED: [mnli] * n_seeds, **dict.fromkeys(NON_ENTAILED, hans)})


def test_the_paper_design_is_the_declared_one():
    from seedvar.study.aggregate import study_design

    assert study_design(CONFIG) == DESIGN and DESIGN.comparisons == 4
    assert NON_ENTAILED == ("Lexical (nonent)", "Subseq (nonent)", "Constituent (nonent)")
    assert list(PAPER_SIZES) == list(pd.read_csv(PAPER_RUNS).columns[1:])  # the paper's table


def test_real_seed_effect_reproduces_in_at_least_95_percent():
    assert reproduce_rate(simulate(1, 200, 20, hans_seed_std=0.1)) >= 0.95


def test_binomial_noise_alone_reproduces_in_at_most_5_percent():
    assert reproduce_rate(simulate(2, 200, 20, hans_seed_std=0.0, mnli_seed_std=0.0)) <= 0.05


def test_hans_seed_std_at_the_ratio_margin_reproduces_in_at_most_5_percent():
    # The null boundary: HANS seed std exactly 3x MNLI-m's, both above the floor.
    studies = simulate(3, 200, 20, hans_seed_std=0.03, mnli_seed_std=0.01)
    assert reproduce_rate(studies) <= 0.05


def test_noise_and_seed_std_are_separated():
    table = simulate(4, 1, 200, hans_seed_std=0.1)[0]
    rows = {row.column: row for row in seed_variance(table, PAPER_SIZES)}
    lexical = rows["Lexical (nonent)"]
    assert lexical.noise_std == pytest.approx(math.sqrt(0.3 * 0.7 / N_HEURISTIC), rel=0.1)
    assert lexical.seed_std_low < 0.1 < lexical.seed_std_high
    assert lexical.seed_std == pytest.approx(0.1, rel=0.15)
    mnli = rows[MNLI_MATCHED]
    assert mnli.noise_std == pytest.approx(math.sqrt(0.84 * 0.16 / N_MNLI), rel=0.01)
    assert mnli.seed_std_low == 0.0 and mnli.seed_std < 0.003


def test_one_class_seed_is_inconclusive():
    table = simulate(5, 1, 20, hans_seed_std=0.1)[0]
    shares = {"mnli_matched": [0.4] * 19 + [0.97], "hans": [0.9] * 20}
    result = verdict(table, PAPER_SIZES, DESIGN, shares)
    assert result.outcome == "inconclusive" and result.reason.rule == "one class"
    assert result.reason.numbers == {
        "seeds": 1,
        "of": 20,
        "share": 0.97,
        "set": "mnli_matched",
        "seed": 19,
        "threshold": 0.95,
    }
    assert result.text == (
        "inconclusive: 1 of 20 seeds predict one class on at least 95% of a set "
        "(seed 19 on mnli_matched: 97.0%)"
    )
    several = {"mnli_matched": [0.4] * 18 + [0.96, 0.4], "hans": [0.9] * 19 + [0.99]}
    result = verdict(table, PAPER_SIZES, DESIGN, several)
    assert result.reason.numbers | {"share": 0} == {
        "seeds": 2,
        "of": 20,
        "share": 0,
        "set": "hans",
        "seed": 19,
        "threshold": 0.95,
    }
    assert result.reason.numbers["share"] == pytest.approx(0.99)
    with pytest.raises(ValueError, match="'hans' has 3 shares for 20 seeds"):
        verdict(table, PAPER_SIZES, DESIGN, {"hans": [0.5] * 3})


def test_mnli_at_chance_is_inconclusive():
    table = simulate(6, 1, 20, hans_seed_std=0.1)[0]
    table[MNLI_MATCHED] = [0.34, 0.35, 0.36, 0.35] * 5
    result = verdict(table, PAPER_SIZES, DESIGN)
    assert result.outcome == "inconclusive" and result.reason.rule == "near chance"
    assert result.reason.numbers == {
        "column": MNLI_MATCHED,
        "mean": pytest.approx(0.35),
        "chance": 1 / 3,
    }
    assert result.text == (
        "inconclusive: mean MNLI dev acc. 0.350 is within 5 points of chance (0.333)"
    )


def four_seeds(hans: list[float]) -> pd.DataFrame:
    """Four seeds alike on MNLI-m (0.84 +- 0.002), with `hans` on every non-entailed column."""
    return pd.DataFrame(
        {MNLI_MATCHED: [0.84, 0.842, 0.838, 0.841], **dict.fromkeys(NON_ENTAILED, hans)}
    )


def test_too_few_seeds_to_say_does_not_is_inconclusive_and_states_the_minimum():
    result = verdict(four_seeds([0.30, 0.31, 0.29, 0.30]), PAPER_SIZES, DESIGN)
    assert result.outcome == "inconclusive"
    assert result.min_seeds == 10
    assert not any(test.passes for test in result.tests)
    assert result.reason.rule == "too few seeds"
    assert result.reason.numbers == {"seeds": 4, "needed": 10}
    assert result.text == (
        "inconclusive: no column passes, and 4 seeds are too few to say it does not: detecting "
        "a headline seed std of 0.05 with 80% power needs at least 10 seeds"
    )


def test_a_spread_that_passes_reproduces_with_fewer_seeds_than_the_power_rule_asks():
    result = verdict(four_seeds([0.1, 0.5, 0.3, 0.7]), PAPER_SIZES, DESIGN)
    assert result.min_seeds == 10
    assert result.outcome == "reproduces" and result.reason.rule == "passes"
    assert all(test.seed_std_lower > result.margin for test in result.tests)
    assert set(result.reason.numbers["bounds"]) == set(NON_ENTAILED)
    assert result.reason.numbers["margin"] == result.margin


def test_one_seed_gives_none_with_a_reason_not_nan():
    result = verdict(constant_table(1), PAPER_SIZES, DESIGN)
    assert result.outcome == "inconclusive" and result.margin is None and result.tests == ()
    assert result.reason.rule == "too few seeds"
    assert result.reason.numbers == {"seeds": 1, "needed": 10}
    assert {row.note for row in result.columns} == {"one seed: no across-seed variance"}
    assert all(row.seed_std is None and row.observed_std is None for row in result.columns)


def test_identical_seeds_do_not_reproduce():
    result = verdict(constant_table(20), PAPER_SIZES, DESIGN)
    assert result.outcome == "does not reproduce"
    assert result.margin == 0.01
    assert result.reason.rule == "none passes"
    assert result.reason.numbers == {"margin": 0.01, "largest": {"Lexical (nonent)": 0.0}}
    assert result.text == (
        "does not reproduce: no headline column's seed-std lower bound exceeds the margin "
        "0.010 (largest: Lexical (nonent) 0.000)"
    )


def test_power_rule_matches_simulated_power():
    # 10 seeds is the minimum at these noise levels; the analytic power is the simulated one.
    mnli_noise, hans_noise = 0.84 * 0.16 / N_MNLI, 0.3 * 0.7 / N_HEURISTIC
    comparisons = DESIGN.comparisons  # the alpha split over MNLI-m and 3 non-entailed bounds
    assert minimum_seeds(mnli_noise, hans_noise, comparisons) == 10
    assert (
        detection_power(9, mnli_noise, hans_noise, comparisons)
        < 0.8
        <= detection_power(10, mnli_noise, hans_noise, comparisons)
    )
    assert detection_power(1, mnli_noise, hans_noise, comparisons) == 0.0
    # fewer bounds to split alpha over: never less power
    assert detection_power(10, mnli_noise, hans_noise, 2) >= detection_power(
        10, mnli_noise, hans_noise, comparisons
    )
    rng = np.random.default_rng(7)
    p_hans = np.clip(rng.normal(0.3, 0.05, (400, 10)), 0, 1)
    studies = [
        pd.DataFrame(
            {
                MNLI_MATCHED: rng.binomial(N_MNLI, 0.84, 10) / N_MNLI,
                NON_ENTAILED[0]: rng.binomial(N_HEURISTIC, p) / N_HEURISTIC,
                NON_ENTAILED[1]: np.full(10, 0.3),
                NON_ENTAILED[2]: np.full(10, 0.3),
            }
        )
        for p in p_hans
    ]
    assert reproduce_rate(studies) == pytest.approx(
        detection_power(10, mnli_noise, hans_noise, comparisons), abs=0.06
    )


def test_paper_runs_reproduce():
    runs = pd.read_csv(PAPER_RUNS)
    result = verdict(runs, PAPER_SIZES, DESIGN)
    assert result.outcome == "reproduces"
    assert result.margin == 0.01 and result.min_seeds == 10
    assert result.reason.rule == "passes"
    numbers = result.reason.numbers
    assert numbers["margin"] == 0.01 and numbers["alpha"] == 0.05
    assert numbers["reference"] == MNLI_MATCHED
    assert numbers["bounds"] == {
        "Lexical (nonent)": pytest.approx(0.106, abs=5e-4),
        "Subseq (nonent)": pytest.approx(0.021, abs=5e-4),
        "Constituent (nonent)": pytest.approx(0.035, abs=5e-4),
    }
    assert result.text == (
        "reproduces: the seed-std lower bound of Lexical (nonent) 0.106, Subseq (nonent) 0.021, "
        "Constituent (nonent) 0.035 exceeds the margin 0.010 (3 x MNLI dev acc.'s seed-std upper "
        "bound, at least 0.01) at family-wise alpha 0.05"
    )
    assert [row.column for row in result.columns][:1] == [MNLI_MATCHED]  # then every column
    assert {row.column for row in result.columns} == set(PAPER_SIZES) & set(runs.columns)
    every = {row.column: row for row in seed_variance(runs, PAPER_SIZES)}
    assert len(every) == 38
    rows = {row.column: row for row in result.columns}
    assert all(rows[column] == every[column] for column in rows)
    # MNLI-m spreads less than binomial noise alone would: its seed std is estimated at 0.
    assert rows[MNLI_MATCHED].observed_std == pytest.approx(0.00242, abs=1e-5)
    assert rows[MNLI_MATCHED].noise_std == pytest.approx(0.00367, abs=1e-5)
    assert rows[MNLI_MATCHED].seed_std == 0.0
    assert rows["Lexical (nonent)"].seed_std == pytest.approx(0.1235, abs=1e-4)
    assert rows["Lexical (nonent)"].seed_std_low == pytest.approx(0.1084, abs=1e-4)
    values = [v for row in every.values() for v in astuple(row) if isinstance(v, float)]
    assert all(math.isfinite(v) for v in values)


def test_exact_permutation_p_value_for_five_monotone_seeds():
    table = pd.DataFrame(
        {MNLI_MATCHED: [0.80, 0.81, 0.82, 0.83, 0.84], HANS_OVERALL: [0.1, 0.3, 0.35, 0.6, 0.9]}
    )
    (result,) = correlate(table, MNLI_MATCHED, [HANS_OVERALL])
    assert result.exact and result.spearman_rho == 1.0
    assert result.spearman_p == pytest.approx(2 / 120)
    linear = table.assign(**{HANS_OVERALL: [0.5, 0.52, 0.54, 0.56, 0.58]})
    (result,) = correlate(linear, MNLI_MATCHED, [HANS_OVERALL])
    assert result.pearson_r == pytest.approx(1.0) and result.pearson_p == pytest.approx(2 / 120)


def test_monte_carlo_permutation_is_deterministic_beyond_eight_seeds():
    rng = np.random.default_rng(8)
    table = pd.DataFrame(
        {MNLI_MATCHED: rng.uniform(0.8, 0.85, 12), HANS_OVERALL: rng.uniform(0.5, 0.6, 12)}
    )
    first = correlate(table, MNLI_MATCHED, [HANS_OVERALL], n_resamples=999)
    second = correlate(table, MNLI_MATCHED, [HANS_OVERALL], n_resamples=999)
    assert first == second and not first[0].exact and first[0].pearson_p >= 1 / 1000


def test_constant_columns_give_none_with_a_reason():
    table = pd.DataFrame(
        {
            MNLI_MATCHED: [0.80, 0.81, 0.82, 0.83],
            HANS_OVERALL: [0.5] * 4,
            NON_ENTAILED[0]: [0.1, 0.2, 0.3, 0.4],
        }
    )
    overall, lexical = correlate(table, MNLI_MATCHED, [HANS_OVERALL, NON_ENTAILED[0]])
    assert (overall.pearson_r, overall.pearson_p, overall.spearman_rho, overall.spearman_p) == (
        None,
        None,
        None,
        None,
    )
    assert overall.note == "Overall accuracy is constant across seeds"
    assert lexical.note is None and lexical.pearson_r == pytest.approx(1.0)
    flat = table.assign(**{MNLI_MATCHED: 0.8})
    notes = {c.note for c in correlate(flat, MNLI_MATCHED, [HANS_OVERALL, NON_ENTAILED[0]])}
    assert notes == {"MNLI dev acc. is constant across seeds"}
    answer = predicts(flat, MNLI_MATCHED, [HANS_OVERALL])
    assert answer.answer == "inconclusive"
    assert answer.reason == (
        "inconclusive: no correlation is defined (MNLI dev acc. is constant across seeds)"
    )


def test_mnli_predicts_hans():
    rng = np.random.default_rng(9)
    mnli = rng.uniform(0.82, 0.86, 20)
    related = pd.DataFrame({MNLI_MATCHED: mnli, HANS_OVERALL: 5 * mnli - 3.6})
    answer = predicts(related, MNLI_MATCHED, [HANS_OVERALL], n_resamples=999)
    assert answer.answer == "yes" and answer.reason.startswith(
        "yes: across 20 seeds MNLI dev acc. correlates with Overall accuracy"
    )
    unrelated = related.assign(**{HANS_OVERALL: rng.uniform(0.5, 0.6, 20)})
    answer = predicts(unrelated, MNLI_MATCHED, [HANS_OVERALL], n_resamples=999)
    assert answer.answer == "no" and answer.reason.startswith("no: across 20 seeds no correlation")
    few = simulate(10, 1, 5, hans_seed_std=0.1)[0].assign(**{HANS_OVERALL: mnli[:5] - 0.3})
    answer = predicts(few, MNLI_MATCHED, PREDICTED, n_resamples=999)
    assert answer.answer == "inconclusive"
    assert answer.reason == (
        "inconclusive: with 5 seeds no permutation p-value can fall below the Bonferroni "
        "threshold 0.00625; at least 6 seeds are needed"
    )


def test_paper_runs_mnli_predicts_lexical_nonent():
    answer = predicts(pd.read_csv(PAPER_RUNS), MNLI_MATCHED, PREDICTED, n_resamples=999)
    assert answer.answer == "yes"
    lexical = answer.correlations[0]
    assert lexical.column == "Lexical (nonent)"
    assert lexical.pearson_r == pytest.approx(0.4867, abs=1e-4)
    assert lexical.spearman_rho == pytest.approx(0.4228, abs=1e-4)


def test_sweep_ignores_configurations_at_chance():
    good = simulate(11, 2, 20, hans_seed_std=0.1)
    chance = simulate(12, 1, 20, hans_seed_std=0.1, mnli_accuracy=0.34)[0]
    result = sweep_verdict({"a": good[0], "b": good[1], "chance": chance}, PAPER_SIZES, DESIGN)
    assert result.outcome == "reproduces" and result.ignored == ("chance",)
    assert set(result.verdicts) == {"a", "b"}
    assert (
        result.reason
        == "reproduces in all 2 configurations that learned the task (1 ignored at chance)"
    )


def test_sweep_outcomes():
    good = simulate(13, 1, 20, hans_seed_std=0.1)[0]
    null = constant_table(20)
    few = constant_table(3)
    chance = constant_table(20, mnli=0.33)

    def sweep(configurations: dict[str, pd.DataFrame], shares=None):
        return sweep_verdict(configurations, PAPER_SIZES, DESIGN, shares)

    only_chance = sweep({"x": chance, "y": chance})
    assert only_chance.outcome == "inconclusive"
    assert only_chance.reason == (
        "inconclusive: no configuration learned the task (all 2 within 5 points of chance)"
    )
    assert sweep({"good": good, "few": few}).reason == (
        "reproduces in all 1 conclusive configurations of the 2 that learned the task "
        "(0 ignored at chance)"
    )
    negative = sweep({"n1": null, "n2": null, "chance": chance})
    assert negative.outcome == "does not reproduce"
    assert negative.reason == (
        "does not reproduce in any of the 2 configurations that learned the task (1 ignored at "
        "chance)"
    )
    mixed = sweep({"good": good, "null": null})
    assert mixed.outcome == "inconclusive"
    assert mixed.reason == (
        "inconclusive: reproduces in 1 of the 2 configurations that learned the task (good) but "
        "not in the others (0 ignored at chance)"
    )
    assert sweep({"few": few}).outcome == "inconclusive"
    assert sweep({"few": few}).verdicts["few"].reason.rule == "too few seeds"
    one_class = sweep({"good": good}, {"good": {"hans": [0.99] * 20}})
    assert one_class.outcome == "inconclusive"
    assert one_class.verdicts["good"].reason.rule == "one class"
    with pytest.raises(ValueError, match="at least one configuration"):
        sweep({})


def test_evaluation_sets_too_small_for_any_number_of_seeds_are_inconclusive():
    tiny = {MNLI_MATCHED: 60, **dict.fromkeys(NON_ENTAILED, 20)}
    assert minimum_seeds(0.84 * 0.16 / 60, 0.25 / 20, DESIGN.comparisons) is None
    table = pd.DataFrame(
        {MNLI_MATCHED: [0.8, 0.85, 0.9], **dict.fromkeys(NON_ENTAILED, [0.1, 0.5, 0.9])}
    )
    result = verdict(table, tiny, DESIGN)
    assert result.outcome == "inconclusive" and result.min_seeds is None
    assert result.reason.rule == "sets too small"
    assert result.reason.numbers == {"seed_std": 0.05}
    assert result.text == (
        "inconclusive: no column passes, and the evaluation sets are too small to say it does "
        "not: their noise alone keeps the test from detecting a headline seed std of 0.05 with "
        "80% power with up to 1000 seeds"
    )
