"""Expected best-of-n curves: exact against every subset, and on the paper's 100 runs."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from seedvar.report.wording import best_of_n_text
from seedvar.results.past_the_paper import BEST_OF_N_COLUMNS, OURS, best_of_n_curves
from seedvar.stats.best_of_n import (
    best_of_n_table,
    bootstrap_se,
    expected_best,
    expected_chosen,
)
from tests.helpers import OFFLINE

PAPER = OFFLINE / "reference" / "mccoy2020_runs.csv"


def _enumerated(by: np.ndarray, target: np.ndarray, n: int) -> tuple[float, float]:
    """Mean and std over all subsets of n of the target of the seed with the best `by`, ties
    broken at random (the mean over the tied seeds of the target and of its square)."""
    firsts, seconds = [], []
    for subset in itertools.combinations(range(len(by)), n):
        chosen = [i for i in subset if by[i] == max(by[list(subset)])]
        firsts.append(np.mean(target[chosen]))
        seconds.append(np.mean(target[chosen] ** 2))
    mean = float(np.mean(firsts))
    return mean, float(np.sqrt(np.mean(seconds) - mean**2))


def test_curves_equal_the_average_over_every_subset():
    rng = np.random.default_rng(0)
    by = rng.integers(0, 4, size=8).astype(float)  # ties on the validation column
    target = rng.random(8)
    chosen, best = expected_chosen(by, target), expected_best(target)
    for n in range(1, 9):
        mean, std = _enumerated(by, target, n)
        assert chosen.mean[n - 1] == pytest.approx(mean, abs=1e-12)
        assert chosen.std[n - 1] == pytest.approx(std, abs=1e-9)
        assert best.mean[n - 1] == pytest.approx(_enumerated(target, target, n)[0], abs=1e-12)
    assert best.mean[0] == pytest.approx(target.mean()) and best.mean[-1] == target.max()
    assert np.all(np.diff(best.mean) >= 0)


def test_paper_runs_picking_by_mnli_does_not_pick_the_best_generalizer():
    """McCoy et al.'s 100 runs: the run with the best MNLI dev accuracy (two tie) scores
    34.4 % on subject/object swap on average, against 66.2 % for the best run on it."""
    paper = pd.read_csv(PAPER)
    curves = best_of_n_table(paper, "MNLI dev acc.", ["ln_subject/object_swap"])
    last = curves[curves["n"] == 100].set_index(["column", "curve"])["mean"]
    swap = paper["ln_subject/object_swap"]
    top = paper["MNLI dev acc."] == paper["MNLI dev acc."].max()
    assert top.sum() == 2
    assert last[("ln_subject/object_swap", "chosen by MNLI dev acc.")] == pytest.approx(
        swap[top].mean()
    )
    assert last[("ln_subject/object_swap", "best")] == pytest.approx(swap.max())
    assert swap.max() == pytest.approx(0.662) and swap[top].mean() == pytest.approx(0.344)
    one = curves[curves["n"] == 1].set_index(["column", "curve"])["mean"]
    assert one[("ln_subject/object_swap", "best")] == pytest.approx(swap.mean())
    assert one[("MNLI dev acc.", "best")] == pytest.approx(paper["MNLI dev acc."].mean())


def test_bootstrap_se_equals_the_curves_of_each_resample():
    """The vectorised SE against the curve recomputed on each resample of the seeds' rows."""
    rng = np.random.default_rng(1)
    by = rng.integers(0, 5, size=12).astype(float)  # ties, and duplicates in every resample
    target = rng.random(12)
    rows = np.random.default_rng(3).integers(0, 12, size=(50, 12))
    curves = [expected_chosen(by[r], target[r]).mean for r in rows]
    expected = np.std(curves, axis=0, ddof=1)
    assert bootstrap_se(by, target, resamples=50, seed=3) == pytest.approx(expected, abs=1e-12)


def test_paper_runs_kept_value_has_its_se_and_its_tie():
    """McCoy et al.'s 100 runs: the kept run's 34.4 % on subject/object swap is the mean of
    two runs tied on MNLI dev accuracy (25.6 % and 43.2 %), with a bootstrap SE of 6-11
    points; the band is that SE, not the spread across subsets (0 at n = 100)."""
    paper = pd.read_csv(PAPER)
    curves = best_of_n_curves(
        paper, "MNLI dev acc.", ["ln_subject/object_swap"], OURS, "over all 100 runs"
    )
    assert list(curves.columns) == BEST_OF_N_COLUMNS
    kept = curves.query("curve == 'chosen by MNLI dev acc.' and n == 100").iloc[0]
    assert kept["mean"] == pytest.approx(0.344) and kept["subset_std"] == pytest.approx(0.088)
    assert kept["tied"] == 2 and kept["tied_values"] == "0.256 0.432"
    assert 0.06 <= kept["se"] <= 0.11
    assert kept["high"] - kept["low"] == pytest.approx(2 * kept["se"])
    best = curves.query("column == 'ln_subject/object_swap' and curve == 'best' and n == 100")
    assert best["tied"].item() == 1 and best["tied_values"].item() == ""
    text = best_of_n_text(curves, "MNLI dev acc.", ["ln_subject/object_swap"])
    assert text.startswith(
        "Best of n over all 100 runs: keeping the seed with the best MNLI dev acc. of the 100 "
        f"gives ln_subject/object_swap 34.4% ± {100 * kept['se']:.1f}, the mean of 2 seeds "
        "tied on MNLI dev acc.: 25.6%, 43.2% (the best of the 100 on it: 66.2%;"
    )
