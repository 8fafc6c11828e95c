"""Variance components of a factorial seed design (pure functions, no I/O).

Every pair of an init seed (classifier head, dropout) and a data-order seed is one run. Per
column the cells follow the two-way random-effects model y = mu + init + order + interaction +
noise, the noise's variance known (the paired evaluation noise). With one run per cell the
interaction is what the residual mean square leaves after that noise; where the noise exceeds
the residual it is not identified, and the note says so. Point estimates are ANOVA's (negative
ones set to 0); the intervals are generalized confidence intervals (Weerahandi 1993: each mean
square's expectation drawn from its chi-square pivot), valid for 3 x 3 designs where
Satterthwaite's undercovers. Init against data order is a generalized test on the same draws
(the two-sided F test in square designs), Holm corrected across columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from seedvar.stats.reason import Reason

LEVEL = 0.95
ALPHA = 0.05  # family-wise error rate of the init-against-data-order tests
DRAWS = 20_000  # pivot draws per column; fixed RNG seed, so the intervals are reproducible
COMPONENTS = ("init", "data order", "interaction")


@dataclass(frozen=True)
class Component:
    """One source of seed variance in one column: its std, LEVEL interval and share."""

    column: str
    source: str  # one of COMPONENTS
    std: float
    std_low: float
    std_high: float
    share: float | None  # of the seed variance (components summed); None when all are 0
    note: Reason | None = None


@dataclass(frozen=True)
class SourceComparison:
    """Init against data order in one column: ANOVA's estimate of var_init - var_order (not
    floored at 0) and the two-sided generalized p-value of "they are equal"."""

    column: str
    difference_var: float
    p_value: float


@dataclass(frozen=True)
class MeanSquares:
    """Two-way ANOVA without replication of an init x data-order table of accuracies."""

    init: float
    order: float
    residual: float
    df_init: int
    df_order: int
    df_residual: int

    def observed(self) -> np.ndarray:
        """The init, data-order and residual mean squares."""
        return np.array([self.init, self.order, self.residual])

    def pivot_draws(self, seed: int, draws: int) -> np.ndarray:
        """Draws of the mean squares' expectations: dof x observed / chi-square(dof)."""
        rng = np.random.default_rng(seed)
        pairs = zip((self.df_init, self.df_order, self.df_residual), self.observed(), strict=True)
        return np.stack([dof * ms / rng.chisquare(dof, draws) for dof, ms in pairs])

    def raw_variances(self, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Init and data-order variance from expected mean squares, not floored."""
        init, order, residual = expected
        return (init - residual) / (self.df_order + 1), (order - residual) / (self.df_init + 1)

    def variances(self, expected: np.ndarray, noise_var: float) -> list[np.ndarray]:
        """Init, data-order and interaction variance from expected mean squares, floored at 0."""
        found = [*self.raw_variances(expected), expected[2] - noise_var]
        return [np.maximum(variance, 0.0) for variance in found]


def mean_squares(cells: np.ndarray) -> MeanSquares:
    """Mean squares of an init x data-order matrix of one column's accuracies (>= 2 x 2)."""
    cells = np.asarray(cells, dtype=float)
    n_init, n_order = cells.shape
    if n_init < 2 or n_order < 2:
        raise ValueError("a factorial design needs at least 2 init seeds and 2 data-order seeds")
    dfs = (n_init - 1, n_order - 1, (n_init - 1) * (n_order - 1))
    if np.ptp(cells) == 0:  # identical cells: exactly 0, not the mean's rounding
        return MeanSquares(0.0, 0.0, 0.0, *dfs)
    grand = cells.mean()
    by_init, by_order = cells.mean(axis=1), cells.mean(axis=0)
    residuals = cells - by_init[:, None] - by_order[None, :] + grand
    return MeanSquares(
        n_order * float(((by_init - grand) ** 2).sum()) / (n_init - 1),
        n_init * float(((by_order - grand) ** 2).sum()) / (n_order - 1),
        float((residuals**2).sum()) / ((n_init - 1) * (n_order - 1)),
        *dfs,
    )


def noise_fit_p(squares: MeanSquares, noise_var: float) -> float | None:
    """Lower-tail p of the residual under no interaction (df * MS_res / noise_var is
    chi-square(df)): small, the noise is overstated; None without noise."""
    if noise_var <= 0:
        return None
    statistic = squares.df_residual * squares.residual / noise_var
    return float(stats.chi2.cdf(statistic, squares.df_residual))


def interaction_note(squares: MeanSquares, noise_var: float) -> Reason | None:
    """Why the interaction is not identified (the noise exceeds the residual), with the
    noise model's p where the data reject it at ALPHA, or None."""
    if noise_var <= squares.residual:
        return None
    fit = noise_fit_p(squares, noise_var)
    numbers = {"noise": math.sqrt(noise_var), "residual": math.sqrt(squares.residual)}
    rejected = fit if fit is not None and fit < ALPHA else None
    return Reason("not identified", numbers | {"p": rejected, "df": squares.df_residual})


def components(
    column: str, cells: np.ndarray, noise_var: float, seed: int = 0, draws: int = DRAWS
) -> list[Component]:
    """Init, data-order and interaction std of one column (`cells[init, order]`), intervals."""
    ms = mean_squares(cells)
    point = ms.variances(ms.observed(), noise_var)
    pivots = ms.variances(ms.pivot_draws(seed, draws), noise_var)
    notes = (None, None, interaction_note(ms, noise_var))
    tail = (1 - LEVEL) / 2 * 100
    total = float(sum(point))
    found = []
    for source, estimate, drawn, note in zip(COMPONENTS, point, pivots, notes, strict=True):
        low, high = np.sqrt(np.percentile(drawn, [tail, 100 - tail]))
        share = float(estimate) / total if total > 0 else None
        std = float(np.sqrt(estimate))
        found.append(Component(column, source, std, float(low), float(high), share, note))
    return found


def compare_sources(
    column: str, cells: np.ndarray, seed: int = 0, draws: int = DRAWS
) -> SourceComparison:
    """Init against data order: var_init - var_order and its two-sided generalized p on the
    pivot draws (the F test in square designs); the evaluation noise cancels."""
    ms = mean_squares(cells)
    init, order = ms.raw_variances(ms.observed())
    drawn_init, drawn_order = ms.raw_variances(ms.pivot_draws(seed, draws))
    difference = drawn_init - drawn_order
    two_sided = 2 * min(float(np.mean(difference <= 0)), float(np.mean(difference >= 0)))
    return SourceComparison(column, float(init - order), min(max(two_sided, 1 / draws), 1.0))


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> tuple[list[float], list[bool]]:
    """Holm's step-down correction: the adjusted p-values and which are rejected at `alpha`."""
    order = np.argsort(p_values, kind="stable")
    steps = (len(p_values) - np.arange(len(p_values))) * np.asarray(p_values, dtype=float)[order]
    adjusted = np.empty(len(p_values))
    adjusted[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return adjusted.tolist(), [p <= alpha for p in adjusted.tolist()]
