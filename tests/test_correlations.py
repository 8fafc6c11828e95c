"""Correlations across seeds: permutation p-values, undefined cases, the paper's 100 runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seedvar.config import load_config
from seedvar.declared import primary_column
from seedvar.report.wording import note, reason_text
from seedvar.stats.correlation import correlate, predicts

PAPER_RUNS = Path(__file__).resolve().parents[1] / "data/offline/reference/mccoy2020_runs.csv"
CONFIG = load_config(None, profile="smoke")  # the paper's declaration: MNLI -> HANS
HANS = CONFIG.diagnostics["hans"]
MNLI_MATCHED = primary_column(CONFIG.task)  # "MNLI dev acc."
HANS_OVERALL = HANS.overall.column  # "Overall accuracy"
NON_ENTAILED = tuple(HANS.headline)  # Lexical, Subseq, Constituent (nonent)
PREDICTED = [*NON_ENTAILED, HANS_OVERALL]  # the columns MNLI-m accuracy is said to predict


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
    assert note(overall.note) == "Overall accuracy is constant across seeds"
    assert lexical.note is None and lexical.pearson_r == pytest.approx(1.0)
    flat = table.assign(**{MNLI_MATCHED: 0.8})
    notes = {note(c.note) for c in correlate(flat, MNLI_MATCHED, [HANS_OVERALL, NON_ENTAILED[0]])}
    assert notes == {"MNLI dev acc. is constant across seeds"}
    answer = predicts(flat, MNLI_MATCHED, [HANS_OVERALL])
    assert answer.answer == "inconclusive"
    assert reason_text(answer.reason) == (
        "inconclusive: no correlation is defined (MNLI dev acc. is constant across seeds)"
    )


def test_mnli_predicts_hans():
    rng = np.random.default_rng(9)
    mnli = rng.uniform(0.82, 0.86, 20)
    related = pd.DataFrame({MNLI_MATCHED: mnli, HANS_OVERALL: 5 * mnli - 3.6})
    answer = predicts(related, MNLI_MATCHED, [HANS_OVERALL], n_resamples=999)
    assert answer.answer == "yes" and reason_text(answer.reason).startswith(
        "yes: across 20 seeds MNLI dev acc. correlates with Overall accuracy"
    )
    unrelated = related.assign(**{HANS_OVERALL: rng.uniform(0.5, 0.6, 20)})
    answer = predicts(unrelated, MNLI_MATCHED, [HANS_OVERALL], n_resamples=999)
    assert answer.answer == "no" and reason_text(answer.reason).startswith(
        "no: across 20 seeds no correlation"
    )
    few = pd.DataFrame({c: rng.uniform(0.1, 0.9, 5) for c in PREDICTED})
    answer = predicts(
        few.assign(**{MNLI_MATCHED: mnli[:5]}), MNLI_MATCHED, PREDICTED, n_resamples=999
    )
    assert answer.answer == "inconclusive"
    assert reason_text(answer.reason) == (
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
