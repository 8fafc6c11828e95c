"""The study's verdict as a statistical decision (pure functions, no I/O).

Does a seeds table reproduce McCoy, Min & Linzen (2020): seeds that score alike on MNLI-m but
differ widely on HANS? Per column the across-seed variance is split into evaluation-sampling
noise and seed variance; the decision compares the HANS non-entailed columns' seed standard
deviation with MNLI-m's. Correlations across seeds use permutation p-values. Undefined values are
None (with the reason), never NaN or inf.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from seedvar.metrics import (
    HANS_COLUMNS,
    HANS_OVERALL,
    HEURISTIC_COLUMNS,
    MNLI_MATCHED,
    NON_ENTAILED_COLUMNS,
    SUBCASES,
)

Outcome = Literal["reproduces", "does not reproduce", "inconclusive"]
Answer = Literal["yes", "no", "inconclusive"]

PAPER_SIZES: Mapping[str, int] = {
    MNLI_MATCHED: 9815,
    **dict.fromkeys(HEURISTIC_COLUMNS, 5000),
    HANS_OVERALL: 30000,
    **dict.fromkeys(SUBCASES, 1000),
}  # examples per column in the full evaluation sets

ALPHA = 0.05  # family-wise error rate of every test here
LEVEL = 0.95  # confidence level of the reported seed-std intervals
# A non-entailed column must have a seed std at least STD_RATIO times MNLI-m's, and at least
# STD_FLOOR in absolute terms (1 accuracy point). The floor is what "MNLI-m's seed std is ~0"
# leaves: 3 x the evaluation noise std of MNLI-m at its full size (sqrt(.84 * .16 / 9815) =
# 0.0037), so a HANS column must spread more than three MNLI-m evaluations of one model would.
STD_RATIO = 3.0
STD_FLOOR = 0.01
CHANCE = 1 / 3  # MNLI is 3-way
CHANCE_BAND = 0.05  # a configuration within 5 points of chance has not learned MNLI
ONE_CLASS_SHARE = 0.95  # a seed predicting one class this often is degenerate
# Power rule: a study needs enough seeds to detect, with DESIGN_POWER, a non-entailed seed std
# of DESIGN_SEED_STD (5 points; the paper's runs show 2.4 to 12 points) when MNLI-m has none.
DESIGN_SEED_STD = 0.05
DESIGN_POWER = 0.8
MAX_SEEDS = 1000  # beyond this many seeds the power rule gives up
_QUADRATURE = 2000  # quantile nodes for the power integral over MNLI-m's sample variance


@dataclass(frozen=True)
class ColumnVariance:
    """One column's across-seed variance split into evaluation noise and seed variance."""

    column: str
    n_examples: int
    n_seeds: int
    mean: float
    noise_std: float  # binomial evaluation noise of one seed: sqrt(mean of p(1-p)/n)
    observed_std: float | None  # across seeds, ddof 1
    seed_std: float | None  # sqrt(max(observed var - noise var, 0))
    seed_std_low: float | None  # LEVEL chi-square interval of the seed std
    seed_std_high: float | None
    note: str | None  # why values are None


@dataclass(frozen=True)
class ColumnTest:
    """One non-entailed column in the decision: its one-sided lower bound against the margin."""

    column: str
    seed_std_lower: float
    passes: bool


@dataclass(frozen=True)
class Verdict:
    """Outcome of one study, with a one-sentence reason and the numbers behind it."""

    outcome: Outcome
    reason: str
    columns: tuple[ColumnVariance, ...]
    tests: tuple[ColumnTest, ...]  # empty with fewer than 2 seeds
    margin: float | None  # seed std a non-entailed column must exceed; None below 2 seeds
    min_seeds: int | None  # None: no number of seeds up to MAX_SEEDS gives the power


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman correlation across seeds of MNLI-m with one column."""

    column: str
    n_seeds: int
    pearson_r: float | None
    pearson_p: float | None
    spearman_rho: float | None
    spearman_p: float | None
    exact: bool  # all n! pairings enumerated (else a fixed-seed Monte Carlo permutation test)
    note: str | None  # why values are None


@dataclass(frozen=True)
class Prediction:
    """Whether MNLI-m accuracy predicts HANS accuracy across seeds."""

    answer: Answer
    reason: str
    correlations: tuple[Correlation, ...]


@dataclass(frozen=True)
class SweepVerdict:
    """Outcome over several configurations; those at MNLI chance level are ignored."""

    outcome: Outcome
    reason: str
    verdicts: dict[str, Verdict]  # configurations that learned MNLI
    ignored: tuple[str, ...]  # configurations within CHANCE_BAND of chance


def _accuracies(table: pd.DataFrame, column: str) -> np.ndarray:
    """A column's per-seed accuracies, checked to be present, finite and within [0, 1]."""
    if column not in table.columns:
        raise KeyError(f"the seeds table has no column {column!r}")
    values = table[column].to_numpy(dtype=float)
    if len(values) == 0:
        raise ValueError("the seeds table has no rows")
    if not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1:
        raise ValueError(f"column {column!r} must hold accuracies in [0, 1]")
    return values


def _size(sizes: Mapping[str, int], column: str) -> int:
    """The evaluation-set size of a column, checked to be positive."""
    if column not in sizes:
        raise KeyError(f"no evaluation-set size for column {column!r}")
    if sizes[column] < 1:
        raise ValueError(f"evaluation-set size of {column!r} must be positive")
    return int(sizes[column])


def _noise_var(values: np.ndarray, n_examples: int) -> float:
    """Binomial evaluation noise variance of one seed's accuracy: mean over seeds of p(1-p)/n."""
    return float(np.mean(values * (1 - values) / n_examples))


def _std_bound(variance: float, dof: int, quantile: float, noise_var: float) -> float:
    """Chi-square confidence bound of the seed std: sqrt(max(var*dof/chi2(q) - noise, 0)).

    A low `quantile` gives an upper bound, a high one a lower bound.
    """
    return math.sqrt(max(variance * dof / stats.chi2.ppf(quantile, dof) - noise_var, 0.0))


def seed_variance(
    table: pd.DataFrame,
    sizes: Mapping[str, int] = PAPER_SIZES,
    columns: Sequence[str] | None = None,
) -> list[ColumnVariance]:
    """Per column: binomial noise std, observed std, seed std and its LEVEL interval.

    `columns` defaults to the paper's columns present in `table` and in `sizes`. The interval is the
    chi-square interval of the observed variance (normal per-seed accuracies) minus the noise
    variance. Chosen over a bootstrap over seeds because it is deterministic and valid from 2
    seeds on, where a percentile bootstrap of a variance undercovers badly (it can never exceed
    the largest resampled spread); its cost is sensitivity to heavy tails. Seeds evaluated on one
    shared set disagree on fewer examples than independent samples would, so p(1-p)/n can
    overstate the noise: the seed std is then biased low (conservative).
    """
    if columns is None:
        columns = [c for c in (MNLI_MATCHED, *HANS_COLUMNS) if c in table.columns and c in sizes]
    tail = (1 - LEVEL) / 2
    rows = []
    for column in columns:
        values, n_examples = _accuracies(table, column), _size(sizes, column)
        noise_var, k = _noise_var(values, n_examples), len(values)
        common: dict[str, Any] = {
            "column": column,
            "n_examples": n_examples,
            "n_seeds": k,
            "mean": float(values.mean()),
            "noise_std": math.sqrt(noise_var),
        }
        if k < 2:
            rows.append(
                ColumnVariance(
                    **common,
                    observed_std=None,
                    seed_std=None,
                    seed_std_low=None,
                    seed_std_high=None,
                    note="one seed: no across-seed variance",
                )
            )
            continue
        variance = float(values.var(ddof=1))
        rows.append(
            ColumnVariance(
                **common,
                observed_std=math.sqrt(variance),
                seed_std=math.sqrt(max(variance - noise_var, 0.0)),
                seed_std_low=_std_bound(variance, k - 1, 1 - tail, noise_var),
                seed_std_high=_std_bound(variance, k - 1, tail, noise_var),
                note=None,
            )
        )
    return rows


def detection_power(
    n_seeds: int,
    mnli_noise_var: float,
    hans_noise_var: float,
    seed_std: float = DESIGN_SEED_STD,
    alpha: float = ALPHA,
) -> float:
    """Power of `verdict`'s test to pass one non-entailed column whose true seed std is
    `seed_std` when MNLI-m's seed std is 0 (its spread is evaluation noise only).

    Exact under normality: the HANS and MNLI-m sample variances are independent scaled
    chi-square variables; the integral over MNLI-m's (which sets the margin) uses quantile nodes.
    """
    if n_seeds < 2:
        return 0.0
    dof, one_sided = n_seeds - 1, alpha / (len(NON_ENTAILED_COLUMNS) + 1)
    q_high, q_low = stats.chi2.ppf(1 - one_sided, dof), stats.chi2.ppf(one_sided, dof)
    mnli_chi2 = stats.chi2.ppf((np.arange(_QUADRATURE) + 0.5) / _QUADRATURE, dof)
    margin = np.maximum(STD_RATIO * np.sqrt(mnli_noise_var * mnli_chi2 / q_low), STD_FLOOR)
    total_var = seed_std**2 + hans_noise_var
    needed = q_high * (margin**2 + hans_noise_var) / total_var
    return float(np.mean(stats.chi2.sf(needed, dof)))


def minimum_seeds(
    mnli_noise_var: float,
    hans_noise_var: float,
    seed_std: float = DESIGN_SEED_STD,
    power: float = DESIGN_POWER,
    alpha: float = ALPHA,
) -> int | None:
    """Smallest number of seeds at which `detection_power` reaches `power`, or None when even
    MAX_SEEDS do not (evaluation sets so small that their noise alone sets a margin above
    `seed_std`). Power grows with the number of seeds: a bisection finds the smallest."""
    if seed_std <= STD_FLOOR:
        raise ValueError(f"a design seed std of {seed_std} cannot exceed the floor {STD_FLOOR}")

    def enough(k: int) -> bool:
        return detection_power(k, mnli_noise_var, hans_noise_var, seed_std, alpha) >= power

    if not enough(MAX_SEEDS):
        return None
    low, high = 2, MAX_SEEDS  # enough(high) holds; find the smallest such k
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


def _near_chance(mnli_mean: float) -> bool:
    """Whether a mean MNLI-m accuracy is within CHANCE_BAND of chance."""
    return abs(mnli_mean - CHANCE) <= CHANCE_BAND


def _one_class_reason(shares: Mapping[str, Sequence[float]], n_seeds: int) -> str | None:
    """Why the study is inconclusive because seeds predict one class, or None if none does."""
    peaks: list[tuple[float, str, int]] = []  # per set: the largest share, the set, its seed
    degenerate: set[int] = set()
    for set_name, per_seed in shares.items():
        values = np.asarray(per_seed, dtype=float)
        if len(values) != n_seeds:
            raise ValueError(f"{set_name!r} has {len(values)} shares for {n_seeds} seeds")
        degenerate.update(np.flatnonzero(values >= ONE_CLASS_SHARE).tolist())
        seed = int(np.argmax(values))
        peaks.append((float(values[seed]), set_name, seed))
    if not degenerate:
        return None
    share, set_name, seed = max(peaks)
    return (
        f"inconclusive: {len(degenerate)} of {n_seeds} seeds predict one class on at least "
        f"{ONE_CLASS_SHARE:.0%} of a set (seed {seed} on {set_name}: {share:.1%})"
    )


def verdict(
    table: pd.DataFrame,
    sizes: Mapping[str, int] = PAPER_SIZES,
    prediction_shares: Mapping[str, Sequence[float]] | None = None,
    alpha: float = ALPHA,
) -> Verdict:
    """Decide whether one study (a seeds table, one row per seed) reproduces the paper.

    Inconclusive first when the study cannot answer at all: a seed predicts one class on
    >= ONE_CLASS_SHARE of a set (`prediction_shares`: per set, the share of each seed's most
    frequent predicted class, in row order), or mean MNLI-m accuracy lies within CHANCE_BAND of
    chance. Then "reproduces" when some non-entailed column's one-sided lower bound of its seed
    std exceeds the margin max(STD_RATIO x upper bound of MNLI-m's seed std, STD_FLOOR): the
    test holds its alpha at any number of seeds. Otherwise "does not reproduce" only with at
    least `minimum_seeds` seeds (the power to see an effect had there been one); with fewer,
    inconclusive.

    The bounds are chi-square bounds at alpha / 4 each (Bonferroni over the 3 non-entailed lower
    bounds and MNLI-m's upper bound), so under the null no column's true seed std exceeds
    max(STD_RATIO x MNLI-m's, STD_FLOOR) the test passes with probability at most alpha. The
    HANS lower bounds subtract the binomial noise; MNLI-m's upper bound does not (it bounds the
    total spread, which holds whatever the noise), so an overstated noise can only make the test
    more conservative.
    """
    mnli = _accuracies(table, MNLI_MATCHED)
    columns = tuple(seed_variance(table, sizes))
    k, mnli_mean = len(mnli), float(mnli.mean())
    hans = {column: _accuracies(table, column) for column in NON_ENTAILED_COLUMNS}
    mnli_noise = _noise_var(mnli, _size(sizes, MNLI_MATCHED))
    hans_noise = {c: _noise_var(v, _size(sizes, c)) for c, v in hans.items()}
    min_k = minimum_seeds(mnli_noise, max(hans_noise.values()), alpha=alpha)

    tests: tuple[ColumnTest, ...] = ()
    margin = None
    if k >= 2:
        one_sided = alpha / (len(NON_ENTAILED_COLUMNS) + 1)
        mnli_upper = _std_bound(float(mnli.var(ddof=1)), k - 1, one_sided, 0.0)
        margin = max(STD_RATIO * mnli_upper, STD_FLOOR)
        lowers = {
            c: _std_bound(float(v.var(ddof=1)), k - 1, 1 - one_sided, hans_noise[c])
            for c, v in hans.items()
        }
        tests = tuple(ColumnTest(c, low, low > margin) for c, low in lowers.items())

    def decided(outcome: Outcome, reason: str) -> Verdict:
        return Verdict(outcome, reason, columns, tests, margin, min_k)

    one_class = _one_class_reason(prediction_shares or {}, k)
    if one_class is not None:
        return decided("inconclusive", one_class)
    if _near_chance(mnli_mean):
        return decided(
            "inconclusive",
            f"inconclusive: mean MNLI-m accuracy {mnli_mean:.3f} is within "
            f"{CHANCE_BAND * 100:.0f} points of chance (1/3)",
        )
    passed = [test for test in tests if test.passes]
    if passed:
        bounds = ", ".join(f"{t.column} {t.seed_std_lower:.3f}" for t in passed)
        return decided(
            "reproduces",
            f"reproduces: the seed-std lower bound of {bounds} exceeds the margin {margin:.3f} "
            f"({STD_RATIO:g} x MNLI-m's seed-std upper bound, at least {STD_FLOOR}) "
            f"at family-wise alpha {alpha}",
        )
    if min_k is None:
        return decided(
            "inconclusive",
            f"inconclusive: no column passes, and the evaluation sets are too small to say it "
            f"does not: their noise alone keeps the test from detecting a non-entailed seed std "
            f"of {DESIGN_SEED_STD} with {DESIGN_POWER:.0%} power with up to {MAX_SEEDS} seeds",
        )
    if k < min_k or margin is None:  # min_k >= 2, so margin is set past this point
        return decided(
            "inconclusive",
            f"inconclusive: no column passes, and {k} seeds are too few to say it does not: "
            f"detecting a non-entailed seed std of {DESIGN_SEED_STD} with {DESIGN_POWER:.0%} "
            f"power needs at least {min_k} seeds",
        )
    best = max(tests, key=lambda test: test.seed_std_lower)
    return decided(
        "does not reproduce",
        f"does not reproduce: no non-entailed column's seed-std lower bound exceeds the margin "
        f"{margin:.3f} (largest: {best.column} {best.seed_std_lower:.3f})",
    )


def _pearson(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Pearson correlation along `axis`, vectorised over the leading axes of x."""
    x_centred = x - x.mean(axis=axis, keepdims=True)
    y_centred = y - y.mean()
    numerator = (x_centred * y_centred).sum(axis=axis)
    return numerator / np.sqrt((x_centred**2).sum(axis=axis) * (y_centred**2).sum())


def _permutation_p(x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int) -> float:
    """Two-sided permutation p-value of Pearson(x, y) over pairings: all n! when n <= 8."""
    n = len(x)
    result = stats.permutation_test(
        (x,),
        lambda permuted, axis: _pearson(permuted, y, axis),
        permutation_type="pairings",
        vectorized=True,
        n_resamples=math.factorial(n) if n <= 8 else n_resamples,
        rng=np.random.default_rng(seed),
    )
    return float(min(result.pvalue, 1.0))


def correlate(
    table: pd.DataFrame,
    columns: Sequence[str] | None = None,
    n_resamples: int = 9999,
    seed: int = 0,
) -> list[Correlation]:
    """Pearson and Spearman correlation across seeds of MNLI-m accuracy with each column.

    p-values are two-sided permutation p-values over pairings: exact (all n! pairings) when
    n <= 8, else `n_resamples` fixed-seed Monte Carlo pairings. `columns` defaults to the HANS
    columns present in `table`. Spearman is Pearson on average ranks.
    """
    if columns is None:
        columns = [c for c in HANS_COLUMNS if c in table.columns]
    x = _accuracies(table, MNLI_MATCHED)
    n = len(x)
    rows = []
    for column in columns:
        y = _accuracies(table, column)
        note = None
        if n < 3:
            note = f"{n} seeds: a correlation needs at least 3"
        elif np.ptp(x) == 0:
            note = f"{MNLI_MATCHED} is constant across seeds"
        elif np.ptp(y) == 0:
            note = f"{column} is constant across seeds"
        if note is not None:
            rows.append(Correlation(column, n, None, None, None, None, n <= 8, note))
            continue
        x_rank, y_rank = stats.rankdata(x), stats.rankdata(y)
        rows.append(
            Correlation(
                column=column,
                n_seeds=n,
                pearson_r=float(np.clip(_pearson(x, y), -1, 1)),
                pearson_p=_permutation_p(x, y, n_resamples, seed),
                spearman_rho=float(np.clip(_pearson(x_rank, y_rank), -1, 1)),
                spearman_p=_permutation_p(x_rank, y_rank, n_resamples, seed),
                exact=n <= 8,
                note=None,
            )
        )
    return rows


def _smallest_p(n: int, n_resamples: int) -> float:
    """Smallest two-sided permutation p-value attainable with n seeds."""
    return 2 / math.factorial(n) if n <= 8 else 2 / (n_resamples + 1)


def mnli_predicts_hans(
    table: pd.DataFrame,
    columns: Sequence[str] = (*NON_ENTAILED_COLUMNS, HANS_OVERALL),
    alpha: float = ALPHA,
    n_resamples: int = 9999,
    seed: int = 0,
) -> Prediction:
    """Whether MNLI-m accuracy predicts HANS accuracy across seeds.

    "yes" when some Pearson or Spearman permutation p-value is below alpha / (2 x the defined
    columns) (Bonferroni); "inconclusive" when no correlation is defined or even a perfect one
    could not reach that threshold with this many seeds; "no" otherwise.
    """
    correlations = tuple(correlate(table, columns, n_resamples, seed))
    defined = [c for c in correlations if c.note is None]
    n = len(table)
    if not defined:
        reasons = sorted({c.note for c in correlations if c.note is not None})
        return Prediction(
            "inconclusive",
            f"inconclusive: no correlation is defined ({'; '.join(reasons)})",
            correlations,
        )
    threshold = alpha / (2 * len(defined))
    if 2 / (n_resamples + 1) >= threshold:
        raise ValueError(f"{n_resamples} resamples cannot reach the threshold {threshold:.3g}")
    if _smallest_p(n, n_resamples) >= threshold:
        needed = next(m for m in range(n, 10) if _smallest_p(m, n_resamples) < threshold)
        return Prediction(
            "inconclusive",
            f"inconclusive: with {n} seeds no permutation p-value can fall below the Bonferroni "
            f"threshold {threshold:.3g}; at least {needed} seeds are needed",
            correlations,
        )
    tests = [(c.pearson_p, "Pearson r", c.pearson_r, c) for c in defined]
    tests += [(c.spearman_p, "Spearman rho", c.spearman_rho, c) for c in defined]
    p, name, value, best = min(tests, key=lambda test: (test[0], -abs(test[2] or 0.0)))
    if p is not None and p < threshold:
        return Prediction(
            "yes",
            f"yes: across {n} seeds MNLI-m accuracy correlates with {best.column} ({name} = "
            f"{value:.3f}, permutation p = {p:.3g} < Bonferroni threshold {threshold:.3g})",
            correlations,
        )
    return Prediction(
        "no",
        f"no: across {n} seeds no correlation of MNLI-m accuracy with {len(defined)} HANS "
        f"columns is significant (smallest p = {p:.3g} for {best.column}, Bonferroni threshold "
        f"{threshold:.3g})",
        correlations,
    )


def sweep_verdict(
    configurations: Mapping[str, pd.DataFrame],
    sizes: Mapping[str, int] = PAPER_SIZES,
    prediction_shares: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    alpha: float = ALPHA,
) -> SweepVerdict:
    """Apply `verdict` per configuration, ignoring those whose mean MNLI-m is near chance.

    "reproduces" when every configuration with a conclusive verdict reproduces, "does not
    reproduce" when none does, "inconclusive" when none learned MNLI, none is conclusive, or the
    conclusive ones disagree. Each configuration is tested at `alpha`; "all reproduce" needs no
    correction (every one must pass on its own).
    """
    if not configurations:
        raise ValueError("a sweep needs at least one configuration")
    shares = prediction_shares or {}
    ignored = tuple(
        name
        for name, table in configurations.items()
        if _near_chance(float(_accuracies(table, MNLI_MATCHED).mean()))
    )
    verdicts = {
        name: verdict(table, sizes, shares.get(name), alpha)
        for name, table in configurations.items()
        if name not in ignored
    }
    learned, chance = len(verdicts), f"({len(ignored)} ignored at chance)"
    if not verdicts:
        return SweepVerdict(
            "inconclusive",
            f"inconclusive: no configuration learned MNLI (all {len(ignored)} within "
            f"{CHANCE_BAND * 100:.0f} points of chance)",
            verdicts,
            ignored,
        )
    conclusive = {n: v for n, v in verdicts.items() if v.outcome != "inconclusive"}
    reproducing = [n for n, v in conclusive.items() if v.outcome == "reproduces"]
    scope = (
        f"{learned} configurations that learned MNLI"
        if len(conclusive) == learned
        else f"{len(conclusive)} conclusive configurations of the {learned} that learned MNLI"
    )
    if not conclusive:
        outcome: Outcome = "inconclusive"
        reason = f"inconclusive: none of the {learned} configurations that learned MNLI gave a "
        reason += f"conclusive verdict {chance}"
    elif len(reproducing) == len(conclusive):
        outcome, reason = "reproduces", f"reproduces in all {scope} {chance}"
    elif not reproducing:
        outcome, reason = "does not reproduce", f"does not reproduce in any of the {scope} {chance}"
    else:
        outcome = "inconclusive"
        reason = f"inconclusive: reproduces in {len(reproducing)} of the {scope} "
        reason += f"({', '.join(reproducing)}) but not in the others {chance}"
    return SweepVerdict(outcome, reason, verdicts, ignored)
