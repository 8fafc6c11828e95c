"""Whether the seeds' spread on a column differs between configurations of one study."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class SpreadDifference:
    """One column's seed std in each configuration and the test of their equality."""

    column: str
    stds: dict[str, float]
    statistic: float | None  # Brown-Forsythe's F; None where untestable
    p: float | None


def spread_differs(column: str, groups: Mapping[str, np.ndarray]) -> SpreadDifference:
    """Brown-Forsythe test (Levene's on the absolute deviations from each configuration's
    median, robust to heavy tails) that the seeds spread alike in every configuration. On the
    observed values, so a configuration's evaluation noise is part of its spread: read a
    difference beside each one's noise std."""
    values = {name: np.asarray(found, float) for name, found in groups.items()}
    stds = {name: float(found.std(ddof=1)) for name, found in values.items()}
    flat = all(np.ptp(found) == 0 for found in values.values())
    if len(values) < 2 or min(map(len, values.values())) < 3 or flat:
        return SpreadDifference(column, stds, None, None)
    found = stats.levene(*values.values(), center="median")
    return SpreadDifference(column, stds, float(found.statistic), float(found.pvalue))
