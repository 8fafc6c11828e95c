"""Expected best-of-n curves (Dodge et al. 2019, "Show your work"), exact over the study's
seeds (pure functions, no I/O).

Of N trained seeds, draw n without replacement. `expected_best`: the expected largest value
among them. `expected_chosen`: the expected value of another column for the seed of the n with
the best `by` column, the model one would keep by in-distribution validation. Both are exact
averages over all C(N, n) subsets; the std across subsets is their spread (0 at n = N, not an
uncertainty), and `bootstrap_se` the standard error from resampling the seeds. Seeds tied on
`by` are chosen among at random (by symmetry, exactly the ties' mean of the target and of its
square).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import gammaln

RESAMPLES = 500  # bootstrap resamples of the seeds; fixed RNG seed, so the SEs are reproducible


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


def bootstrap_se(
    by: np.ndarray, target: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
) -> np.ndarray:
    """Standard error of the `expected_chosen` curve, n = 1 .. N: its std (ddof 1) over
    `resamples` resamples of the seeds' rows with replacement."""
    by, target = np.asarray(by, dtype=float), np.asarray(target, dtype=float)
    count = len(by)
    rows = np.random.default_rng(seed).integers(0, count, size=(resamples, count))
    order = np.argsort(by[rows], axis=1, kind="stable")
    ranked_by = np.take_along_axis(by[rows], order, axis=1)
    ranked = np.take_along_axis(target[rows], order, axis=1)
    # the mean of each run of equal `by` within a resample (ties chosen among at random)
    group = np.cumsum(np.diff(ranked_by, axis=1, prepend=np.nan) != 0, axis=1) - 1
    flat = (group + count * np.arange(resamples)[:, None]).ravel()
    sums = np.bincount(flat, ranked.ravel(), minlength=resamples * count)
    sizes = np.bincount(flat, minlength=resamples * count)
    tied = (sums[flat] / sizes[flat]).reshape(resamples, count)
    curves = tied @ _max_rank_weights(count).T
    return curves.std(axis=0, ddof=1)


def best_of_n_table(
    table: pd.DataFrame, by: str, columns: list[str], resamples: int = RESAMPLES
) -> pd.DataFrame:
    """Long table of curves: per n, the best `by`, and per column the value of the seed chosen
    by `by` beside the column's own best (`curve`: "best" or "chosen by <by>"), with the
    spread across subsets (`subset_std`), the bootstrap SE (`se`), how many seeds share the
    best ranking value of all N (`tied`: the seeds the n = N point averages) and, where their
    values differ, those values (`tied_values`, space-separated)."""
    rows = []
    chosen = f"chosen by {by}"
    for column in [by, *[c for c in columns if c != by]]:
        values = table[column].to_numpy(dtype=float)
        rankers = {"best": values}
        if column != by:
            rankers[chosen] = table[by].to_numpy(dtype=float)
        for name, ranking in rankers.items():
            curve = expected_chosen(ranking, values)
            se = bootstrap_se(ranking, values, resamples)
            top = ranking == ranking.max()
            differ = np.ptp(values[top]) > 0
            shown = " ".join(f"{v:.6g}" for v in values[top]) if differ else ""
            rows += [
                {
                    "column": column,
                    "curve": name,
                    "n": int(n),
                    "mean": m,
                    "subset_std": s,
                    "se": e,
                    "tied": int(top.sum()),
                    "tied_values": shown,
                }
                for n, m, s, e in zip(curve.n, curve.mean, curve.std, se, strict=True)
            ]
    return pd.DataFrame(rows)
