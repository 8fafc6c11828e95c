"""The analysis plan's numbers (pure functions, no I/O): the alpha a look at k seeds may spend,
and whether a treated study's seed spread exceeds its negative control's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from seedvar.stats.reason import Reason


def spent(alpha: float, fraction: float) -> float:
    """Lan and DeMets' O'Brien-Fleming-type spending function: the alpha spent by information
    `fraction` (seeds so far / seeds of the last look), 2 - 2 Phi(z_(1 - alpha/2) / sqrt(t))."""
    if fraction <= 0:
        return 0.0
    z = stats.norm.isf(alpha / 2)
    return float(min(2 * stats.norm.sf(z / np.sqrt(min(fraction, 1.0))), alpha))


@dataclass(frozen=True)
class Look:
    """The alpha of a look at `seeds` under a plan, and whether the plan was kept."""

    seeds: int
    alpha: float  # what this look spends (Bonferroni over looks: valid whatever their order)
    planned: tuple[int, ...]
    kept: Reason  # "kept", or why not (an unplanned count, seeds under another plan)


def look(seeds: int, looks: list[int] | None, alpha: float, foreign: int = 0) -> Look:
    """The look at `seeds` of a plan with `looks` (None: one, at `seeds`); `foreign`: how many
    of the seeds trained under another plan or none. An unplanned count spends what the
    spending function allows at its information less what earlier planned looks spent."""
    planned = tuple(sorted(looks)) if looks else (seeds,)
    last = planned[-1]
    earlier = [n for n in planned if n < seeds]
    before = spent(alpha, earlier[-1] / last) if earlier else 0.0
    level = spent(alpha, seeds / last) - before
    if seeds > last:
        level = alpha - spent(alpha, planned[-2] / last) if len(planned) > 1 else alpha
    numbers = {"seeds": seeds, "looks": list(planned), "alpha": level}
    if foreign:
        kept = Reason("not kept: seeds before the plan", numbers | {"foreign": foreign})
    elif seeds not in planned:
        kept = Reason("not kept: unplanned look", numbers)
    else:
        kept = Reason("kept", numbers)
    return Look(seeds, max(level, 0.0), planned, kept)


@dataclass(frozen=True)
class ControlTest:
    """A treated column's spread against the negative control's same column."""

    column: str
    treated_std: float
    control_std: float
    p: float | None  # one-sided: the treated spread exceeds the control's


def exceeds_control(column: str, treated: np.ndarray, control: np.ndarray) -> ControlTest:
    """One-sided Brown-Forsythe test (Welch's t on the absolute deviations from each group's
    median, robust to heavy tails) that the treated seeds spread more than the control's."""
    treated, control = np.asarray(treated, float), np.asarray(control, float)
    stds = (float(treated.std(ddof=1)), float(control.std(ddof=1)))
    deviations = [np.abs(v - np.median(v)) for v in (treated, control)]
    if min(len(treated), len(control)) < 3 or all(np.ptp(d) == 0 for d in deviations):
        return ControlTest(column, *stds, None)
    found = stats.ttest_ind(*deviations, equal_var=False, alternative="greater")
    return ControlTest(column, *stds, float(found.pvalue))
