"""The study's verdict as a statistical decision (pure functions, no I/O).

Do seeds that score alike in distribution differ on the diagnostic sets in how they
generalize, not only in how often they answer a label (McCoy, Min & Linzen 2020)? A tested
column passes when its seed std and its bias-free counterpart's both exceed a margin set by the
in-distribution columns' spread; every decision carries its reason as data (rule and numbers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from seedvar.stats import bounds
from seedvar.stats.bounds import ALPHA, SEED_FLOOR, STD_FLOOR, STD_RATIO
from seedvar.stats.heuristic import HeuristicTest
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
    """What a verdict compares: reference and tested columns, each tested one's counterpart."""

    reference: tuple[str, ...]
    tested: tuple[str, ...]
    majority: Mapping[str, float]  # reference column -> its majority-class accuracy
    bias_free: Mapping[str, str]  # tested column -> its bias-free column
    measure: Measure  # what the bias-free columns hold
    # reference column -> its counterpart on the bias-free columns' scale (AUC: its AUC), so
    # that the bias-free columns' margin is on their own scale; empty: the reference's own
    reference_free: Mapping[str, str] = field(default_factory=dict)
    held_in: tuple[str, ...] = ()  # tested columns whose rule training showed: learned, not claimed

    @property
    def comparisons(self) -> int:
        """The bounds the family-wise alpha is split over (Bonferroni); a tested column and
        its counterpart must both pass, so they share one (intersection-union)."""
        return len(self.reference) + len(self.tested)


@dataclass(frozen=True)
class ColumnTest:
    """A tested column's one-sided seed-std bounds and its counterpart's, and the paired p that
    its seed variance exceeds the counterpart's (None below 4 seeds)."""

    column: str
    seed_std_lower: float
    seed_std_upper: float
    bias_free: str
    bias_free_lower: float
    bias_free_upper: float
    passes: bool  # the raw column's lower bound exceeds the margin
    bias_free_passes: bool  # the counterpart's exceeds the margin on its own scale
    excess_p: float | None
    heuristic: HeuristicTest | None = None  # seed main effect against seed x subcase
    held_in: bool = False

    @property
    def main_effect(self) -> bool | None:
        """Whether the seed main effect is tested (None: no subcases to test it against)."""
        return None if self.heuristic is None else self.heuristic.main_p is not None

    def claims(self, level: float) -> bool:
        """Raw and counterpart pass and, with subcases, the seed main effect is significant."""
        if not (self.passes and self.bias_free_passes) or self.held_in:
            return False
        return self.heuristic is None or (self.heuristic.main_p or 1.0) < level


@dataclass(frozen=True)
class Verdict:
    """Outcome of one study, its reason (rule and numbers) and the numbers behind it."""

    outcome: Outcome
    reason: Reason
    columns: tuple[bounds.ColumnVariance, ...]
    tests: tuple[ColumnTest, ...]  # empty with fewer than 2 seeds
    margin: float | None  # seed std a headline column must exceed; None below 2 seeds
    bias_free_margin: float | None  # the same on the counterparts' scale
    null_margin: float | None  # what every upper bound must fall below for "does not reproduce"
    min_seeds: int | None  # the power rule's seeds, only when undecided (None: over MAX_SEEDS)


def _noise(noise: Mapping[str, Noise], column: str) -> Noise:
    if column not in noise:
        raise KeyError(f"no evaluation noise for column {column!r}")
    return noise[column]


def excess_spread_p(raw: np.ndarray, free: np.ndarray, raw_noise: float, free_noise: float):
    """One-sided p that a column's seed variance exceeds its counterpart's (Pitman-Morgan on
    raw - free against raw + free, net of their noise); None below 4 seeds or without spread."""
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


def learned(
    table: pd.DataFrame, noise: Mapping[str, Noise], design: Design, alpha: float = ALPHA
) -> Reason | None:
    """Why the task was not learned (near chance): the first reference column not significantly
    above its majority class (one-sided z test, one seed's sampling error); None if learned."""
    for column in design.reference:
        values, majority = bounds.accuracies(table, column), design.majority[column]
        mean = float(values.mean())
        se = math.sqrt(float(np.mean(_noise(noise, column).single_var)))
        p = float(stats.norm.sf((mean - majority) / se)) if se > 0 else float(mean <= majority)
        if p >= alpha:
            return Reason(
                "near chance", {"column": column, "mean": mean, "chance": majority, "p": p}
            )
    return None


def verdict(
    table: pd.DataFrame,
    noise: Mapping[str, Noise],
    design: Design,
    prediction_shares: Mapping[str, Sequence[float]] | None = None,
    alpha: float = ALPHA,
    heuristics: Mapping[str, HeuristicTest] | None = None,
) -> Verdict:
    """Decide whether one study (a seeds table) shows the paper's finding, by the rules of
    docs/verdict.md in order: one class, near chance, not learned (a held-in column), passes,
    subcases only, label bias or not separated, diagnostic at chance, ruled out, undecided;
    few seeds below SEED_FLOOR. `heuristics`: a tested column's seed main-effect test."""
    free_of, heuristics = design.bias_free, heuristics or {}
    shown = [*design.reference, *[x for c in design.tested for x in (c, free_of[c])]]
    shown += [c for c in design.reference_free.values() if c not in shown]
    shown += [c for c in noise if c in table.columns and c not in shown]
    values = {c: bounds.accuracies(table, c) for c in shown}
    paired = {c: _noise(noise, c).paired_var for c in shown}
    columns = tuple(bounds.seed_variance(table, paired, shown))
    k, one_sided = len(table), alpha / design.comparisons
    tests: tuple[ColumnTest, ...] = ()
    margin = free_margin = null_margin = None
    if k >= 2:

        def margins(columns: Sequence[str]) -> tuple[float, float]:
            """STD_RATIO x the references' largest upper (and, for "ruled out", lower) bound."""
            references = [values[c] for c in columns]
            low, high = (
                max(STD_RATIO * max(bounds.std_bound(v, q, 0.0) for v in references), STD_FLOOR)
                for q in (one_sided, 1 - one_sided)
            )
            return low, high

        margin, null_margin = margins(design.reference)
        own_scale = [design.reference_free.get(c, c) for c in design.reference]
        free_margin = margins(own_scale)[0]

        def test(column: str) -> ColumnTest:
            free = free_of[column]
            low, high, free_low, free_high = (
                bounds.std_bound(values[c], q, paired[c])
                for c in (column, free)
                for q in (1 - one_sided, one_sided)
            )
            excess = excess_spread_p(values[column], values[free], paired[column], paired[free])
            passes = (low > margin, free_low > free_margin)
            found = (*passes, excess, heuristics.get(column), column in design.held_in)
            return ColumnTest(column, low, high, free, free_low, free_high, *found)

        tests = tuple(test(c) for c in design.tested)
    min_k: int | None = None  # asked for only when undecided

    def decided(rule: str, **numbers: Any) -> Verdict:
        outcome = _OUTCOME.get(rule, "inconclusive")
        numbers = {"measure": design.measure, **numbers}
        if outcome != "inconclusive" and k < SEED_FLOOR:
            numbers = {"would": outcome, "seeds": k, "needed": SEED_FLOOR, **numbers}
            outcome, rule = "inconclusive", "few seeds"
        reason = Reason(rule, numbers)
        return Verdict(outcome, reason, columns, tests, margin, free_margin, null_margin, min_k)

    one_class = _one_class(prediction_shares or {}, k)
    if one_class is not None:
        found = (columns, tests, margin, free_margin, null_margin, min_k)
        return Verdict("inconclusive", one_class, *found)
    if (not_learned := learned(table, noise, design, alpha)) is not None:
        return decided(not_learned.rule, **not_learned.numbers)
    if (held_in := rule_not_learned(values, design, alpha)) is not None:
        return decided(held_in.rule, **held_in.numbers)
    if claimed := [t for t in tests if t.claims(one_sided)]:
        lower = {t.column: t.seed_std_lower for t in claimed}
        free = {t.bias_free: t.bias_free_lower for t in claimed}
        reference = " / ".join(design.reference)
        main = {t.column: t.heuristic.main_p for t in claimed if t.heuristic is not None}
        numbers: dict[str, Any] = {"bounds": lower, "bias_free": free, "margin": margin}
        numbers |= {
            "reference": reference,
            "bias_free_margin": free_margin,
            "alpha": alpha,
            "main_p": main,
        }
        numbers |= {"population": "heuristic" if main else "examples"}
        return decided("passes", **numbers)
    subcases = [t for t in tests if t.passes and t.bias_free_passes and not t.held_in]
    if subcases:
        best = max(subcases, key=lambda t: t.bias_free_lower)
        found_test = best.heuristic
        numbers = {"column": best.column, "bias_free": best.bias_free}
        numbers |= {
            "lower": best.seed_std_lower,
            "bias_free_lower": best.bias_free_lower,
            "bias_free_margin": free_margin,
        }
        if found_test is not None:
            numbers |= {"main_p": found_test.main_p, "main_sd": found_test.main_sd}
            numbers |= {"interaction_p": found_test.interaction_p}
            numbers |= {"interaction_sd": found_test.interaction_sd}
        return decided("subcases only", level=one_sided, **numbers)
    if raw_only := [t for t in tests if t.passes and not t.held_in]:
        level = alpha / len(raw_only)  # label bias where the paired test shows the raw spread
        excess = [t for t in raw_only if t.excess_p is not None and t.excess_p < level]
        best = max(excess or raw_only, key=lambda t: t.seed_std_lower)
        numbers = {"column": best.column, "lower": best.seed_std_lower, "bias_free": best.bias_free}
        numbers |= {
            "bias_free_lower": best.bias_free_lower,
            "bias_free_upper": best.bias_free_upper,
        }
        numbers |= {"p": best.excess_p, "level": level, "margin": margin}
        return decided("label bias" if excess else "not separated", **numbers)
    frees = [free_of[c] for c in design.tested]
    if not any(_above_chance(values[c], noise[c], len(frees) * k, alpha) for c in frees):
        means = {c: float(values[c].mean()) for c in frees}
        return decided("diagnostic at chance", means=means, chance=BIAS_FREE_CHANCE)
    if null_margin is None:  # one seed: no spread to bound
        return decided("undecided", seeds=k, largest=None)
    uppers = {t.column: min(t.seed_std_upper, t.bias_free_upper) for t in tests}
    worst = max(uppers, key=lambda c: uppers[c])
    largest = {worst: uppers[worst]}
    if uppers[worst] < null_margin:
        return decided("ruled out", margin=null_margin, largest=largest)
    seed_var = {c: max(float(v.var(ddof=1)) - paired[c], 0.0) for c, v in values.items()}
    min_k = minimum_seeds(
        max(seed_var[c] for c in design.reference),
        max(paired[c] for c in design.reference),
        max(max(paired[c], paired[free_of[c]]) for c in design.tested),
        design.comparisons,
    )

    def rule_out(column: str) -> int | None:
        """The fewer seeds at which the column or its counterpart would be ruled out, or None."""
        found = [
            seeds_to_rule_out(seed_var[c], paired[c], null_margin, one_sided)
            for c in (column, free_of[column])
        ]
        return min((x for x in found if x is not None), default=None)

    needed = [rule_out(t.column) for t in tests if uppers[t.column] >= null_margin]
    most = None if None in needed else max(needed)  # type: ignore[type-var]
    numbers = {"seeds": k, "margin": null_margin, "largest": largest, "power_seeds": min_k}
    return decided("undecided", **numbers, rule_out_seeds=most)


_OUTCOME: dict[str, Outcome] = {"passes": "reproduces", "ruled out": "does not reproduce"}


def rule_not_learned(
    values: Mapping[str, np.ndarray], design: Design, alpha: float
) -> Reason | None:
    """Why a positive control says nothing: a held-in column's counterpart not above chance
    across seeds (one-sided t test, alpha over the held-in columns); None if every one is."""
    for column in design.held_in:
        free = values[design.bias_free[column]]
        if len(free) < 2 or np.ptp(free) == 0:
            p = float(free.mean() <= BIAS_FREE_CHANCE)
        else:
            p = float(stats.ttest_1samp(free, BIAS_FREE_CHANCE, alternative="greater").pvalue)
        if p >= alpha / len(design.held_in):
            mean = float(free.mean())
            return Reason("rule not learned", {"column": column, "mean": mean, "p": p})
    return None


def _above_chance(values: np.ndarray, noise: Noise, tests: int, alpha: float) -> int:
    """How many seeds score significantly above BIAS_FREE_CHANCE (Bonferroni over `tests`)."""
    se = np.sqrt(np.maximum(np.asarray(noise.single_var, dtype=float), 1e-300))
    return int((stats.norm.sf((values - BIAS_FREE_CHANCE) / se) < alpha / tests).sum())
