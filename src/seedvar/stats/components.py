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
    """One source of seed variance in one column: its std and LEVEL interval (accuracy), and
    why it is not identified where it is not (the interaction, when the noise exceeds the
    residual)."""

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
    n_init: int
    n_order: int

    @property
    def df_init(self) -> int:
        return self.n_init - 1

    @property
    def df_order(self) -> int:
        return self.n_order - 1

    @property
    def df_residual(self) -> int:
        return self.df_init * self.df_order


def mean_squares(cells: np.ndarray) -> MeanSquares:
    """Mean squares of an init x data-order matrix of one column's accuracies (>= 2 x 2)."""
    cells = np.asarray(cells, dtype=float)
    n_init, n_order = cells.shape
    if n_init < 2 or n_order < 2:
        raise ValueError("a factorial design needs at least 2 init seeds and 2 data-order seeds")
    if np.ptp(cells) == 0:  # identical cells: exactly 0, not the mean's rounding
        return MeanSquares(0.0, 0.0, 0.0, n_init, n_order)
    grand = cells.mean()
    by_init, by_order = cells.mean(axis=1), cells.mean(axis=0)
    residuals = cells - by_init[:, None] - by_order[None, :] + grand
    return MeanSquares(
        init=n_order * float(((by_init - grand) ** 2).sum()) / (n_init - 1),
        order=n_init * float(((by_order - grand) ** 2).sum()) / (n_order - 1),
        residual=float((residuals**2).sum()) / ((n_init - 1) * (n_order - 1)),
        n_init=n_init,
        n_order=n_order,
    )


def _raw_variances(
    expected: tuple[np.ndarray, np.ndarray, np.ndarray], squares: MeanSquares
) -> tuple[np.ndarray, np.ndarray]:
    """Init and data-order variance from the expected mean squares, not floored."""
    init, order, residual = expected
    return (init - residual) / squares.n_order, (order - residual) / squares.n_init


def _variances(
    expected: tuple[np.ndarray, np.ndarray, np.ndarray], squares: MeanSquares, noise_var: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Init, data-order and interaction variance from the expected init, data-order and
    residual mean squares (values or pivot draws), each floored at 0."""
    init, order = _raw_variances(expected, squares)
    return (
        np.maximum(init, 0.0),
        np.maximum(order, 0.0),
        np.maximum(expected[2] - noise_var, 0.0),
    )


def _pivot_draws(
    squares: MeanSquares, seed: int, draws: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draws of the init, data-order and residual mean squares' expectations, each
    dof x observed / chi-square(dof)."""
    rng = np.random.default_rng(seed)

    def pivot(dof: int, observed: float) -> np.ndarray:
        return dof * observed / rng.chisquare(dof, draws)

    return (
        pivot(squares.df_init, squares.init),
        pivot(squares.df_order, squares.order),
        pivot(squares.df_residual, squares.residual),
    )


def noise_fit_p(squares: MeanSquares, noise_var: float) -> float | None:
    """Lower-tail p of the residual under no interaction, where df * MS_res / noise_var is
    chi-square(df): small means a residual too small for the noise (the noise is overstated);
    None without noise."""
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
    """Init, data-order and interaction std of one column, with LEVEL intervals.

    `cells[i, j]`: the accuracy of init seed i with data-order seed j; `noise_var`: the paired
    evaluation-noise variance of one seed's value (known, not estimated here)."""
    ms = mean_squares(cells)
    observed = (np.array(ms.init), np.array(ms.order), np.array(ms.residual))
    point = _variances(observed, ms, noise_var)
    pivots = _variances(_pivot_draws(ms, seed, draws), ms, noise_var)
    notes = (None, None, interaction_note(ms, noise_var))
    tail = (1 - LEVEL) / 2 * 100
    total = float(sum(point))
    found = []
    for source, estimate, drawn, note in zip(COMPONENTS, point, pivots, notes, strict=True):
        low, high = np.percentile(drawn, [tail, 100 - tail])
        found.append(
            Component(
                column=column,
                source=source,
                std=float(np.sqrt(estimate)),
                std_low=float(np.sqrt(low)),
                std_high=float(np.sqrt(high)),
                share=float(estimate) / total if total > 0 else None,
                note=note,
            )
        )
    return found


def compare_sources(
    column: str, cells: np.ndarray, noise_var: float, seed: int = 0, draws: int = DRAWS
) -> SourceComparison:
    """Does init vary more than data order? var_init - var_order on the pivot draws of
    `components` (not floored); p = 2 min(P(diff <= 0), P(diff >= 0)), at least 1 / draws.

    `noise_var` cancels (it is in every mean square's expectation); it is taken for symmetry
    with `components`. In a square design the p-value is the two-sided F test of the init
    against the data-order mean square, exact under the normal model."""
    del noise_var
    ms = mean_squares(cells)
    observed = (np.array(ms.init), np.array(ms.order), np.array(ms.residual))
    init, order = _raw_variances(observed, ms)
    drawn_init, drawn_order = _raw_variances(_pivot_draws(ms, seed, draws), ms)
    difference = drawn_init - drawn_order
    two_sided = 2 * min(float(np.mean(difference <= 0)), float(np.mean(difference >= 0)))
    return SourceComparison(column, float(init - order), min(max(two_sided, 1 / draws), 1.0))


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> tuple[list[float], list[bool]]:
    """Holm's step-down correction: the adjusted p-values (in the given order) and which
    hypotheses are rejected at family-wise `alpha` (adjusted p <= alpha)."""
    count = len(p_values)
    adjusted = [0.0] * count
    running = 0.0
    for rank, index in enumerate(sorted(range(count), key=lambda i: p_values[i])):
        running = max(running, min((count - rank) * p_values[index], 1.0))
        adjusted[index] = running
    return adjusted, [p <= alpha for p in adjusted]
