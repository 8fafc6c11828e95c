"""Expected best-of-n curves (Dodge et al. 2019, "Show your work"), exact over the study's
seeds (pure functions, no I/O).

Of N trained seeds, draw n without replacement. `expected_best`: the expected largest value
among them. `expected_chosen`: the expected value of another column for the seed of the n with
the best `by` column, the model one would keep by in-distribution validation. Both are exact
averages over all C(N, n) subsets, with the std across subsets as the band. Seeds tied on `by`
are chosen among at random (by symmetry, exactly the ties' mean of the target and of its
square).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import gammaln


@dataclass(frozen=True)
class Curve:
    """Expected value and std across subsets, for n = 1 .. N."""

    n: np.ndarray
    mean: np.ndarray
    std: np.ndarray


def _max_rank_weights(count: int) -> np.ndarray:
    """weights[n - 1, i]: the chance that, of n seeds drawn from `count`, the one ranked i-th
    from the bottom (0-based) ranks highest: C(i, n - 1) / C(count, n)."""
    n = np.arange(1, count + 1)[:, None]
    i = np.arange(count)[None, :]
    with np.errstate(invalid="ignore"):
        log_weights = (
            gammaln(i + 1)
            - gammaln(n)
            - gammaln(i - n + 2)
            - (gammaln(count + 1) - gammaln(n + 1) - gammaln(count - n + 1))
        )
    return np.where(i >= n - 1, np.exp(log_weights), 0.0)


def expected_chosen(by: np.ndarray, target: np.ndarray) -> Curve:
    """The expected `target` of the seed with the best `by` among n seeds, n = 1 .. N."""
    frame = pd.DataFrame({"by": np.asarray(by, dtype=float), "target": target})
    frame["square"] = frame["target"] ** 2
    ties = frame.groupby("by")[["target", "square"]].transform("mean")
    ranked = ties.assign(by=frame["by"]).sort_values("by", kind="stable")
    weights = _max_rank_weights(len(frame))
    mean = weights @ ranked["target"].to_numpy(dtype=float)
    variance = np.maximum(weights @ ranked["square"].to_numpy(dtype=float) - mean**2, 0.0)
    return Curve(np.arange(1, len(frame) + 1), mean, np.sqrt(variance))


def expected_best(values: np.ndarray) -> Curve:
    """The expected largest of n seeds' values, n = 1 .. N."""
    return expected_chosen(values, values)


def best_of_n_table(table: pd.DataFrame, by: str, columns: list[str]) -> pd.DataFrame:
    """Long table of curves: per n, the best `by`, and per column the value of the seed chosen
    by `by` beside the column's own best (`curve`: "best" or "chosen by <by>")."""
    rows = []
    chosen = f"chosen by {by}"
    for column in [by, *[c for c in columns if c != by]]:
        values = table[column].to_numpy(dtype=float)
        curves = {"best": expected_best(values)}
        if column != by:
            curves[chosen] = expected_chosen(table[by].to_numpy(dtype=float), values)
        for name, curve in curves.items():
            rows += [
                {"column": column, "curve": name, "n": int(n), "mean": m, "std": s}
                for n, m, s in zip(curve.n, curve.mean, curve.std, strict=True)
            ]
    return pd.DataFrame(rows)
