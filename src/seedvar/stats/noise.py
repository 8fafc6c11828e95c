"""Evaluation noise between seeds on a shared set (pure functions, no I/O).

Every seed is scored on the same examples, so a column's spread across seeds is set against
how much the seeds' *differences* would move with another draw of examples. A paired bootstrap
resamples examples (or the clusters they were generated in: HANS's templates) once for all
seeds, within the strata a set was designed in (HANS's subcases, whose sizes every resample
keeps), and takes the variance of each seed's deviation from the seeds' mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

RESAMPLES = 1000
_CHUNK = 100  # resamples drawn at a time (memory: chunk x examples weights)

Statistic = Callable[[np.ndarray], np.ndarray]  # confusion (..., L, L) -> value (...)


@dataclass(frozen=True)
class Scored:
    """The seeds' answers on one set: gold (n) and predicted (seeds x n) labels, each example's
    cluster and stratum (None: itself, one stratum), each seed's label scores (seeds x n x L)."""

    gold: np.ndarray
    predicted: np.ndarray
    n_labels: int
    clusters: np.ndarray | None = None
    strata: np.ndarray | None = None
    scores: np.ndarray | None = None
    units: tuple[str, str] = ("clusters", "strata")  # what the clusters and strata are (plural)

    def subset(self, mask: np.ndarray) -> Scored:
        """The same seeds on the examples of `mask`."""
        return Scored(
            self.gold[mask],
            self.predicted[:, mask],
            self.n_labels,
            None if self.clusters is None else self.clusters[mask],
            None if self.strata is None else self.strata[mask],
            None if self.scores is None else self.scores[:, mask],
            self.units,
        )


@dataclass(frozen=True)
class Noise:
    """A column's evaluation noise: of one seed's value in differences between seeds (paired)
    and each seed's own (single); how it was estimated; the statistic per seed, where known."""

    paired_var: float
    single_var: np.ndarray
    method: str
    values: np.ndarray | None = None


def confusion(gold: np.ndarray, predicted: np.ndarray, n_labels: int) -> np.ndarray:
    """Per seed, the counts of (gold, predicted) pairs: seeds x L x L."""
    codes = np.asarray(gold)[None, :] * n_labels + np.asarray(predicted)
    counts = np.stack([np.bincount(row, minlength=n_labels**2) for row in codes])
    return counts.reshape(len(codes), n_labels, n_labels).astype(float)


def _units(scored: Scored) -> tuple[np.ndarray, list[np.ndarray], int]:
    """Each example's resampling unit (0..U-1), the units of each stratum, and how many strata
    hold a single cluster: there the examples are the units (the cluster is the stratum's own)."""
    n = len(scored.gold)
    strata = np.zeros(n, dtype=int) if scored.strata is None else scored.strata
    _, stratum = np.unique(strata, return_inverse=True)
    raw = np.arange(n)
    single = 0
    if scored.clusters is not None:
        cluster = np.unique(scored.clusters, return_inverse=True)[1]
        per_stratum = pd.Series(cluster).groupby(stratum).nunique().to_numpy()
        several = per_stratum[stratum] > 1
        raw = np.where(several, cluster, n + np.arange(n))  # a single cluster's examples apart
        single = int((per_stratum == 1).sum())
    unit, keys = pd.factorize(stratum * 2 * n + raw)  # units numbered in order of appearance
    stratum_of_unit = keys // (2 * n)
    groups = [np.flatnonzero(stratum_of_unit == s) for s in np.unique(stratum_of_unit)]
    return unit, groups, single


def _weights(groups: list[np.ndarray], n_units: int, size: int, rng) -> np.ndarray:
    """Resample weights of the units (size x U): Rao and Wu's (1988) rescaled bootstrap, each
    stratum of m units drawn m - 1 times with replacement and weighted m / (m - 1), which keeps
    the variance of a stratum's mean unbiased however few its units (HANS: 2 templates)."""
    weights = np.zeros((size, n_units))
    for members in groups:
        m = len(members)
        if m == 1:
            weights[:, members] = 1.0
            continue
        drawn = rng.integers(0, m, (size, m - 1)) + np.arange(size)[:, None] * m
        counts = np.bincount(drawn.ravel(), minlength=size * m).reshape(size, m)
        weights[:, members] = counts * (m / (m - 1))
    return weights


def resample_weights(scored: Scored, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """Weights of the examples (resamples x n) over `scored`'s units, as the paired noise draws."""
    unit, groups, _ = _units(scored)
    rng = np.random.default_rng(seed)
    return _weights(groups, int(unit.max()) + 1, resamples, rng)[:, unit]


def paired_noise(
    scored: Scored, statistic: Statistic, resamples: int = RESAMPLES, seed: int = 0
) -> Noise:
    """The statistic per seed and its paired-bootstrap evaluation noise (module docstring)."""
    n_labels = scored.n_labels
    values = statistic(confusion(scored.gold, scored.predicted, n_labels))  # seeds x L x L
    k, cells = len(values), n_labels * n_labels
    unit, _, _ = _units(scored)
    codes = np.arange(k)[:, None] * cells + scored.gold * n_labels + scored.predicted  # seeds x n
    counts = np.bincount((unit * k * cells + codes).ravel(), minlength=(unit.max() + 1) * k * cells)
    per_unit = counts.reshape(-1, k * cells).astype(float)  # per unit, seed and (gold, predicted)

    def draw(weights: np.ndarray) -> np.ndarray:
        return statistic((weights @ per_unit).reshape(-1, k, n_labels, n_labels))

    return _paired(values, scored, draw, resamples, seed, "")


def weighted_auc(score: np.ndarray, positive: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of `weights` (resamples x n): the weighted probability that a positive example's
    score exceeds a negative one's (ties half); no threshold moves it."""
    negative = ~positive
    order = np.argsort(score[negative], kind="stable")
    sorted_negative = score[negative][order]
    below = np.cumsum(weights[:, negative][:, order], axis=1)
    below = np.concatenate([np.zeros((len(weights), 1)), below], axis=1)
    left = np.searchsorted(sorted_negative, score[positive], "left")
    right = np.searchsorted(sorted_negative, score[positive], "right")
    beaten = below[:, left] + 0.5 * (below[:, right] - below[:, left])
    on_positive = weights[:, positive]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (on_positive * beaten).sum(axis=1) / (on_positive.sum(axis=1) * below[:, -1])


def label_auc(scores: np.ndarray, gold: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """One seed's AUC (scores: n x labels) per row of `weights`: of the first label's score with
    two gold labels, else the mean one-vs-rest AUC of each label's score (chance 0.5)."""
    labels = np.unique(gold)
    if len(labels) < 2:
        raise ValueError("an AUC needs examples of at least two gold labels")
    chosen = labels[:1] if len(labels) == 2 else labels
    return np.mean([weighted_auc(scores[:, x], gold == x, weights) for x in chosen], axis=0)


def paired_auc_noise(scored: Scored, resamples: int = RESAMPLES, seed: int = 0) -> Noise:
    """Each seed's `label_auc` and its paired-bootstrap evaluation noise (as `paired_noise`)."""
    scores = scored.scores
    if scores is None:
        raise ValueError("an AUC needs the seeds' scores")
    unit, _, _ = _units(scored)

    def draw(weights: np.ndarray) -> np.ndarray:
        return np.stack([label_auc(s, scored.gold, weights[:, unit]) for s in scores], 1)

    values = draw(np.ones((1, unit.max() + 1)))[0]  # every unit once: the set itself
    return _paired(values, scored, draw, resamples, seed, "AUC, ")


def _paired(
    values: np.ndarray, scored: Scored, draw: Statistic, resamples: int, seed: int, what: str
) -> Noise:
    """The paired and single noise of `draw` (unit weights -> per seed) over resampled units."""
    unit, groups, single = _units(scored)
    rng = np.random.default_rng(seed)
    sizes = [min(_CHUNK, resamples - start) for start in range(0, resamples, _CHUNK)]
    stats = np.concatenate([draw(_weights(groups, int(unit.max()) + 1, n, rng)) for n in sizes])
    k = stats.shape[1]
    single_var = stats.var(axis=0, ddof=1)
    if k < 2:
        return Noise(float(single_var.mean()), single_var, f"{what}bootstrap (one seed)", values)
    relative = stats - stats[:, :1]  # exactly 0 for seeds identical to the first
    deviations = relative - relative.mean(axis=1, keepdims=True)
    paired = float(deviations.var(axis=0, ddof=1).mean() * k / (k - 1))
    return Noise(
        paired, single_var, f"{what}paired bootstrap over {unit_of(scored, single)}", values
    )


def unit_of(scored: Scored, single: int = 0) -> str:
    """What the paired bootstrap resampled, in words of the set's declaration."""
    if scored.clusters is None:
        unit = "examples"
    else:
        unit = scored.units[0]
        if single:
            strata = scored.units[1] if single > 1 else scored.units[1].removesuffix("s")
            unit += f" (examples in the {single} {strata} of one {scored.units[0][:-1]})"
    return unit if scored.strata is None else f"{unit} within {scored.units[1]}"


def binomial_noise(values: np.ndarray, n_examples: int) -> Noise:
    """Accuracies of seeds on independent examples, where only their rates are known (a
    published table): p(1-p)/n for both, which overstates the paired noise of a shared set."""
    single = values * (1 - values) / n_examples
    return Noise(float(single.mean()), single, "binomial (rates only)", values)
