"""Expected best-of-n curves (Dodge et al. 2019, "Show your work"), exact over the study's
seeds (pure functions, no I/O): of N seeds, n drawn without replacement, the expected value of
a column for the one with the best `by` column (the model kept by validation), averaged over
all C(N, n) subsets; seeds tied on `by` are chosen among at random (the ties' mean)."""

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
    """Standard error of the `expected_chosen` curve, n = 1 .. N, over resamples of the seeds."""
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


def best_of_n_table(table: pd.DataFrame, by: str, columns: list[str]) -> pd.DataFrame:
    """Per n and column: its own best and the seed chosen by `by` (`curve`), with their SEs."""
    rows = []
    for column in [by, *[c for c in columns if c != by]]:
        values = table[column].to_numpy(dtype=float)
        rankers = {"best": values}
        if column != by:
            rankers[f"chosen by {by}"] = table[by].to_numpy(dtype=float)
        for name, ranking in rankers.items():
            curve = expected_chosen(ranking, values)
            top = ranking == ranking.max()
            shown = " ".join(f"{v:.6g}" for v in values[top]) if np.ptp(values[top]) > 0 else ""
            found = {"column": column, "curve": name, "n": curve.n, "mean": curve.mean}
            found |= {"subset_std": curve.std, "se": bootstrap_se(ranking, values)}
            rows.append(pd.DataFrame(found | {"tied": int(top.sum()), "tied_values": shown}))
    return pd.concat(rows, ignore_index=True)
