"""Confidence bounds of the seed variance across a seeds table (pure functions, no I/O): the
variance across seeds less the paired evaluation noise, bounded by the more cautious of the
chi-square bound and, from SEED_FLOOR seeds on, Bonett's (2006) kurtosis-adjusted one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from seedvar.stats.reason import Reason

ALPHA = 0.05  # family-wise error rate of every test of the verdict
LEVEL = 0.95  # confidence level of the reported seed-std intervals
# A headline column must have a seed std at least STD_RATIO times the in-distribution
# headline's, and at least STD_FLOOR in absolute terms (1 accuracy point): 3 x the evaluation
# noise std of MNLI-m at its full size (sqrt(.84 * .16 / 9815) = 0.0037), so a diagnostic
# column must spread more than three evaluations of one model would.
STD_RATIO = 3.0
STD_FLOOR = 0.01
# The fewest seeds a conclusive outcome may rest on: where Bonett's bound is defined (k > 4)
# and, measured by simulation (tests/test_verdict.py), the combined lower bound keeps its level
# for normal, t3 and lognormal seeds (0.02-0.1 % at 5-6 seeds, nominal 1.25 %), while the
# chi-square bound alone, all there is at 4 seeds, does not (4-6 % for heavy tails).
SEED_FLOOR = 5


@dataclass(frozen=True)
class ColumnVariance:
    """One column's across-seed variance split into evaluation noise and seed variance."""

    column: str
    n_seeds: int
    mean: float
    noise_std: float  # the paired evaluation noise the seed std is net of
    observed_std: float | None = None  # across seeds, ddof 1
    seed_std: float | None = None  # sqrt(max(observed var - noise var, 0))
    seed_std_low: float | None = None  # LEVEL interval of the seed std (chi-square and Bonett)
    seed_std_high: float | None = None
    noise_fit_p: float | None = None  # P(a spread this small | no seed variance)
    note: Reason | None = None  # why values are None, or why the seed std is 0


def accuracies(table: pd.DataFrame, column: str) -> np.ndarray:
    """A column's per-seed accuracies, checked to be present, finite and within [0, 1]."""
    if column not in table.columns:
        raise KeyError(f"the seeds table has no column {column!r}")
    values = table[column].to_numpy(dtype=float)
    if len(values) == 0:
        raise ValueError("the seeds table has no rows")
    if not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1:
        raise ValueError(f"column {column!r} must hold accuracies in [0, 1]")
    return values


def _bonett_log_se(values: np.ndarray) -> np.ndarray:
    """Bonett's (2006) standard error of log(c s^2) along the last axis, from the sample's
    own kurtosis: what keeps a variance bound honest when seeds have heavy tails."""
    k = values.shape[-1]
    cut = int(1 / (2 * math.sqrt(k - 4)) * k)  # scipy's trim_mean, without its overhead
    trimmed = np.partition(values, (cut, k - cut - 1), axis=-1)[..., cut : k - cut]
    centre = trimmed.mean(axis=-1, keepdims=True)
    squares = ((values - values.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    fourth = ((values - centre) ** 4).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        kurtosis = np.where(squares > 0, k * fourth / squares**2, 0.0)
    return np.sqrt(np.maximum(kurtosis - (k - 3) / k, 0.0) / (k - 1))


def variance_bound(values: np.ndarray, quantile: float) -> np.ndarray:
    """One-sided bound of the variance across seeds (last axis; `quantile` > 0.5: lower):
    chi-square and, from SEED_FLOOR seeds on, Bonett's, whichever is more cautious."""
    values = np.asarray(values, dtype=float)
    k = values.shape[-1]
    variance = np.where(np.ptp(values, axis=-1) > 0, values.var(axis=-1, ddof=1), 0.0)
    chi_square = variance * (k - 1) / stats.chi2.ppf(quantile, k - 1)
    if k < SEED_FLOOR:
        return chi_square
    z = stats.norm.ppf(quantile)
    scale = k / (k - abs(z))
    bonett = scale * variance * np.exp(-z * scale * _bonett_log_se(values))
    return np.minimum(chi_square, bonett) if quantile > 0.5 else np.maximum(chi_square, bonett)


def std_bound(values: np.ndarray, quantile: float, noise_var: float) -> float:
    """Confidence bound of the seed std: sqrt(max(variance bound - noise, 0))."""
    return math.sqrt(max(float(variance_bound(values, quantile)) - noise_var, 0.0))


def seed_variance(
    table: pd.DataFrame, noise_var: Mapping[str, float], columns: Sequence[str]
) -> list[ColumnVariance]:
    """Per column: the noise, observed and seed std, its LEVEL interval and the noise's fit."""
    tail = (1 - LEVEL) / 2
    rows = []
    for column in columns:
        values, noise = accuracies(table, column), float(noise_var[column])
        k, mean, noise_std = len(values), float(values.mean()), math.sqrt(noise)
        if k < 2:
            rows.append(ColumnVariance(column, k, mean, noise_std, note=Reason("one seed", {})))
            continue
        variance = float(values.var(ddof=1)) if np.ptp(values) > 0 else 0.0
        fit_p = float(stats.chi2.cdf((k - 1) * variance / noise, k - 1)) if noise > 0 else None
        rejected = fit_p if fit_p is not None and fit_p < ALPHA else None
        observed, seed_std = math.sqrt(variance), math.sqrt(max(variance - noise, 0.0))
        bounds = (std_bound(values, 1 - tail, noise), std_bound(values, tail, noise))
        numbers = {"noise": noise_std, "observed": observed, "p": rejected}
        note = Reason("noise over spread", numbers) if variance < noise else None
        found = (observed, seed_std, *bounds, fit_p, note)
        rows.append(ColumnVariance(column, k, mean, noise_std, *found))
    return rows
