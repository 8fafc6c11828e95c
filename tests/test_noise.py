"""Evaluation noise resampling templates or subcases, and its place in the verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from seedvar.study.noise import cluster_noise_var, cluster_of
from seedvar.study.verdict import seed_variance


def test_independent_examples_give_the_binomial_noise():
    rng = np.random.default_rng(0)
    correct = rng.random((5, 4000)) < 0.7
    clusters = np.repeat(np.arange(400), 10)  # clusters of 10 independent examples
    binomial = np.mean([row.mean() * (1 - row.mean()) / 4000 for row in correct])
    assert cluster_noise_var(correct, clusters) == pytest.approx(binomial, rel=0.1)


def test_templates_answered_alike_give_the_noise_of_their_count():
    """Every example of a template right or wrong together: 200 templates of 10 examples
    have the noise of 200 examples, 10 times the binomial of 2,000."""
    rng = np.random.default_rng(1)
    correct = np.repeat(rng.random(200) < 0.5, 10)[None, :].repeat(3, axis=0)
    noise = cluster_noise_var(correct, np.repeat(np.arange(200), 10))
    assert noise == pytest.approx(0.25 / 200, rel=0.15)
    assert noise > 8 * 0.25 / 2000
    assert cluster_noise_var(correct, np.zeros(2000)) is None  # one cluster: none


def test_the_first_cluster_column_with_values_is_used():
    examples = pd.DataFrame({"template": [None, None], "subcase": ["a", "b"]})
    assert cluster_of(examples, ["template", "subcase"]) == "subcase"
    assert cluster_of(examples.assign(template=["t1", "t2"]), ["template", "subcase"]) == "template"
    assert cluster_of(examples, ["heuristic"]) is None


def test_the_seed_std_is_net_of_the_larger_noise():
    table = pd.DataFrame({"x": [0.50, 0.55, 0.60, 0.65]})
    plain = seed_variance(table, {"x": 1000})[0]
    clustered = seed_variance(table, {"x": 1000}, clustered={"x": 0.04**2})[0]
    assert plain.noise_std == plain.binomial_noise_std and plain.cluster_noise_std is None
    assert clustered.noise_std == pytest.approx(0.04) and clustered.cluster_noise_std == 0.04
    assert clustered.seed_std is not None and plain.seed_std is not None
    assert clustered.seed_std == pytest.approx(np.sqrt(table["x"].var() - 0.04**2))
    assert clustered.seed_std < plain.seed_std
    smaller = seed_variance(table, {"x": 1000}, clustered={"x": 1e-6})[0]
    assert smaller.noise_std == plain.noise_std  # below the binomial: the binomial stands
