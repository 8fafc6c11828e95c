"""Statistics over seeds on synthetic numbers with known answers."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from seedvar.stats.analysis import (
    agreement,
    bootstrap_mean_ci,
    compare_spread,
    describe,
    multibootstrap,
)

MNLI_MATCHED = "MNLI dev acc."  # the paper's in-distribution headline column


def test_describe_known_values():
    table = pd.DataFrame({"a": [0.1, 0.2, 0.3, 0.4], "b": [0.5] * 4})
    summary = describe(table, ["a", "b"])
    a = summary.loc["a"]
    assert (a["min"], a["max"], a["mean"]) == pytest.approx((0.1, 0.4, 0.25))
    assert a["range"] == pytest.approx(0.3)
    assert a["std"] == pytest.approx(np.std([0.1, 0.2, 0.3, 0.4], ddof=1))  # 0.1291
    assert a["min"] <= a["ci_low"] < 0.25 < a["ci_high"] <= a["max"]
    b = summary.loc["b"]
    assert (b["std"], b["range"], b["ci_low"], b["ci_high"]) == pytest.approx((0, 0, 0.5, 0.5))


def test_bootstrap_interval_matches_the_normal_approximation():
    values = np.random.default_rng(1).normal(0.5, 0.1, size=400)
    low, high = bootstrap_mean_ci(values, n_boot=4000)
    expected_half_width = 1.96 * values.std(ddof=1) / np.sqrt(len(values))  # about 0.0098
    assert low < values.mean() < high
    assert (high - low) / 2 == pytest.approx(expected_half_width, rel=0.15)


def test_agreement_counts_seeds_per_example():
    correct = np.array([[1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 1]], dtype=bool)
    assert agreement(correct).tolist() == [3, 1, 1, 3]


def test_multibootstrap_separates_seed_variance_from_example_variance():
    assert multibootstrap(np.ones((5, 100))) == (1.0, 1.0, 1.0)
    rng = np.random.default_rng(0)
    same_for_all_seeds = np.tile(rng.random(1000) < 0.5, (5, 1))
    mean, low, high = multibootstrap(same_for_all_seeds)
    assert low < mean < high and high - low < 0.08  # only example noise: about +-0.031
    seeds_disagree = np.zeros((4, 1000), dtype=bool)
    seeds_disagree[:2] = True  # two seeds always right, two always wrong
    mean, low, high = multibootstrap(seeds_disagree)
    assert mean == 0.5 and low <= 0.25 and high >= 0.75  # the seed spread dominates


def test_compare_spread_ratios():
    ours = pd.DataFrame({"MNLI dev acc.": [0.80, 0.81, 0.82], "swap": [0.1, 0.3, 0.5]})
    paper = pd.DataFrame({"MNLI dev acc.": [0.84, 0.85], "swap": [0.0, 0.6]})
    result = compare_spread(ours, paper, ["MNLI dev acc.", "swap"], "MNLI dev acc.")
    assert result.loc["swap", "ours_range"] == pytest.approx(0.4)
    assert result.loc["swap", "ours_range_ratio"] == pytest.approx(0.4 / 0.02)
    assert result.loc["swap", "paper_range_ratio"] == pytest.approx(0.6 / 0.01)
    assert result.loc["swap", "ours_std_ratio"] == pytest.approx(0.2 / 0.01)
    assert result.loc["MNLI dev acc.", "paper_mean"] == pytest.approx(0.845)
    alone = compare_spread(ours, None, ["MNLI dev acc.", "swap"], "MNLI dev acc.")
    assert not any(column.startswith("paper_") for column in alone.columns)
    assert alone["ours_range_ratio"].equals(result["ours_range_ratio"])
    by_swap = compare_spread(ours, paper, ["MNLI dev acc."], "swap")  # any column as the base
    assert by_swap.loc["MNLI dev acc.", "ours_range_ratio"] == pytest.approx(0.02 / 0.4)


def test_equal_seeds_have_a_std_of_exactly_zero_and_one_seed_warns_of_nothing():
    equal = pd.DataFrame({MNLI_MATCHED: [0.7, 0.7, 0.7], "Lexical (nonent)": [0.1, 0.1, 0.1]})
    assert describe(equal, list(equal.columns))["std"].tolist() == [0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "Degrees of freedom <= 0" would fail here
        one = compare_spread(equal.head(1), equal, ["Lexical (nonent)"], MNLI_MATCHED)
    assert one.loc["Lexical (nonent)", "ours_std"] == 0.0
