"""Variance components of a factorial seed design (pure functions, no I/O).

A factorial study trains every pair of an init seed (classifier head, dropout) and a
data-order seed, one run per cell. Per column the cells' accuracies follow the two-way
random-effects model y = mu + init + order + interaction + noise, with the evaluation noise's
variance known (binomial, or the template bootstrap's where larger). With one run per cell the
interaction is what remains of the residual mean square after the noise. Point estimates are
ANOVA's (method of moments, negative ones set to 0); the intervals are generalized confidence
intervals (Weerahandi 1993): each mean square's expectation drawn from its chi-square pivot,
the components computed from the draws, truncated at 0, their percentiles taken. They stay
valid for 3 x 3 designs, where Satterthwaite's interval undercovers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
DRAWS = 20_000  # pivot draws per column; fixed RNG seed, so the intervals are reproducible
COMPONENTS = ("init", "data order", "interaction")


@dataclass(frozen=True)
class Component:
    """One source of seed variance in one column: its std and LEVEL interval (accuracy)."""

    column: str
    source: str  # one of COMPONENTS
    std: float
    std_low: float
    std_high: float
    share: float | None  # of the seed variance (components summed); None when all are 0


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


def _variances(
    expected: tuple[np.ndarray, np.ndarray, np.ndarray], squares: MeanSquares, noise_var: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Init, data-order and interaction variance from the expected init, data-order and
    residual mean squares (values or pivot draws), each floored at 0."""
    init, order, residual = expected
    return (
        np.maximum((init - residual) / squares.n_order, 0.0),
        np.maximum((order - residual) / squares.n_init, 0.0),
        np.maximum(residual - noise_var, 0.0),
    )


def components(column: str, cells: np.ndarray, noise_var: float, seed: int = 0) -> list[Component]:
    """Init, data-order and interaction std of one column, with LEVEL intervals.

    `cells[i, j]`: the accuracy of init seed i with data-order seed j; `noise_var`: one run's
    evaluation-noise variance (known, not estimated here)."""
    ms = mean_squares(cells)
    point = _variances(
        (np.array(ms.init), np.array(ms.order), np.array(ms.residual)), ms, noise_var
    )
    rng = np.random.default_rng(seed)

    def pivot(dof: int, mean_square: float) -> np.ndarray:
        """Draws of a mean square's expectation: dof x observed / chi-square(dof)."""
        return dof * mean_square / rng.chisquare(dof, DRAWS)

    draws = (
        pivot(ms.df_init, ms.init),
        pivot(ms.df_order, ms.order),
        pivot(ms.df_residual, ms.residual),
    )
    pivots = _variances(draws, ms, noise_var)
    tail = (1 - LEVEL) / 2 * 100
    total = float(sum(point))
    found = []
    for source, estimate, drawn in zip(COMPONENTS, point, pivots, strict=True):
        low, high = np.percentile(drawn, [tail, 100 - tail])
        found.append(
            Component(
                column=column,
                source=source,
                std=float(np.sqrt(estimate)),
                std_low=float(np.sqrt(low)),
                std_high=float(np.sqrt(high)),
                share=float(estimate) / total if total > 0 else None,
            )
        )
    return found
