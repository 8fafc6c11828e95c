"""Evaluation noise between seeds on a shared set: the paired bootstrap against known truths."""

from __future__ import annotations

import numpy as np
import pytest

from seedvar.metrics import accuracy_of_counts, bias_free_accuracy
from seedvar.stats.noise import Scored, binomial_noise, paired_noise
from seedvar.stats.simulate import TESTED, Truth, study


def test_identical_seeds_have_zero_noise():
    rng = np.random.default_rng(0)
    predicted = np.repeat((rng.random(2000) < 0.5).astype(int)[None, :], 5, axis=0)
    found = paired_noise(Scored(np.repeat([0, 1], 1000), predicted, 2), accuracy_of_counts)
    assert found.paired_var == 0.0
    assert found.single_var.min() > 0  # each seed alone still has its sampling error


def test_independent_seeds_on_independent_examples_give_the_binomial_noise():
    rng = np.random.default_rng(1)
    gold = np.zeros(4000, dtype=int)
    predicted = (rng.random((6, 4000)) < 0.3).astype(int)  # right 70 %, independently
    found = paired_noise(Scored(gold, predicted, 2), accuracy_of_counts)
    binomial = binomial_noise(found.values, 4000)
    assert found.paired_var == pytest.approx(binomial.paired_var, rel=0.15)


def test_on_a_shared_set_the_paired_noise_is_the_spread_of_seeds_without_a_seed_effect():
    """300 simulated studies of 12 seeds with no seed effect on a set where examples pull all
    seeds alike: the observed variance across seeds averages to the paired noise (within 10 %),
    while the binomial overstates it by more than a third."""
    observed, paired, binomial = [], [], []
    for index in range(300):
        table, noise, _ = study(Truth(examples=500, shared=1.0), index, resamples=100)
        observed.append(table[TESTED].var(ddof=1))
        paired.append(noise[TESTED].paired_var)
        binomial.append(binomial_noise(table[TESTED].to_numpy(), 500).paired_var)
    assert np.mean(paired) == pytest.approx(np.mean(observed), rel=0.1)
    assert np.mean(binomial) > 1.33 * np.mean(observed)


def test_clusters_answered_alike_count_as_one_unit_and_strata_keep_their_sizes():
    """Templates of 10 examples answered alike by each seed: the noise is that of 200 units,
    about 10 times what the examples alone would say; resampling within strata that hold
    one label each keeps the label counts, so a stratified bias-free noise stays finite."""
    rng = np.random.default_rng(2)
    per_template = (rng.random((4, 200)) < 0.5).astype(int)
    predicted = np.repeat(per_template, 10, axis=1)
    gold = np.zeros(2000, dtype=int)
    templates = np.repeat(np.arange(200), 10)
    clustered = paired_noise(Scored(gold, predicted, 2, templates), accuracy_of_counts)
    alone = paired_noise(Scored(gold, predicted, 2), accuracy_of_counts)
    assert clustered.paired_var == pytest.approx(10 * alone.paired_var, rel=0.3)
    gold = np.repeat([0, 1], 1000)
    strata = np.repeat(["a", "b"], 1000)
    found = paired_noise(Scored(gold, predicted, 2, None, strata), bias_free_accuracy)
    assert np.isfinite(found.paired_var) and found.method.endswith("within strata")


def test_bias_free_accuracy_ignores_a_pure_threshold_and_reads_chance_as_half():
    """Two labels, equal-variance signal detection: seeds with d' = 1 and criteria from -1 to
    1 have accuracies on label 1 from 31 % to 93 % and one bias-free accuracy, Phi(1/2)."""
    from scipy.stats import norm

    for criterion in (-1.0, 0.0, 1.0):
        hit_1, hit_0 = norm.cdf(0.5 - criterion), norm.cdf(0.5 + criterion)
        n = 10**6
        counts = np.array([[hit_0 * n, (1 - hit_0) * n], [(1 - hit_1) * n, hit_1 * n]])
        assert bias_free_accuracy(counts) == pytest.approx(norm.cdf(0.5), abs=1e-4)
    answers_at_random = np.array([[300.0, 700.0], [300.0, 700.0]])
    assert bias_free_accuracy(answers_at_random) == pytest.approx(0.5, abs=1e-3)


def test_weighted_auc_is_the_mann_whitney_statistic_with_ties_and_weights():
    """Random scores on a coarse grid (many ties): with unit weights the AUC is Mann-Whitney's
    U / (n1 n0) (ties count half); integer weights give the AUC of the examples repeated that
    many times."""
    from scipy.stats import mannwhitneyu

    from seedvar.stats.noise import weighted_auc

    rng = np.random.default_rng(31)
    score = rng.integers(0, 8, 300).astype(float)  # 8 values: ties everywhere
    positive = rng.random(300) < 0.4
    u = mannwhitneyu(score[positive], score[~positive]).statistic
    expected = u / (positive.sum() * (~positive).sum())
    assert weighted_auc(score, positive, np.ones((1, 300)))[0] == pytest.approx(expected)
    weights = rng.integers(0, 4, (3, 300)).astype(float)
    for row in weights:
        repeated = np.repeat(np.arange(300), row.astype(int))
        s, p = score[repeated], positive[repeated]
        u = mannwhitneyu(s[p], s[~p]).statistic
        found = weighted_auc(score, positive, row[None, :])[0]
        assert found == pytest.approx(u / (p.sum() * (~p).sum()))
    assert 0.4 < expected < 0.6  # random scores: about chance


def test_label_auc_is_unmoved_by_a_monotone_shift_of_the_scores_and_chance_is_half():
    """A threshold (a constant added to a label's score) and any increasing transform of the
    scores leave every label's AUC as it was; with three labels it is the mean one-vs-rest
    AUC of each gold label's own score, 0.5 for scores that carry nothing."""
    from seedvar.stats.noise import label_auc

    rng = np.random.default_rng(32)
    gold = rng.integers(0, 3, 3000)
    scores = rng.normal(size=(3000, 3)) + 0.8 * np.eye(3)[gold]
    ones = np.ones((1, 3000))
    base = label_auc(scores, gold, ones)[0]
    for moved in (scores + np.array([2.0, -1.0, 0.5]), np.exp(scores), scores**3):
        assert label_auc(moved, gold, ones)[0] == pytest.approx(base, abs=1e-12)
    own = [np.mean(scores[gold == x, x][:, None] > scores[gold != x, x][None, :]) for x in range(3)]
    assert base == pytest.approx(np.mean(own))  # no ties among normal scores
    assert base > 0.7
    noise = rng.normal(size=(3000, 3))
    assert label_auc(noise, gold, ones)[0] == pytest.approx(0.5, abs=0.02)
    two = gold[gold < 2]  # two labels: the first label's score alone
    first = scores[gold < 2]
    assert label_auc(first, two, np.ones((1, len(two))))[0] == pytest.approx(
        np.mean(first[two == 0, 0][:, None] > first[two == 1, 0][None, :])
    )
