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

    def subset(self, mask: np.ndarray) -> Scored:
        """The same seeds on the examples of `mask`."""
        return Scored(
            self.gold[mask],
            self.predicted[:, mask],
            self.n_labels,
            None if self.clusters is None else self.clusters[mask],
            None if self.strata is None else self.strata[mask],
            None if self.scores is None else self.scores[:, mask],
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


def _units(scored: Scored) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each example's resampling unit (0..U-1), and the units of each stratum."""
    n = len(scored.gold)
    clusters = np.arange(n) if scored.clusters is None else scored.clusters
    raw = np.unique(clusters, return_inverse=True)[1]
    strata = np.zeros(n, dtype=int) if scored.strata is None else scored.strata
    _, stratum = np.unique(strata, return_inverse=True)
    unit, keys = pd.factorize(stratum * n + raw)  # units numbered in order of appearance
    stratum_of_unit = keys // n
    groups = [np.flatnonzero(stratum_of_unit == s) for s in np.unique(stratum_of_unit)]
    return unit, groups


def _weights(groups: list[np.ndarray], n_units: int, size: int, rng) -> np.ndarray:
    """Resample weights of the units (size x U), each stratum's drawn with replacement."""
    weights = np.zeros((size, n_units))
    for members in groups:
        m = len(members)
        drawn = rng.integers(0, m, (size, m)) + np.arange(size)[:, None] * m
        weights[:, members] = np.bincount(drawn.ravel(), minlength=size * m).reshape(size, m)
    return weights


def paired_noise(
    scored: Scored, statistic: Statistic, resamples: int = RESAMPLES, seed: int = 0
) -> Noise:
    """The statistic per seed and its paired-bootstrap evaluation noise (module docstring)."""
    n_labels = scored.n_labels
    values = statistic(confusion(scored.gold, scored.predicted, n_labels))  # seeds x L x L
    k, cells = len(values), n_labels * n_labels
    unit, _ = _units(scored)
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
    unit, _ = _units(scored)

    def draw(weights: np.ndarray) -> np.ndarray:
        return np.stack([label_auc(s, scored.gold, weights[:, unit]) for s in scores], 1)

    values = draw(np.ones((1, unit.max() + 1)))[0]  # every unit once: the set itself
    return _paired(values, scored, draw, resamples, seed, "AUC, ")


def _paired(
    values: np.ndarray, scored: Scored, draw: Statistic, resamples: int, seed: int, what: str
) -> Noise:
    """The paired and single noise of `draw` (unit weights -> per seed) over resampled units."""
    unit, groups = _units(scored)
    rng = np.random.default_rng(seed)
    sizes = [min(_CHUNK, resamples - start) for start in range(0, resamples, _CHUNK)]
    stats = np.concatenate([draw(_weights(groups, int(unit.max()) + 1, n, rng)) for n in sizes])
    k = stats.shape[1]
    single = stats.var(axis=0, ddof=1)
    if k < 2:
        return Noise(float(single.mean()), single, f"{what}bootstrap (one seed)", values)
    deviations = stats - stats.mean(axis=1, keepdims=True)
    paired = float(deviations.var(axis=0, ddof=1).mean() * k / (k - 1))
    unit_name = "examples" if scored.clusters is None else "clusters"
    design = "" if scored.strata is None else ", within strata"
    return Noise(paired, single, f"{what}paired bootstrap over {unit_name}{design}", values)


def binomial_noise(values: np.ndarray, n_examples: int) -> Noise:
    """Accuracies of seeds on independent examples, where only their rates are known (a
    published table): p(1-p)/n for both, which overstates the paired noise of a shared set."""
    single = values * (1 - values) / n_examples
    return Noise(float(single.mean()), single, "binomial (rates only)", values)
