"""Statistics over seeds (pure functions, no I/O): spread, bootstrap, agreement, comparison."""

from __future__ import annotations

import numpy as np
import pandas as pd

STATISTICS = ("min", "max", "mean", "std", "range", "ci_low", "ci_high")


def bootstrap_mean_ci(
    values: np.ndarray, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean, resampling the values (seeds)."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def describe(table: pd.DataFrame, columns: list[str], n_boot: int = 2000) -> pd.DataFrame:
    """Per column: min, max, mean, std (ddof 1), range, and a 95 % bootstrap CI of the mean."""
    rows = {}
    for column in columns:
        values = table[column].to_numpy(dtype=float)
        low, high = bootstrap_mean_ci(values, n_boot)
        rows[column] = {
            "min": values.min(),
            "max": values.max(),
            "mean": values.mean(),
            "std": seed_std(values),
            "range": values.max() - values.min(),
            "ci_low": low,
            "ci_high": high,
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(STATISTICS))


def seed_std(values: np.ndarray) -> float:
    """The std across seeds (ddof 1); exactly 0 for one seed or equal seeds (not the rounding
    error of their mean, 6.8e-17)."""
    return float(values.std(ddof=1)) if values.max() > values.min() else 0.0


def agreement(correct: np.ndarray) -> np.ndarray:
    """For each example (column of a seeds x examples matrix), how many seeds got it right."""
    return np.asarray(correct, dtype=bool).sum(axis=0)


def multibootstrap(
    correct: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Multi-Bootstrap (Sellam et al. 2021): accuracy and its CI, resampling seeds and examples
    jointly from a seeds x examples matrix of correct answers."""
    correct = np.asarray(correct, dtype=float)
    n_seeds, n_examples = correct.shape
    rng = np.random.default_rng(seed)
    estimates = np.empty(n_boot)
    for b in range(n_boot):
        seeds = rng.integers(0, n_seeds, size=n_seeds)
        examples = rng.integers(0, n_examples, size=n_examples)
        estimates[b] = correct[np.ix_(seeds, examples)].mean()
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return float(correct.mean()), float(low), float(high)


def compare_spread(
    ours: pd.DataFrame, paper: pd.DataFrame | None, columns: list[str], base: str
) -> pd.DataFrame:
    """Side by side per column: range, mean, std, ours and a published reference's (`paper`,
    if any; empty where it lacks the column), and each column's spread relative to the base
    column's (range and std ratio)."""
    tables = [("ours", ours)] + ([("paper", paper)] if paper is not None else [])
    rows: dict[str, dict[str, float]] = {column: {} for column in columns}
    for name, table in tables:
        if base not in table:
            continue
        base_values = table[base].to_numpy(dtype=float)
        base_range = base_values.max() - base_values.min()
        base_std = seed_std(base_values)
        for column in [c for c in columns if c in table]:
            values = table[column].to_numpy(dtype=float)
            spread = values.max() - values.min()
            std = seed_std(values)
            row = rows[column]
            row[f"{name}_min"], row[f"{name}_max"] = values.min(), values.max()
            row[f"{name}_range"], row[f"{name}_mean"], row[f"{name}_std"] = (
                spread,
                values.mean(),
                std,
            )
            row[f"{name}_range_ratio"] = spread / base_range if base_range > 0 else np.nan
            row[f"{name}_std_ratio"] = std / base_std if base_std > 0 else np.nan
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns)
