"""The study's verdict as a statistical decision (pure functions, no I/O).

Does a seeds table show what McCoy, Min & Linzen (2020) found: seeds that score alike on the
task's in-distribution sets but differ widely on the diagnostic sets? Per column the across-seed
variance is split into evaluation-sampling noise and seed variance; the decision compares the
seed standard deviation of the diagnostic sets' headline columns with that of the
in-distribution headline columns (a `Design`). Correlations across seeds use permutation
p-values. Undefined values are None (with the reason), never NaN or inf. Every decision carries
its reason as data (a rule and its numbers); `reason_text` words it, in one place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

Outcome = Literal["reproduces", "does not reproduce", "inconclusive"]
Answer = Literal["yes", "no", "inconclusive"]
Rule = Literal[
    "one class", "near chance", "passes", "sets too small", "too few seeds", "none passes"
]

ALPHA = 0.05  # family-wise error rate of every test here
LEVEL = 0.95  # confidence level of the reported seed-std intervals
# A headline column must have a seed std at least STD_RATIO times the in-distribution
# headline's, and at least STD_FLOOR in absolute terms (1 accuracy point). The floor is what
# "the in-distribution seed std is ~0" leaves: 3 x the evaluation noise std of MNLI-m at its
# full size (sqrt(.84 * .16 / 9815) = 0.0037), so a diagnostic column must spread more than
# three evaluations of one model would.
STD_RATIO = 3.0
STD_FLOOR = 0.01
CHANCE_BAND = 0.05  # a configuration within 5 points of chance has not learned its task
ONE_CLASS_SHARE = 0.95  # a seed predicting one class this often is degenerate
# Power rule: a study needs enough seeds to detect, with DESIGN_POWER, a headline seed std of
# DESIGN_SEED_STD (5 points; the paper's runs show 2.4 to 12 points on HANS) when the
# in-distribution sets have none.
DESIGN_SEED_STD = 0.05
DESIGN_POWER = 0.8
MAX_SEEDS = 1000  # beyond this many seeds the power rule gives up
_QUADRATURE = 2000  # quantile nodes for the power integral over the reference's variance


@dataclass(frozen=True)
class ColumnVariance:
    """One column's across-seed variance split into evaluation noise and seed variance."""

    column: str
    n_examples: int
    n_seeds: int
    mean: float
    noise_std: float  # the larger of the two below: the noise the seed std is net of
    binomial_noise_std: float  # evaluation noise of one seed if examples were independent
    cluster_noise_std: float | None  # its bootstrap over templates or subcases; None: none
    observed_std: float | None  # across seeds, ddof 1
    seed_std: float | None  # sqrt(max(observed var - noise var, 0))
    seed_std_low: float | None  # LEVEL chi-square interval of the seed std
    seed_std_high: float | None
    note: str | None  # why values are None


@dataclass(frozen=True)
class Design:
    """What a verdict compares: the in-distribution headline columns (`reference`), the
    diagnostic sets' headline columns (`tested`), and chance accuracy of the task."""

    reference: tuple[str, ...]
    tested: tuple[str, ...]
    chance: float

    @property
    def comparisons(self) -> int:
        """The bounds the family-wise alpha is split over (Bonferroni)."""
        return len(self.reference) + len(self.tested)


@dataclass(frozen=True)
class Reason:
    """Why a verdict came out as it did: the rule that decided and its numbers."""

    rule: Rule
    numbers: dict[str, Any]


@dataclass(frozen=True)
class ColumnTest:
    """One headline column in the decision: its one-sided lower bound against the margin."""

    column: str
    seed_std_lower: float
    passes: bool


@dataclass(frozen=True)
class Verdict:
    """Outcome of one study, its reason (rule and numbers) and the numbers behind it."""

    outcome: Outcome
    reason: Reason
    columns: tuple[ColumnVariance, ...]
    tests: tuple[ColumnTest, ...]  # empty with fewer than 2 seeds
    margin: float | None  # seed std a headline column must exceed; None below 2 seeds
    min_seeds: int | None  # None: no number of seeds up to MAX_SEEDS gives the power

    @property
    def text(self) -> str:
        return reason_text(self.outcome, self.reason)


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman correlation across seeds of the primary column with one column."""

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
    """Whether the primary in-distribution accuracy predicts diagnostic accuracy across seeds."""

    answer: Answer
    reason: str
    correlations: tuple[Correlation, ...]


@dataclass(frozen=True)
class SweepVerdict:
    """Outcome over several configurations; those at chance on their task are ignored."""

    outcome: Outcome
    reason: str
    verdicts: dict[str, Verdict]  # configurations that learned the task
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


def column_noise_var(
    values: np.ndarray, n_examples: int, column: str, clustered: Mapping[str, float]
) -> float:
    """The evaluation noise a column's seed std is net of: the larger of the binomial and the
    cluster bootstrap's (`clustered`: per column where the set declares clusters)."""
    return max(_noise_var(values, n_examples), clustered.get(column, 0.0))


def _std_bound(variance: float, dof: int, quantile: float, noise_var: float) -> float:
    """Chi-square confidence bound of the seed std: sqrt(max(var*dof/chi2(q) - noise, 0)).

    A low `quantile` gives an upper bound, a high one a lower bound.
    """
    return math.sqrt(max(variance * dof / stats.chi2.ppf(quantile, dof) - noise_var, 0.0))


def seed_variance(
    table: pd.DataFrame,
    sizes: Mapping[str, int],
    columns: Sequence[str] | None = None,
    clustered: Mapping[str, float] | None = None,
) -> list[ColumnVariance]:
    """Per column: noise std, observed std, seed std and its LEVEL interval.

    `columns` defaults to the columns present in both `table` and `sizes`. The interval is the
    chi-square interval of the observed variance (normal per-seed accuracies) minus the noise
    variance. Chosen over a bootstrap over seeds because it is deterministic and valid from 2
    seeds on, where a percentile bootstrap of a variance undercovers badly (it can never exceed
    the largest resampled spread); its cost is sensitivity to heavy tails. The noise is the
    larger of the binomial p(1-p)/n and, where a set declares clusters (`clustered`: per column,
    a noise variance), their bootstrap's. Seeds evaluated on one shared set disagree on fewer
    examples than independent samples would, so either can overstate the noise: the seed std is
    then biased low (conservative).
    """
    clustered = clustered or {}
    if columns is None:
        columns = [c for c in sizes if c in table.columns]
    tail = (1 - LEVEL) / 2
    rows = []
    for column in columns:
        values, n_examples = _accuracies(table, column), _size(sizes, column)
        noise_var, k = column_noise_var(values, n_examples, column, clustered), len(values)
        common: dict[str, Any] = {
            "column": column,
            "n_examples": n_examples,
            "n_seeds": k,
            "mean": float(values.mean()),
            "noise_std": math.sqrt(noise_var),
            "binomial_noise_std": math.sqrt(_noise_var(values, n_examples)),
            "cluster_noise_std": (math.sqrt(clustered[column]) if column in clustered else None),
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
    reference_noise_var: float,
    tested_noise_var: float,
    comparisons: int,
    seed_std: float = DESIGN_SEED_STD,
    alpha: float = ALPHA,
) -> float:
    """Power of `verdict`'s test to pass one headline column whose true seed std is
    `seed_std` when the in-distribution reference's seed std is 0 (its spread is evaluation
    noise only), the alpha split over `comparisons` bounds.

    Exact under normality: the two sample variances are independent scaled chi-square
    variables; the integral over the reference's (which sets the margin) uses quantile nodes.
    """
    if n_seeds < 2:
        return 0.0
    dof, one_sided = n_seeds - 1, alpha / comparisons
    q_high, q_low = stats.chi2.ppf(1 - one_sided, dof), stats.chi2.ppf(one_sided, dof)
    reference_chi2 = stats.chi2.ppf((np.arange(_QUADRATURE) + 0.5) / _QUADRATURE, dof)
    margin = np.sqrt(reference_noise_var * reference_chi2 / q_low)
    margin = np.maximum(STD_RATIO * margin, STD_FLOOR)
    total_var = seed_std**2 + tested_noise_var
    needed = q_high * (margin**2 + tested_noise_var) / total_var
    return float(np.mean(stats.chi2.sf(needed, dof)))


def minimum_seeds(
    reference_noise_var: float,
    tested_noise_var: float,
    comparisons: int,
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
        power_k = detection_power(
            k, reference_noise_var, tested_noise_var, comparisons, seed_std, alpha
        )
        return power_k >= power

    if not enough(MAX_SEEDS):
        return None
    low, high = 2, MAX_SEEDS  # enough(high) holds; find the smallest such k
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


def _near_chance(mean: float, chance: float) -> bool:
    """Whether a mean in-distribution accuracy is within CHANCE_BAND of chance."""
    return abs(mean - chance) <= CHANCE_BAND


def _one_class(shares: Mapping[str, Sequence[float]], n_seeds: int) -> Reason | None:
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
    numbers = {"seeds": len(degenerate), "of": n_seeds, "share": share, "set": set_name}
    return Reason("one class", numbers | {"seed": seed, "threshold": ONE_CLASS_SHARE})


def verdict(
    table: pd.DataFrame,
    sizes: Mapping[str, int],
    design: Design,
    prediction_shares: Mapping[str, Sequence[float]] | None = None,
    alpha: float = ALPHA,
    clustered: Mapping[str, float] | None = None,
) -> Verdict:
    """Decide whether one study (a seeds table, one row per seed) shows the paper's finding.

    Inconclusive first when the study cannot answer at all: a seed predicts one class on
    >= ONE_CLASS_SHARE of a set (`prediction_shares`: per set, the share of each seed's most
    frequent predicted class, in row order), or a mean in-distribution reference accuracy lies
    within CHANCE_BAND of chance. Then "reproduces" when some tested column's one-sided lower
    bound of its seed std exceeds the margin max(STD_RATIO x the largest upper bound of the
    references' seed std, STD_FLOOR): the test holds its alpha at any number of seeds.
    Otherwise "does not reproduce" only with at least `minimum_seeds` seeds (the power to see an
    effect had there been one); with fewer, inconclusive.

    The bounds are chi-square bounds at alpha / (tested + references) each (Bonferroni), so
    under the null no tested column's true seed std exceeds max(STD_RATIO x the references',
    STD_FLOOR) the test passes with probability at most alpha. The tested lower bounds subtract
    the evaluation noise (binomial, or the cluster bootstrap's where larger: `clustered`); the
    references' upper bounds do not (they bound the total spread, which holds whatever the
    noise), so an overstated noise can only make the test more conservative.
    """
    clustered = clustered or {}

    def noise(column: str, values: np.ndarray) -> float:
        return column_noise_var(values, _size(sizes, column), column, clustered)

    references = {c: _accuracies(table, c) for c in design.reference}
    columns = tuple(seed_variance(table, sizes, clustered=clustered))
    k = len(table)
    tested = {column: _accuracies(table, column) for column in design.tested}
    reference_noise = max(noise(c, v) for c, v in references.items())
    tested_noise = {c: noise(c, v) for c, v in tested.items()}
    min_k = minimum_seeds(
        reference_noise, max(tested_noise.values()), design.comparisons, alpha=alpha
    )

    tests: tuple[ColumnTest, ...] = ()
    margin = None
    if k >= 2:
        one_sided = alpha / design.comparisons
        upper = max(
            _std_bound(float(v.var(ddof=1)), k - 1, one_sided, 0.0) for v in references.values()
        )
        margin = max(STD_RATIO * upper, STD_FLOOR)
        lowers = {
            c: _std_bound(float(v.var(ddof=1)), k - 1, 1 - one_sided, tested_noise[c])
            for c, v in tested.items()
        }
        tests = tuple(ColumnTest(c, low, low > margin) for c, low in lowers.items())

    def decided(outcome: Outcome, rule: Rule, **numbers: Any) -> Verdict:
        return Verdict(outcome, Reason(rule, numbers), columns, tests, margin, min_k)

    one_class = _one_class(prediction_shares or {}, k)
    if one_class is not None:
        return Verdict("inconclusive", one_class, columns, tests, margin, min_k)
    for column, values in references.items():
        if _near_chance(float(values.mean()), design.chance):
            mean, chance = float(values.mean()), design.chance
            return decided("inconclusive", "near chance", column=column, mean=mean, chance=chance)
    passed = [test for test in tests if test.passes]
    reference = " / ".join(design.reference)
    if passed:
        bounds = {t.column: t.seed_std_lower for t in passed}
        return decided(
            "reproduces", "passes", bounds=bounds, margin=margin, reference=reference, alpha=alpha
        )
    if min_k is None:
        return decided("inconclusive", "sets too small", seed_std=DESIGN_SEED_STD)
    if k < min_k or margin is None:  # min_k >= 2, so margin is set past this point
        return decided("inconclusive", "too few seeds", seeds=k, needed=min_k)
    best = max(tests, key=lambda test: test.seed_std_lower)
    largest = {best.column: best.seed_std_lower}
    return decided("does not reproduce", "none passes", margin=margin, largest=largest)


def reason_text(outcome: str, reason: Reason) -> str:
    """A verdict's reason in one sentence: the only place its wording lives."""
    n = reason.numbers
    if reason.rule == "one class":
        return (
            f"inconclusive: {n['seeds']} of {n['of']} seeds predict one class on at least "
            f"{n['threshold']:.0%} of a set (seed {n['seed']} on {n['set']}: {n['share']:.1%})"
        )
    if reason.rule == "near chance":
        return (
            f"inconclusive: mean {n['column']} {n['mean']:.3f} is within "
            f"{CHANCE_BAND * 100:.0f} points of chance ({n['chance']:.3f})"
        )
    if reason.rule == "passes":
        bounds = ", ".join(f"{column} {low:.3f}" for column, low in n["bounds"].items())
        return (
            f"reproduces: the seed-std lower bound of {bounds} exceeds the margin "
            f"{n['margin']:.3f} ({STD_RATIO:g} x {n['reference']}'s seed-std upper bound, at "
            f"least {STD_FLOOR}) at family-wise alpha {n['alpha']}"
        )
    if reason.rule == "sets too small":
        return (
            f"inconclusive: no column passes, and the evaluation sets are too small to say it "
            f"does not: their noise alone keeps the test from detecting a headline seed std of "
            f"{n['seed_std']} with {DESIGN_POWER:.0%} power with up to {MAX_SEEDS} seeds"
        )
    if reason.rule == "too few seeds":
        return (
            f"inconclusive: no column passes, and {n['seeds']} seeds are too few to say it "
            f"does not: detecting a headline seed std of {DESIGN_SEED_STD} with "
            f"{DESIGN_POWER:.0%} power needs at least {n['needed']} seeds"
        )
    ((column, low),) = n["largest"].items()
    return (
        f"{outcome}: no headline column's seed-std lower bound exceeds the margin "
        f"{n['margin']:.3f} (largest: {column} {low:.3f})"
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
    base: str,
    columns: Sequence[str],
    n_resamples: int = 9999,
    seed: int = 0,
) -> list[Correlation]:
    """Pearson and Spearman correlation across seeds of the `base` column with each column.

    p-values are two-sided permutation p-values over pairings: exact (all n! pairings) when
    n <= 8, else `n_resamples` fixed-seed Monte Carlo pairings. Spearman is Pearson on average
    ranks.
    """
    x = _accuracies(table, base)
    n = len(x)
    rows = []
    for column in columns:
        y = _accuracies(table, column)
        note = None
        if n < 3:
            note = f"{n} seeds: a correlation needs at least 3"
        elif np.ptp(x) == 0:
            note = f"{base} is constant across seeds"
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


def predicts(
    table: pd.DataFrame,
    base: str,
    columns: Sequence[str],
    alpha: float = ALPHA,
    n_resamples: int = 9999,
    seed: int = 0,
) -> Prediction:
    """Whether the `base` column (in-distribution accuracy) predicts the diagnostic `columns`
    across seeds.

    "yes" when some Pearson or Spearman permutation p-value is below alpha / (2 x the defined
    columns) (Bonferroni); "inconclusive" when no correlation is defined or even a perfect one
    could not reach that threshold with this many seeds; "no" otherwise.
    """
    correlations = tuple(correlate(table, base, columns, n_resamples, seed))
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
            f"yes: across {n} seeds {base} correlates with {best.column} ({name} = "
            f"{value:.3f}, permutation p = {p:.3g} < Bonferroni threshold {threshold:.3g})",
            correlations,
        )
    return Prediction(
        "no",
        f"no: across {n} seeds no correlation of {base} with {len(defined)} diagnostic "
        f"columns is significant (smallest p = {p:.3g} for {best.column}, Bonferroni threshold "
        f"{threshold:.3g})",
        correlations,
    )


def sweep_verdict(
    configurations: Mapping[str, pd.DataFrame],
    sizes: Mapping[str, int],
    design: Design,
    prediction_shares: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    alpha: float = ALPHA,
) -> SweepVerdict:
    """Apply `verdict` per configuration, ignoring those whose mean in-distribution reference
    accuracy is near chance (they did not learn the task).

    "reproduces" when every configuration with a conclusive verdict reproduces, "does not
    reproduce" when none does, "inconclusive" when none learned the task, none is conclusive, or the
    conclusive ones disagree. Each configuration is tested at `alpha`; "all reproduce" needs no
    correction (every one must pass on its own).
    """
    if not configurations:
        raise ValueError("a sweep needs at least one configuration")
    shares = prediction_shares or {}
    ignored = tuple(
        name
        for name, table in configurations.items()
        if any(
            _near_chance(float(_accuracies(table, c).mean()), design.chance)
            for c in design.reference
        )
    )
    verdicts = {
        name: verdict(table, sizes, design, shares.get(name), alpha)
        for name, table in configurations.items()
        if name not in ignored
    }
    learned, chance = len(verdicts), f"({len(ignored)} ignored at chance)"
    if not verdicts:
        return SweepVerdict(
            "inconclusive",
            f"inconclusive: no configuration learned the task (all {len(ignored)} within "
            f"{CHANCE_BAND * 100:.0f} points of chance)",
            verdicts,
            ignored,
        )
    conclusive = {n: v for n, v in verdicts.items() if v.outcome != "inconclusive"}
    reproducing = [n for n, v in conclusive.items() if v.outcome == "reproduces"]
    scope = (
        f"{learned} configurations that learned the task"
        if len(conclusive) == learned
        else f"{len(conclusive)} conclusive configurations of the {learned} that learned the task"
    )
    if not conclusive:
        outcome: Outcome = "inconclusive"
        reason = f"inconclusive: none of the {learned} configurations that learned the task gave a "
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
