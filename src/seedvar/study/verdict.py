"""The study's verdict as a statistical decision (pure functions, no I/O).

Does a seeds table show what McCoy, Min & Linzen (2020) found: seeds that score alike on the
task's in-distribution sets but differ widely on the diagnostic sets, in how they generalize
and not only in how often they answer a label? Per column the across-seed variance is split
into evaluation noise (given: the noise of differences between seeds on a shared set) and seed
variance. A tested diagnostic column passes when its seed std, and that of its bias-free
counterpart (the accuracy with the seeds' answer bias taken out), both exceed a margin set by
the in-distribution columns' spread. Correlations across seeds use permutation p-values.
Undefined values are None (with the reason), never NaN or inf. Every decision carries its
reason as data (a rule and its numbers); `reason_text` words it, in one place.
"""

from __future__ import annotations

import functools
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
    "one class",
    "near chance",
    "passes",
    "label bias",
    "diagnostic at chance",
    "few seeds",
    "sets too small",
    "too few seeds",
    "none passes",
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
ONE_CLASS_SHARE = 0.95  # a seed predicting one class this often is degenerate
BIAS_FREE_CHANCE = 0.5  # bias-free accuracy of answers that carry no information
# Below this many seeds a conclusive outcome rests on the seeds' normality, which a handful of
# seeds cannot check (the paper's own runs are not normal): the verdict says so instead.
NORMAL_SEEDS = 10
# Power rule: a study needs enough seeds to detect, with DESIGN_POWER, a headline seed std of
# DESIGN_SEED_STD (5 points; the paper's runs show 2.4 to 12 points on HANS), given the
# in-distribution reference's own measured seed std.
DESIGN_SEED_STD = 0.05
DESIGN_POWER = 0.8
MAX_SEEDS = 200  # beyond this many seeds the power rule gives up
POWER_DRAWS = 2000  # simulated studies behind each power figure


@dataclass(frozen=True)
class Noise:
    """A column's evaluation noise: `paired_var`, the noise variance of one seed's value in
    differences between seeds on the shared set; `single_var`, each seed's own sampling
    variance (in row order); how it was estimated."""

    paired_var: float
    single_var: tuple[float, ...]
    method: str


@dataclass(frozen=True)
class ColumnVariance:
    """One column's across-seed variance split into evaluation noise and seed variance."""

    column: str
    n_seeds: int
    mean: float
    noise_std: float  # the paired evaluation noise the seed std is net of
    observed_std: float | None  # across seeds, ddof 1
    seed_std: float | None  # sqrt(max(observed var - noise var, 0))
    seed_std_low: float | None  # LEVEL interval of the seed std (chi-square and Bonett)
    seed_std_high: float | None
    noise_fit_p: float | None  # P(a spread this small | no seed variance): small: noise too big
    note: str | None  # why values are None, or why the seed std is 0


@dataclass(frozen=True)
class Design:
    """What a verdict compares: the in-distribution headline columns (`reference`, each with
    the share of its set's most frequent gold label), the diagnostic sets' headline columns
    (`tested`), and each tested column's bias-free counterpart."""

    reference: tuple[str, ...]
    tested: tuple[str, ...]
    majority: Mapping[str, float]  # reference column -> its majority-class accuracy
    bias_free: Mapping[str, str]  # tested column -> its bias-free column

    @property
    def comparisons(self) -> int:
        """The bounds the family-wise alpha is split over (Bonferroni); a tested column and
        its bias-free counterpart must both pass, so they share one (intersection-union)."""
        return len(self.reference) + len(self.tested)


@dataclass(frozen=True)
class Reason:
    """Why a verdict came out as it did: the rule that decided and its numbers."""

    rule: Rule
    numbers: dict[str, Any]


@dataclass(frozen=True)
class ColumnTest:
    """One headline column in the decision: its one-sided seed-std lower bound and its
    bias-free counterpart's, against the margin."""

    column: str
    seed_std_lower: float
    bias_free: str
    bias_free_lower: float
    passes: bool  # the raw column passes
    bias_free_passes: bool


@dataclass(frozen=True)
class Verdict:
    """Outcome of one study, its reason (rule and numbers) and the numbers behind it."""

    outcome: Outcome
    reason: Reason
    columns: tuple[ColumnVariance, ...]
    tests: tuple[ColumnTest, ...]  # empty with fewer than 2 seeds
    margin: float | None  # seed std a headline column must exceed; None below 2 seeds
    # the power rule's seeds, asked for only once no column passes and the diagnostic is not
    # at chance; None otherwise, or when no number of seeds up to MAX_SEEDS gives the power
    min_seeds: int | None

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
    """Outcome over several configurations; those that did not learn the task are ignored."""

    outcome: Outcome
    reason: str
    verdicts: dict[str, Verdict]  # configurations that learned the task
    ignored: tuple[str, ...]  # configurations not above the majority class


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


def _noise(noise: Mapping[str, Noise], column: str) -> Noise:
    if column not in noise:
        raise KeyError(f"no evaluation noise for column {column!r}")
    return noise[column]


def _bonett_log_se(values: np.ndarray) -> np.ndarray:
    """Bonett's (2006) standard error of log(c s^2) along the last axis, from the sample's
    own kurtosis: what keeps a variance bound honest when seeds have heavy tails."""
    k = values.shape[-1]
    centre = stats.trim_mean(values, 1 / (2 * math.sqrt(k - 4)), axis=-1)[..., None]
    squares = ((values - values.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    fourth = ((values - centre) ** 4).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        kurtosis = np.where(squares > 0, k * fourth / squares**2, 0.0)
    return np.sqrt(np.maximum(kurtosis - (k - 3) / k, 0.0) / (k - 1))


def _variance_bound(values: np.ndarray, quantile: float) -> np.ndarray:
    """One-sided confidence bound of the total variance across seeds (along the last axis):
    a `quantile` above 0.5 gives a lower bound, below 0.5 an upper one. The chi-square bound
    (exact for normal seeds) and, from NORMAL_SEEDS seeds on (below, the verdict gives no
    conclusive outcome), Bonett's kurtosis-adjusted one, whichever is more cautious."""
    values = np.asarray(values, dtype=float)
    k = values.shape[-1]
    variance = np.where(np.ptp(values, axis=-1) > 0, values.var(axis=-1, ddof=1), 0.0)
    chi_square = variance * (k - 1) / stats.chi2.ppf(quantile, k - 1)
    if k < NORMAL_SEEDS:
        return chi_square
    z = stats.norm.ppf(quantile)
    scale = k / (k - abs(z))
    bonett = scale * variance * np.exp(-z * scale * _bonett_log_se(values))
    return np.minimum(chi_square, bonett) if quantile > 0.5 else np.maximum(chi_square, bonett)


def _std_bound(values: np.ndarray, quantile: float, noise_var: float) -> float:
    """Confidence bound of the seed std: sqrt(max(variance bound - noise, 0))."""
    return math.sqrt(max(float(_variance_bound(values, quantile)) - noise_var, 0.0))


def seed_variance(
    table: pd.DataFrame, noise_var: Mapping[str, float], columns: Sequence[str] | None = None
) -> list[ColumnVariance]:
    """Per column: noise std, observed std, seed std, its LEVEL interval and a check of the
    noise model (`noise_var`: per column, the paired evaluation-noise variance).

    `columns` defaults to the columns present in both `table` and `noise_var`. A spread below
    the noise gives a seed std of 0 with a note that says so (and, where the chi-square lower
    tail rejects the noise model at ALPHA, that the noise is overstated)."""
    if columns is None:
        columns = [c for c in noise_var if c in table.columns]
    tail = (1 - LEVEL) / 2
    rows = []
    for column in columns:
        values, noise = _accuracies(table, column), float(noise_var[column])
        k = len(values)
        common: dict[str, Any] = {
            "column": column,
            "n_seeds": k,
            "mean": float(values.mean()),
            "noise_std": math.sqrt(noise),
        }
        if k < 2:
            rows.append(
                ColumnVariance(
                    **common,
                    observed_std=None,
                    seed_std=None,
                    seed_std_low=None,
                    seed_std_high=None,
                    noise_fit_p=None,
                    note="one seed: no across-seed variance",
                )
            )
            continue
        variance = float(values.var(ddof=1)) if np.ptp(values) > 0 else 0.0
        fit_p = float(stats.chi2.cdf((k - 1) * variance / noise, k - 1)) if noise > 0 else None
        note = None
        if variance < noise:
            note = (
                f"the evaluation noise ({math.sqrt(noise):.2%}) exceeds the observed spread "
                f"({math.sqrt(variance):.2%}): no seed variance is measurable"
            )
            if fit_p is not None and fit_p < ALPHA:
                note += f"; a spread this small under that noise has p = {fit_p:.2g}"
        rows.append(
            ColumnVariance(
                **common,
                observed_std=math.sqrt(variance),
                seed_std=math.sqrt(max(variance - noise, 0.0)),
                seed_std_low=_std_bound(values, 1 - tail, noise),
                seed_std_high=_std_bound(values, tail, noise),
                noise_fit_p=fit_p,
                note=note,
            )
        )
    return rows


def detection_power(
    n_seeds: int,
    reference_seed_var: float,
    reference_noise_var: float,
    tested_noise_var: float,
    comparisons: int,
    seed_std: float = DESIGN_SEED_STD,
    alpha: float = ALPHA,
) -> float:
    """Power of `verdict`'s test to pass one headline column whose true seed std is
    `seed_std`, when the in-distribution reference's seed variance is `reference_seed_var`
    (its measured one), the alpha split over `comparisons` bounds; `tested_noise_var`: the
    larger noise of the column and of its bias-free counterpart, both of which must pass.

    For normal seeds, by simulation of the very bounds the verdict uses (POWER_DRAWS studies,
    fixed random numbers, so the answer is reproducible)."""
    if n_seeds < 2:
        return 0.0
    one_sided = alpha / comparisons
    normal = np.random.default_rng(0).standard_normal((2, POWER_DRAWS, n_seeds))
    reference = normal[0] * math.sqrt(reference_seed_var + reference_noise_var)
    tested = normal[1] * math.sqrt(seed_std**2 + tested_noise_var)
    margin = np.maximum(STD_RATIO * np.sqrt(_variance_bound(reference, one_sided)), STD_FLOOR)
    lower = np.sqrt(np.maximum(_variance_bound(tested, 1 - one_sided) - tested_noise_var, 0.0))
    return float(np.mean(lower > margin))


@functools.lru_cache(maxsize=256)
def minimum_seeds(
    reference_seed_var: float,
    reference_noise_var: float,
    tested_noise_var: float,
    comparisons: int,
    seed_std: float = DESIGN_SEED_STD,
    power: float = DESIGN_POWER,
    alpha: float = ALPHA,
) -> int | None:
    """Smallest number of seeds at which `detection_power` reaches `power`, or None when even
    MAX_SEEDS do not (evaluation sets so small, or a reference so spread, that the margin
    alone exceeds `seed_std`). Power grows with the number of seeds: a search finds it."""
    if seed_std <= STD_FLOOR:
        raise ValueError(f"a design seed std of {seed_std} cannot exceed the floor {STD_FLOOR}")

    def enough(k: int) -> bool:
        power_k = detection_power(
            k,
            reference_seed_var,
            reference_noise_var,
            tested_noise_var,
            comparisons,
            seed_std,
            alpha,
        )
        return power_k >= power

    high = 2  # gallop: the first power of two with the power, then bisect below it
    while not enough(high):
        if high >= MAX_SEEDS:
            return None
        high = min(2 * high, MAX_SEEDS)
    low = high // 2 + 1 if high > 2 else 2
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


def _not_above_majority(
    values: np.ndarray, noise: Noise, majority: float, alpha: float
) -> tuple[float, float] | None:
    """(mean, one-sided p) when the seeds' mean accuracy is not significantly above the
    majority-class rate (a z test with one seed's sampling error: cautious), else None."""
    mean = float(values.mean())
    se = math.sqrt(float(np.mean(noise.single_var)))
    p = float(stats.norm.sf((mean - majority) / se)) if se > 0 else float(mean <= majority)
    return (mean, p) if p >= alpha else None


def _above_chance(values: np.ndarray, noise: Noise, tests: int, alpha: float) -> int:
    """How many seeds score significantly above BIAS_FREE_CHANCE (one-sided z tests,
    Bonferroni over `tests`)."""
    se = np.sqrt(np.maximum(np.asarray(noise.single_var, dtype=float), 1e-300))
    p = stats.norm.sf((values - BIAS_FREE_CHANCE) / se)
    return int((p < alpha / tests).sum())


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


def learned(table: pd.DataFrame, noise: Mapping[str, Noise], design: Design, alpha: float = ALPHA):
    """The first reference column whose mean accuracy is not significantly above its
    majority class, as (column, mean, majority, p), or None: the task was learned."""
    for column in design.reference:
        values, majority = _accuracies(table, column), design.majority[column]
        found = _not_above_majority(values, _noise(noise, column), majority, alpha)
        if found is not None:
            return column, found[0], majority, found[1]
    return None


def verdict(
    table: pd.DataFrame,
    noise: Mapping[str, Noise],
    design: Design,
    prediction_shares: Mapping[str, Sequence[float]] | None = None,
    alpha: float = ALPHA,
) -> Verdict:
    """Decide whether one study (a seeds table, one row per seed) shows the paper's finding.

    In this order: inconclusive when a seed predicts one class on >= ONE_CLASS_SHARE of an
    in-distribution set (`prediction_shares`), or a reference column's mean accuracy is not
    significantly above its majority class (one-sided, at alpha). Then each tested column's
    one-sided lower bound of its seed std, and of its bias-free counterpart's, is set against
    the margin max(STD_RATIO x the largest upper bound of the references' seed std,
    STD_FLOOR); the bounds are at alpha / `design.comparisons` each (Bonferroni; a column
    and its counterpart must both pass: intersection-union). "reproduces" when some column
    passes both; "inconclusive" (label bias) when some raw column passes but no counterpart
    does: the seeds differ in how often they answer a label; "inconclusive" (diagnostic at
    chance) when no seed's bias-free score on any tested column is significantly above
    chance. Otherwise "does not reproduce" only with at least `minimum_seeds` seeds (the
    power to see an effect had there been one); with fewer, inconclusive. With fewer than
    NORMAL_SEEDS seeds neither conclusive outcome is given (rule "few seeds").

    The tested bounds subtract the paired evaluation noise (`noise`); the references' upper
    bounds bound the total spread, whatever the noise.
    """
    references = {c: _accuracies(table, c) for c in design.reference}
    tested = {c: _accuracies(table, c) for c in design.tested}
    bias_free = {c: _accuracies(table, design.bias_free[c]) for c in design.tested}
    shown = [*design.reference, *[x for c in design.tested for x in (c, design.bias_free[c])]]
    others = [c for c in noise if c in table.columns and c not in shown]
    paired = {c: _noise(noise, c).paired_var for c in [*shown, *others]}
    columns = tuple(seed_variance(table, paired, [*shown, *others]))
    k = len(table)
    reference_noise = max(paired[c] for c in design.reference)
    reference_seed_var = max(
        max(float(v.var(ddof=1)) - paired[c], 0.0) if k > 1 else 0.0 for c, v in references.items()
    )
    tested_noise = max(max(paired[c], paired[design.bias_free[c]]) for c in design.tested)

    tests: tuple[ColumnTest, ...] = ()
    margin = None
    if k >= 2:
        one_sided = alpha / design.comparisons
        upper = max(_std_bound(v, one_sided, 0.0) for v in references.values())
        margin = max(STD_RATIO * upper, STD_FLOOR)
        found = []
        for column, values in tested.items():
            free = design.bias_free[column]
            low = _std_bound(values, 1 - one_sided, paired[column])
            free_low = _std_bound(bias_free[column], 1 - one_sided, paired[free])
            found.append(ColumnTest(column, low, free, free_low, low > margin, free_low > margin))
        tests = tuple(found)

    min_k: int | None = None  # asked for once no column passes

    def decided(outcome: Outcome, rule: Rule, **numbers: Any) -> Verdict:
        if outcome != "inconclusive" and k < NORMAL_SEEDS:
            numbers = {"would": outcome, "seeds": k, "needed": NORMAL_SEEDS, **numbers}
            outcome, rule = "inconclusive", "few seeds"
        return Verdict(outcome, Reason(rule, numbers), columns, tests, margin, min_k)

    one_class = _one_class(prediction_shares or {}, k)
    if one_class is not None:
        return Verdict("inconclusive", one_class, columns, tests, margin, min_k)
    not_learned = learned(table, noise, design, alpha)
    if not_learned is not None:
        column, mean, majority, p = not_learned
        return decided(
            "inconclusive", "near chance", column=column, mean=mean, chance=majority, p=p
        )
    reference = " / ".join(design.reference)
    both = [t for t in tests if t.passes and t.bias_free_passes]
    if both:
        bounds = {t.column: t.seed_std_lower for t in both}
        free_bounds = {t.bias_free: t.bias_free_lower for t in both}
        return decided(
            "reproduces",
            "passes",
            bounds=bounds,
            bias_free=free_bounds,
            margin=margin,
            reference=reference,
            alpha=alpha,
        )
    raw_only = [t for t in tests if t.passes]
    if raw_only:
        best = max(raw_only, key=lambda t: t.seed_std_lower)
        return decided(
            "inconclusive",
            "label bias",
            column=best.column,
            lower=best.seed_std_lower,
            bias_free=best.bias_free,
            bias_free_lower=best.bias_free_lower,
            margin=margin,
        )
    checks = len(design.tested) * k
    above = {
        c: _above_chance(v, _noise(noise, design.bias_free[c]), checks, alpha)
        for c, v in bias_free.items()
    }
    if not any(above.values()):
        means = {design.bias_free[c]: float(v.mean()) for c, v in bias_free.items()}
        return decided("inconclusive", "diagnostic at chance", means=means, chance=BIAS_FREE_CHANCE)
    min_k = minimum_seeds(reference_seed_var, reference_noise, tested_noise, design.comparisons)
    if min_k is None:
        return decided("inconclusive", "sets too small", seed_std=DESIGN_SEED_STD)
    if k < min_k or margin is None:  # min_k >= 2, so margin is set past this point
        return decided("inconclusive", "too few seeds", seeds=k, needed=min_k)
    best_test = max(tests, key=lambda test: min(test.seed_std_lower, test.bias_free_lower))
    largest = {best_test.column: best_test.seed_std_lower}
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
            f"inconclusive: mean {n['column']} {n['mean']:.3f} is not significantly above its "
            f"majority class ({n['chance']:.3f}; one-sided p = {n['p']:.2g}): the task was "
            "not learned"
        )
    if reason.rule == "few seeds":
        return (
            f"inconclusive: the test says {n['would']!r}, but {n['seeds']} seeds are too few to "
            f"rely on the normality it assumes (at least {n['needed']}); "
            + reason_text(n["would"], Reason(_inner_rule(n["would"]), n)).split(": ", 1)[1]
        )
    if reason.rule == "passes":
        bounds = ", ".join(f"{column} {low:.3f}" for column, low in n["bounds"].items())
        free = ", ".join(f"{low:.3f}" for low in n["bias_free"].values())
        return (
            f"reproduces: the seed-std lower bound of {bounds} exceeds the margin "
            f"{n['margin']:.3f} ({STD_RATIO:g} x {n['reference']}'s seed-std upper bound, at "
            f"least {STD_FLOOR}) at family-wise alpha {n['alpha']}, and so does that of its "
            f"bias-free accuracy ({free}): the seeds differ in how they generalize, not only "
            "in how often they answer a label"
        )
    if reason.rule == "label bias":
        return (
            f"inconclusive: {n['column']} spreads across seeds (seed-std lower bound "
            f"{n['lower']:.3f} > margin {n['margin']:.3f}) but its bias-free accuracy does not "
            f"(lower bound {n['bias_free_lower']:.3f}): the seeds differ in how often they "
            "answer a label, not shown to differ in how they generalize"
        )
    if reason.rule == "diagnostic at chance":
        means = ", ".join(f"{column} {mean:.3f}" for column, mean in n["means"].items())
        return (
            f"inconclusive: no seed's bias-free accuracy on a headline column is significantly "
            f"above chance ({n['chance']}; means {means}): the seeds do not tell the diagnostic "
            "set's labels apart, so their spread there is how often they answer a label"
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
        f"{outcome}: no headline column's seed-std lower bound, with its bias-free "
        f"accuracy's, exceeds the margin {n['margin']:.3f} (largest: {column} {low:.3f})"
    )


def _inner_rule(outcome: str) -> Rule:
    return "passes" if outcome == "reproduces" else "none passes"


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
    noise: Mapping[str, Mapping[str, Noise]],
    design: Design,
    prediction_shares: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    alpha: float = ALPHA,
) -> SweepVerdict:
    """Apply `verdict` per configuration (`noise`: per configuration, per column), ignoring
    those whose reference accuracy is not significantly above the majority class (they did
    not learn the task).

    Each learned configuration is tested at alpha / their number (Bonferroni), so that the
    configurations said to reproduce hold family-wise. "reproduces" only when every learned
    configuration reproduces, "does not reproduce" only when every one does not; an
    inconclusive configuration is not a pass, so any other mix is inconclusive.
    """
    if not configurations:
        raise ValueError("a sweep needs at least one configuration")
    shares = prediction_shares or {}
    ignored = tuple(
        name
        for name, table in configurations.items()
        if learned(table, noise[name], design, alpha) is not None
    )
    kept = [name for name in configurations if name not in ignored]
    each = alpha / max(len(kept), 1)
    verdicts = {
        name: verdict(configurations[name], noise[name], design, shares.get(name), each)
        for name in kept
    }
    chance = f"({len(ignored)} ignored: not above the majority class)"
    if not verdicts:
        return SweepVerdict(
            "inconclusive",
            f"inconclusive: no configuration learned the task {chance}",
            verdicts,
            ignored,
        )
    counts = {o: [n for n, v in verdicts.items() if v.outcome == o] for o in _OUTCOMES}
    total = len(verdicts)
    tally = ", ".join(f"{len(names)} {o}" for o, names in counts.items() if names)
    if len(counts["reproduces"]) == total:
        outcome: Outcome = "reproduces"
        reason = f"reproduces in all {total} configurations that learned the task {chance}"
    elif len(counts["does not reproduce"]) == total:
        outcome = "does not reproduce"
        reason = f"does not reproduce in any of the {total} configurations that learned the task"
        reason += f" {chance}"
    else:
        outcome = "inconclusive"
        reason = f"inconclusive: of {total} configurations that learned the task, {tally}"
        if counts["reproduces"]:
            reason += f" (reproducing at family-wise alpha {alpha}: "
            reason += f"{', '.join(counts['reproduces'])})"
        reason += f" {chance}"
    return SweepVerdict(outcome, reason, verdicts, ignored)


_OUTCOMES: tuple[Outcome, ...] = ("reproduces", "does not reproduce", "inconclusive")
