"""Statistics over seeds (pure functions, no I/O): spread, bootstrap, agreement, comparison,
and the seed x subcase interaction beyond one threshold per seed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from seedvar.declared import Diagnostic
from seedvar.metrics import diagnostic_columns

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


# A seed x subcase interaction beyond one threshold per seed (results/interaction.csv): reported
# as a lead, never tested. chi-square / df near 1 is what binomial evaluation noise alone gives
# under the model; LEAD_RATIO or more is worded as a lead in the report.
LEAD_RATIO = 2.0
INTERACTION_COLUMNS = [
    "set",
    "level",
    "group",
    "subcases",
    "seeds",
    "chi_square",
    "df",
    "ratio",
    "lead",
    "top_subcase",
    "top_share",
]


@dataclass(frozen=True)
class Subgroup:
    """The columns of one group of a nested level (HANS: one heuristic's subcases), each of
    one gold label, with that label and its number of examples."""

    set: str
    level: str  # the enclosing group's name (HANS: heuristic)
    group: str  # its value (HANS: lexical_overlap)
    columns: tuple[str, ...]
    labels: tuple[int, ...]
    sizes: tuple[int, ...]


def nested_subgroups(set_name: str, declared: Diagnostic, examples: pd.DataFrame) -> list[Subgroup]:
    """Every group of a nested level (a declared group `within` another, not split, not by
    label) whose columns each hold one gold label, of at most two labels, and number two or
    more: its columns, their labels and sizes (`examples`: canonical, or predictions)."""
    gold = examples["label" if "label" in examples else "gold"].to_numpy()
    masks = {column.name: mask for column, mask in diagnostic_columns(set_name, declared, examples)}
    found = []
    for group, level in declared.groups.items():
        if level.within is None or level.split is not None or level.by_label is not None:
            continue
        if group not in examples or level.within not in examples:
            continue
        value = examples[group].astype(object).to_numpy()
        parent = examples[level.within].astype(object).to_numpy()
        members: dict[str, list[tuple[str, int, int]]] = {}
        for name, mask in masks.items():
            values, parents = set(value[mask]), set(parent[mask])
            if len(values) != 1 or len(parents) != 1 or not mask.any():
                continue
            (v,), (p,) = values, parents
            if not np.array_equal(mask, (value == v) & (parent == p)):
                continue  # a column of another level
            held = np.unique(gold[mask])
            if len(held) == 1:
                members.setdefault(str(p), []).append((name, int(held[0]), int(mask.sum())))
        for p, chosen in members.items():
            if len(chosen) >= 2 and len({label for _, label, _ in chosen}) <= 2:
                found.append(
                    Subgroup(
                        set_name,
                        level.within,
                        p,
                        tuple(c[0] for c in chosen),
                        tuple(c[1] for c in chosen),
                        tuple(c[2] for c in chosen),
                    )
                )
    return found


def threshold_interaction(table: pd.DataFrame, subgroup: Subgroup) -> dict[str, object]:
    """The seed x subcase interaction of one subgroup beyond one threshold per seed.

    Equal-variance signal detection: a seed that differs from another only in its threshold
    c_s moves the probit of its accuracy on every subcase of one gold label up by c_s and on
    the other label's down by c_s. So probit(accuracy of seed s on subcase j) = a_j + g_j c_s
    (g_j = +1 for the subgroup's first label, -1 for the other) is fitted by weighted least
    squares (weights: the binomial variance of each probit, delta method, accuracies
    corrected to (k + 1/2) / (n + 1)); chi_square is the weighted residual sum of squares on
    df = (seeds - 1)(subcases - 1). chi_square / df near 1: noise alone; much above: seeds
    rank the subcases differently, which no threshold explains. A lead, not a test: the
    noise is binomial (not paired) and the model assumes equal-variance Gaussian evidence.
    `top_subcase`: the subcase with the largest share of chi_square."""
    rates = table[list(subgroup.columns)].to_numpy(dtype=float)
    sizes = np.asarray(subgroup.sizes, dtype=float)
    k, j = rates.shape
    p = (rates * sizes + 0.5) / (sizes + 1)
    z = stats.norm.ppf(p)
    weights = sizes * stats.norm.pdf(z) ** 2 / (p * (1 - p))
    sign = np.where(np.asarray(subgroup.labels) == min(subgroup.labels), 1.0, -1.0)
    design = np.zeros((k, j, j + k))
    design[:, np.arange(j), np.arange(j)] = 1.0
    design[np.arange(k), :, j + np.arange(k)] = sign
    root = np.sqrt(weights).ravel()
    x, y = design.reshape(k * j, j + k) * root[:, None], z.ravel() * root
    fitted = x @ np.linalg.lstsq(x, y, rcond=None)[0]
    residual = ((y - fitted) ** 2).reshape(k, j)
    df = (k - 1) * (j - 1)
    chi_square = float(residual.sum())
    ratio = chi_square / df if df > 0 else None
    per_subcase = residual.sum(axis=0)
    top = int(np.argmax(per_subcase))
    return {
        "set": subgroup.set,
        "level": subgroup.level,
        "group": subgroup.group,
        "subcases": j,
        "seeds": k,
        "chi_square": chi_square,
        "df": df,
        "ratio": ratio,
        "lead": ratio is not None and ratio >= LEAD_RATIO,
        "top_subcase": subgroup.columns[top],
        "top_share": float(per_subcase[top] / chi_square) if chi_square > 0 else None,
    }


def interaction_table(table: pd.DataFrame, subgroups: list[Subgroup]) -> pd.DataFrame:
    """`threshold_interaction` of every subgroup whose columns the table has (empty: none)."""
    rows = [
        threshold_interaction(table, s)
        for s in subgroups
        if set(s.columns) <= set(table.columns) and len(table) >= 2
    ]
    return pd.DataFrame(rows, columns=INTERACTION_COLUMNS)
