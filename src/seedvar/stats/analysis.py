"""Statistics over seeds (pure functions, no I/O): spread, agreement, the seed x subcase lead."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from seedvar.declared import Diagnostic
from seedvar.metrics import diagnostic_columns

STATISTICS = ("min", "max", "mean", "std", "range", "ci_low", "ci_high")
LEVEL = 0.95  # of the bootstrap intervals
# The seed x subcase interaction (results/interaction.csv) is a lead, never tested: chi-square
# / df near 1 is what binomial evaluation noise alone gives; LEAD_RATIO or more is worded a lead.
LEAD_RATIO = 2.0
_WHERE = ("set", "level", "group", "subcases", "seeds")
INTERACTION_COLUMNS = [*_WHERE, "chi_square", "df", "ratio", "lead", "top_subcase", "top_share"]


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_mean_ci(values: np.ndarray, n_boot: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap LEVEL interval of the mean, resampling the values (seeds)."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(0)
    return _percentiles(values[rng.integers(0, len(values), (n_boot, len(values)))].mean(1))


def describe(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Per column: min, max, mean, std (ddof 1), range, and a 95 % bootstrap CI of the mean."""
    rows = {}
    for column in columns:
        values = table[column].to_numpy(dtype=float)
        spread = (values.min(), values.max(), values.mean(), seed_std(values), np.ptp(values))
        rows[column] = (*spread, *bootstrap_mean_ci(values))
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(STATISTICS))


def seed_std(values: np.ndarray) -> float:
    """The std across seeds (ddof 1); exactly 0 for equal seeds (not their mean's rounding)."""
    return float(values.std(ddof=1)) if values.max() > values.min() else 0.0


def agreement(correct: np.ndarray) -> np.ndarray:
    """For each example (column of a seeds x examples matrix), how many seeds got it right."""
    return np.asarray(correct, dtype=bool).sum(axis=0)


def multibootstrap(correct: np.ndarray, n_boot: int = 1000) -> tuple[float, float, float]:
    """Multi-Bootstrap (Sellam et al. 2021): accuracy and its CI, seeds and examples resampled."""
    correct = np.asarray(correct, dtype=float)
    n_seeds, n_examples = correct.shape
    rng = np.random.default_rng(0)
    estimates = np.empty(n_boot)
    for b in range(n_boot):
        seeds = rng.integers(0, n_seeds, size=n_seeds)
        examples = rng.integers(0, n_examples, size=n_examples)
        estimates[b] = correct[np.ix_(seeds, examples)].mean()
    return (float(correct.mean()), *_percentiles(estimates))


def compare_spread(
    ours: pd.DataFrame, paper: pd.DataFrame | None, columns: list[str], base: str
) -> pd.DataFrame:
    """Per column: range, mean and std, ours and `paper`'s, and their ratio to the base's."""
    rows: dict[str, dict[str, float]] = {column: {} for column in columns}
    for name, table in (("ours", ours), ("paper", paper)):
        if table is None or base not in table:
            continue
        base_values = table[base].to_numpy(dtype=float)
        base_range, base_std = np.ptp(base_values), seed_std(base_values)
        for column in [c for c in columns if c in table]:
            values = table[column].to_numpy(dtype=float)
            spread, std = np.ptp(values), seed_std(values)
            found = (values.min(), values.max(), spread, values.mean(), std)
            keys = ("min", "max", "range", "mean", "std")
            rows[column] |= {f"{name}_{s}": v for s, v in zip(keys, found, strict=True)}
            rows[column][f"{name}_range_ratio"] = spread / base_range if base_range > 0 else np.nan
            rows[column][f"{name}_std_ratio"] = std / base_std if base_std > 0 else np.nan
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns)


@dataclass(frozen=True)
class Subgroup:
    """The one-label columns of one group of a nested level (HANS: a heuristic's subcases)."""

    set: str
    level: str  # the enclosing group's name (HANS: heuristic)
    group: str  # its value (HANS: lexical_overlap)
    columns: tuple[str, ...]
    labels: tuple[int, ...]
    sizes: tuple[int, ...]


def nested_subgroups(set_name: str, declared: Diagnostic, examples: pd.DataFrame) -> list[Subgroup]:
    """Every group of a nested level whose two or more columns each hold one of two labels."""
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
        taken: list[np.ndarray] = []  # a finer level's column of the same examples is another name
        for name, mask in masks.items():
            if any(np.array_equal(mask, other) for other in taken):
                continue
            values, parents = set(value[mask]), set(parent[mask])
            if len(values) != 1 or len(parents) != 1:
                continue
            (v,), (p,) = values, parents
            if not np.array_equal(mask, (value == v) & (parent == p)):
                continue  # a column of another level
            held = np.unique(gold[mask])
            taken.append(mask)
            if len(held) == 1:
                members.setdefault(str(p), []).append((name, int(held[0]), int(mask.sum())))
        for p, chosen in members.items():
            if len(chosen) >= 2 and len({label for _, label, _ in chosen}) <= 2:
                names, labels, sizes = zip(*chosen, strict=True)
                found.append(Subgroup(set_name, level.within, p, names, labels, sizes))
    return found


def threshold_interaction(table: pd.DataFrame, subgroup: Subgroup) -> dict[str, object]:
    """The seed x subcase interaction of one subgroup beyond one threshold per seed (a lead):
    probit(accuracy of seed s on subcase j) = a_j + g_j c_s (g_j = +1 for the first label, -1
    for the other) fitted by binomially weighted least squares; chi_square on (seeds - 1)
    (subcases - 1) df near df is noise alone; `top_subcase` contributes most."""
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
    residual = ((y - x @ np.linalg.lstsq(x, y, rcond=None)[0]) ** 2).reshape(k, j)
    df, chi_square = (k - 1) * (j - 1), float(residual.sum())
    ratio = chi_square / df if df > 0 else None
    per_subcase = residual.sum(axis=0)
    top = int(np.argmax(per_subcase))
    share = float(per_subcase[top] / chi_square) if chi_square > 0 else None
    lead = ratio is not None and ratio >= LEAD_RATIO
    found = (chi_square, df, ratio, lead, subgroup.columns[top], share)
    where = (subgroup.set, subgroup.level, subgroup.group, j, k)
    return dict(zip(INTERACTION_COLUMNS, (*where, *found), strict=True))


def interaction_table(table: pd.DataFrame, subgroups: list[Subgroup]) -> pd.DataFrame:
    """`threshold_interaction` of every subgroup of two labels (a threshold moves them apart)
    whose columns the table has (empty: none)."""
    shown = [
        s
        for s in subgroups
        if set(s.columns) <= set(table.columns) and len(table) >= 2 and len(set(s.labels)) == 2
    ]
    rows = [threshold_interaction(table, s) for s in shown]
    return pd.DataFrame(rows, columns=INTERACTION_COLUMNS)
