"""The study's verdict as a statistical decision (pure functions, no I/O).

Does a seeds table show what McCoy, Min & Linzen (2020) found: seeds that score alike on the
task's in-distribution sets but differ widely on the diagnostic sets, in how they generalize
and not only in how often they answer a label? A tested diagnostic column passes when its seed
std, and that of its bias-free counterpart (the AUC of its label's score where scores exist;
from a table of rates, the equal-variance bias-free accuracy), both exceed a margin set by the
in-distribution columns' spread. "Label bias" needs a paired test showing the raw spread
exceeds the counterpart's; "does not reproduce" needs every column's upper bound below the
margin. Every decision carries its reason as data (a rule and its numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from seedvar.stats.bounds import (
    ALPHA,
    SEED_FLOOR,
    STD_FLOOR,
    STD_RATIO,
    ColumnVariance,
    accuracies,
    seed_variance,
    std_bound,
)
from seedvar.stats.noise import Noise
from seedvar.stats.power import minimum_seeds, seeds_to_rule_out
from seedvar.stats.reason import Reason

Outcome = Literal["reproduces", "does not reproduce", "inconclusive"]
OUTCOMES: tuple[Outcome, ...] = ("reproduces", "does not reproduce", "inconclusive")
Measure = Literal["AUC", "equal-variance"]
ONE_CLASS_SHARE = 0.95  # a seed predicting one class this often is degenerate
BIAS_FREE_CHANCE = 0.5  # AUC, or bias-free accuracy, of answers carrying no information


@dataclass(frozen=True)
class Design:
    """What a verdict compares: the in-distribution headline columns (`reference`, each with
    the share of its set's most frequent gold label), the diagnostic sets' headline columns
    (`tested`), and each tested column's bias-free counterpart."""

    reference: tuple[str, ...]
    tested: tuple[str, ...]
    majority: Mapping[str, float]  # reference column -> its majority-class accuracy
    bias_free: Mapping[str, str]  # tested column -> its bias-free column
    measure: Measure  # what the bias-free columns hold

    @property
    def comparisons(self) -> int:
        """The bounds the family-wise alpha is split over (Bonferroni); a tested column and
        its counterpart must both pass, so they share one (intersection-union)."""
        return len(self.reference) + len(self.tested)


@dataclass(frozen=True)
class ColumnTest:
    """One headline column in the decision: the one-sided seed-std bounds of it and of its
    bias-free counterpart, and the paired test's p that its seed variance exceeds the
    counterpart's (None with fewer than 4 seeds)."""

    column: str
    seed_std_lower: float
    seed_std_upper: float
    bias_free: str
    bias_free_lower: float
    bias_free_upper: float
    passes: bool  # the raw column's lower bound exceeds the margin
    bias_free_passes: bool
    excess_p: float | None


@dataclass(frozen=True)
class Verdict:
    """Outcome of one study, its reason (rule and numbers) and the numbers behind it."""

    outcome: Outcome
    reason: Reason
    columns: tuple[ColumnVariance, ...]
    tests: tuple[ColumnTest, ...]  # empty with fewer than 2 seeds
    margin: float | None  # seed std a headline column must exceed; None below 2 seeds
    null_margin: float | None  # what every upper bound must fall below for "does not reproduce"
    min_seeds: int | None  # the power rule's seeds, only when undecided (None: over MAX_SEEDS)


def _noise(noise: Mapping[str, Noise], column: str) -> Noise:
    if column not in noise:
        raise KeyError(f"no evaluation noise for column {column!r}")
    return noise[column]


def excess_spread_p(raw: np.ndarray, free: np.ndarray, raw_noise: float, free_noise: float):
    """One-sided p that a column's seed variance exceeds its counterpart's, paired across the
    same seeds: Pitman-Morgan's test (the covariance of raw - free with raw + free is the
    difference of the variances), less the difference of their noise. None with fewer than 4
    seeds or no spread."""
    k = len(raw)
    difference, total = raw - free, raw + free
    spread = float(difference.var(ddof=1)) if k > 1 else 0.0
    if k < 4 or spread == 0:
        return None
    adjusted = total - (raw_noise - free_noise) / spread * difference
    if np.ptp(adjusted) == 0:
        return None
    r = float(np.clip(np.corrcoef(difference, adjusted)[0, 1], -1 + 1e-12, 1 - 1e-12))
    return float(stats.t.sf(r * math.sqrt((k - 2) / (1 - r**2)), k - 2))


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
    majority class (a one-sided z test with one seed's sampling error: cautious), as
    (column, mean, majority, p), or None: the task was learned."""
    for column in design.reference:
        values, majority = accuracies(table, column), design.majority[column]
        mean = float(values.mean())
        se = math.sqrt(float(np.mean(_noise(noise, column).single_var)))
        p = float(stats.norm.sf((mean - majority) / se)) if se > 0 else float(mean <= majority)
        if p >= alpha:
            return column, mean, majority, p
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
    in-distribution set (`prediction_shares`), or a reference column is not significantly
    above its majority class. Then each tested column's one-sided seed-std bounds, and its
    counterpart's, are set against the margin max(STD_RATIO x the largest upper bound of the
    references' seed std, STD_FLOOR), at alpha / `design.comparisons` each. "reproduces" when
    some column passes both. A raw column passing alone: "label bias" if the paired test
    shows its seed variance exceeding the counterpart's (Bonferroni over such columns), else
    "not separated". "diagnostic at chance" when no seed's counterpart is significantly above
    chance. "does not reproduce" only when every column's upper bound (or its counterpart's)
    is below the null margin (the references' lower bounds in place of their upper ones);
    otherwise "undecided", with the seeds that would decide it. Below SEED_FLOOR seeds no
    conclusive outcome ("few seeds"). The tested bounds are net of the paired evaluation noise;
    the references' bound their total spread.
    """
    references = {c: accuracies(table, c) for c in design.reference}
    tested = {c: accuracies(table, c) for c in design.tested}
    bias_free = {c: accuracies(table, design.bias_free[c]) for c in design.tested}
    shown = [*design.reference, *[x for c in design.tested for x in (c, design.bias_free[c])]]
    shown += [c for c in noise if c in table.columns and c not in shown]
    paired = {c: _noise(noise, c).paired_var for c in shown}
    columns = tuple(seed_variance(table, paired, shown))
    k = len(table)
    one_sided = alpha / design.comparisons
    tests: tuple[ColumnTest, ...] = ()
    margin = null_margin = None
    if k >= 2:
        margin, null_margin = (
            max(STD_RATIO * max(std_bound(v, q, 0.0) for v in references.values()), STD_FLOOR)
            for q in (one_sided, 1 - one_sided)
        )
        tests = tuple(
            _column_test(c, design.bias_free[c], tested[c], bias_free[c], paired, one_sided, margin)
            for c in design.tested
        )
    min_k: int | None = None  # asked for only when undecided

    def decided(outcome: Outcome, rule: str, **numbers: Any) -> Verdict:
        numbers = {"measure": design.measure, **numbers}
        if outcome != "inconclusive" and k < SEED_FLOOR:
            numbers = {"would": outcome, "seeds": k, "needed": SEED_FLOOR, **numbers}
            outcome, rule = "inconclusive", "few seeds"
        return Verdict(outcome, Reason(rule, numbers), columns, tests, margin, null_margin, min_k)

    one_class = _one_class(prediction_shares or {}, k)
    if one_class is not None:
        return Verdict("inconclusive", one_class, columns, tests, margin, null_margin, min_k)
    not_learned = learned(table, noise, design, alpha)
    if not_learned is not None:
        column, mean, majority, p = not_learned
        return decided(
            "inconclusive", "near chance", column=column, mean=mean, chance=majority, p=p
        )
    both = [t for t in tests if t.passes and t.bias_free_passes]
    if both:
        return decided(
            "reproduces",
            "passes",
            bounds={t.column: t.seed_std_lower for t in both},
            bias_free={t.bias_free: t.bias_free_lower for t in both},
            margin=margin,
            reference=" / ".join(design.reference),
            alpha=alpha,
        )
    raw_only = [t for t in tests if t.passes]
    if raw_only:
        return _raw_only(raw_only, alpha, margin, decided)
    checks = len(design.tested) * k
    above = {
        c: _above_chance(v, _noise(noise, design.bias_free[c]), checks, alpha)
        for c, v in bias_free.items()
    }
    if not any(above.values()):
        means = {design.bias_free[c]: float(v.mean()) for c, v in bias_free.items()}
        return decided("inconclusive", "diagnostic at chance", means=means, chance=BIAS_FREE_CHANCE)
    if null_margin is None:  # one seed: no spread to bound
        return decided("inconclusive", "undecided", seeds=k, largest=None)
    uppers = {t.column: min(t.seed_std_upper, t.bias_free_upper) for t in tests}
    worst = max(uppers, key=lambda c: uppers[c])
    if uppers[worst] < null_margin:
        largest = {worst: uppers[worst]}
        return decided("does not reproduce", "ruled out", margin=null_margin, largest=largest)
    reference_seed_var = max(
        max(float(v.var(ddof=1)) - paired[c], 0.0) for c, v in references.items()
    )
    min_k = minimum_seeds(
        reference_seed_var,
        max(paired[c] for c in design.reference),
        max(max(paired[c], paired[design.bias_free[c]]) for c in design.tested),
        design.comparisons,
    )
    rule_out = [
        _rule_out_seeds(t, tested[t.column], bias_free[t.column], paired, null_margin, one_sided)
        for t in tests
        if uppers[t.column] >= null_margin
    ]
    return decided(
        "inconclusive",
        "undecided",
        seeds=k,
        margin=null_margin,
        largest={worst: uppers[worst]},
        power_seeds=min_k,
        rule_out_seeds=None if None in rule_out else max(rule_out),  # type: ignore[type-var]
    )


def _above_chance(values: np.ndarray, noise: Noise, tests: int, alpha: float) -> int:
    """How many seeds score significantly above BIAS_FREE_CHANCE (one-sided z tests,
    Bonferroni over `tests`)."""
    se = np.sqrt(np.maximum(np.asarray(noise.single_var, dtype=float), 1e-300))
    p = stats.norm.sf((values - BIAS_FREE_CHANCE) / se)
    return int((p < alpha / tests).sum())


def _column_test(
    column: str,
    free: str,
    raw: np.ndarray,
    counterpart: np.ndarray,
    paired: Mapping[str, float],
    one_sided: float,
    margin: float,
) -> ColumnTest:
    """A tested column's bounds and paired test, at the level and against the margin."""
    low = std_bound(raw, 1 - one_sided, paired[column])
    free_low = std_bound(counterpart, 1 - one_sided, paired[free])
    return ColumnTest(
        column,
        low,
        std_bound(raw, one_sided, paired[column]),
        free,
        free_low,
        std_bound(counterpart, one_sided, paired[free]),
        low > margin,
        free_low > margin,
        excess_spread_p(raw, counterpart, paired[column], paired[free]),
    )


def _raw_only(
    raw_only: list[ColumnTest], alpha: float, margin, decided: Callable[..., Verdict]
) -> Verdict:
    """Raw columns pass, no counterpart does: label bias where the paired test shows the raw
    spread exceeding the counterpart's (Bonferroni over these columns), else not separated."""
    level = alpha / len(raw_only)
    shown = [t for t in raw_only if t.excess_p is not None and t.excess_p < level]
    best = max(shown or raw_only, key=lambda t: t.seed_std_lower)
    return decided(
        "inconclusive",
        "label bias" if shown else "not separated",
        column=best.column,
        lower=best.seed_std_lower,
        bias_free=best.bias_free,
        bias_free_lower=best.bias_free_lower,
        bias_free_upper=best.bias_free_upper,
        p=best.excess_p,
        level=level,
        margin=margin,
    )


def _rule_out_seeds(
    test: ColumnTest,
    raw: np.ndarray,
    counterpart: np.ndarray,
    paired: Mapping[str, float],
    margin: float,
    one_sided: float,
) -> int | None:
    """Seeds at which this column, at the spreads measured, would be ruled out (the fewer of
    its own and its counterpart's), or None."""
    found = [
        seeds_to_rule_out(max(float(v.var(ddof=1)) - paired[c], 0.0), paired[c], margin, one_sided)
        for c, v in ((test.column, raw), (test.bias_free, counterpart))
    ]
    known = [x for x in found if x is not None]
    return min(known) if known else None
