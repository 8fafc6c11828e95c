"""Correlations across seeds with permutation p-values, and whether they predict (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from seedvar.stats.bounds import ALPHA, accuracies
from seedvar.stats.reason import Reason


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman correlation across seeds of the primary column with one column."""

    column: str
    n_seeds: int
    pearson_r: float | None
    pearson_p: float | None
    spearman_rho: float | None
    spearman_p: float | None
    exact: bool  # all n! pairings enumerated (else a fixed-seed Monte Carlo permutation test)
    note: Reason | None  # why values are None


@dataclass(frozen=True)
class Prediction:
    """Whether the primary in-distribution accuracy predicts diagnostic accuracy across seeds."""

    answer: Literal["yes", "no", "inconclusive"]
    reason: Reason
    correlations: tuple[Correlation, ...]


def _pearson(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Pearson correlation along `axis`, vectorised over the leading axes of x."""
    x_centred = x - x.mean(axis=axis, keepdims=True)
    y_centred = y - y.mean()
    numerator = (x_centred * y_centred).sum(axis=axis)
    return numerator / np.sqrt((x_centred**2).sum(axis=axis) * (y_centred**2).sum())


def _permutation_p(x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int) -> float:
    """Two-sided permutation p-value of Pearson(x, y) over pairings: all n! when n <= 8."""
    result = stats.permutation_test(
        (x,),
        lambda permuted, axis: _pearson(permuted, y, axis),
        permutation_type="pairings",
        vectorized=True,
        n_resamples=math.factorial(len(x)) if len(x) <= 8 else n_resamples,
        rng=np.random.default_rng(seed),
    )
    return float(min(result.pvalue, 1.0))


def correlate(
    table: pd.DataFrame, base: str, columns: Sequence[str], n_resamples: int = 9999, seed: int = 0
) -> list[Correlation]:
    """Pearson and Spearman correlation of `base` with each column, permutation p-values."""
    x = accuracies(table, base)
    n = len(x)

    def correlation(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        return float(np.clip(_pearson(a, b), -1, 1)), _permutation_p(a, b, n_resamples, seed)

    rows = []
    for column in columns:
        y = accuracies(table, column)
        note = None
        if n < 3:
            note = Reason("few seeds to correlate", {"seeds": n})
        elif np.ptp(x) == 0 or np.ptp(y) == 0:
            note = Reason("constant", {"column": base if np.ptp(x) == 0 else column})
        if note is not None:
            rows.append(Correlation(column, n, None, None, None, None, n <= 8, note))
            continue
        ranks = correlation(stats.rankdata(x), stats.rankdata(y))
        rows.append(Correlation(column, n, *correlation(x, y), *ranks, n <= 8, None))
    return rows


def _smallest_p(n: int, n_resamples: int) -> float:
    """Smallest two-sided permutation p-value attainable with n seeds."""
    return 2 / math.factorial(n) if n <= 8 else 2 / (n_resamples + 1)


def predicts(
    table: pd.DataFrame,
    base: str,
    columns: Sequence[str],
    alpha: float = ALPHA,
    n_resamples: int = 9999,
    seed: int = 0,
) -> Prediction:
    """Does `base` predict the `columns` across seeds? "yes" when some permutation p is below
    alpha / (2 x the defined columns); "inconclusive" when none is defined or none could be."""
    correlations = tuple(correlate(table, base, columns, n_resamples, seed))
    defined = [c for c in correlations if c.note is None]
    n = len(table)
    if not defined:
        notes = [c.note for c in correlations if c.note is not None]
        return Prediction("inconclusive", Reason("undefined", {"notes": notes}), correlations)
    threshold = alpha / (2 * len(defined))
    if 2 / (n_resamples + 1) >= threshold:
        raise ValueError(f"{n_resamples} resamples cannot reach the threshold {threshold:.3g}")
    numbers = {"seeds": n, "base": base, "threshold": threshold}
    if _smallest_p(n, n_resamples) >= threshold:
        needed = next(m for m in range(n, 10) if _smallest_p(m, n_resamples) < threshold)
        reason = Reason("unreachable", numbers | {"needed": needed})
        return Prediction("inconclusive", reason, correlations)
    tests = [(c.pearson_p, "Pearson r", c.pearson_r, c) for c in defined]
    tests += [(c.spearman_p, "Spearman rho", c.spearman_rho, c) for c in defined]
    p, name, value, best = min(tests, key=lambda test: (test[0], -abs(test[2] or 0.0)))
    numbers |= {"column": best.column, "p": p, "statistic": name, "value": value}
    if p is not None and p < threshold:
        return Prediction("yes", Reason("correlates", numbers), correlations)
    numbers["columns"] = len(defined)
    return Prediction("no", Reason("uncorrelated", numbers), correlations)
