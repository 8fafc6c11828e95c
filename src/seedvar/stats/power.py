"""How many seeds a study needs to pass a column, or to rule it out (pure functions, no I/O)."""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats

from seedvar.stats.bounds import ALPHA, SEED_FLOOR, STD_FLOOR, STD_RATIO, variance_bound

# Power rule: a study needs enough seeds to detect, with DESIGN_POWER, a headline seed std of
# DESIGN_SEED_STD (5 points; the paper's runs show 2.4 to 12 points on HANS), given the
# in-distribution reference's own measured seed std.
DESIGN_SEED_STD = 0.05
DESIGN_POWER = 0.8
MAX_SEEDS = 200  # beyond this many seeds the power rule gives up
POWER_DRAWS = 2000  # simulated studies behind each power figure
_SHAPES = np.random.default_rng(0).standard_normal((2, POWER_DRAWS, MAX_SEEDS))


def detection_power(
    n_seeds: int,
    reference_seed_var: float,
    reference_noise_var: float,
    tested_noise_var: float,
    comparisons: int,
) -> float:
    """Power of the verdict's bounds to pass a headline column of seed std DESIGN_SEED_STD (normal
    seeds; `tested_noise_var`: the larger of the column's and its counterpart's noise): each
    bound is the variance times a factor of the sample's shape, so over fixed draws of the
    shapes (POWER_DRAWS) the tested variance is integrated exactly. 0 below SEED_FLOOR."""
    if n_seeds < SEED_FLOOR:
        return 0.0
    df, one_sided = n_seeds - 1, ALPHA / comparisons
    reference, tested = _SHAPES[0, :, :n_seeds], _SHAPES[1, :, :n_seeds]
    upper = variance_bound(reference, one_sided)  # of standard normal seeds
    margin = np.maximum(
        STD_RATIO**2 * (reference_seed_var + reference_noise_var) * upper, STD_FLOOR**2
    )
    factor = variance_bound(tested, 1 - one_sided) / tested.var(axis=-1, ddof=1)
    needed = (margin + tested_noise_var) * df / (factor * (DESIGN_SEED_STD**2 + tested_noise_var))
    return float(np.mean(stats.chi2.sf(needed, df)))


@functools.lru_cache(maxsize=256)
def minimum_seeds(
    reference_seed_var: float, reference_noise_var: float, tested_noise_var: float, tests: int
) -> int | None:
    """Fewest seeds (from SEED_FLOOR) reaching DESIGN_POWER, or None when even MAX_SEEDS do not."""
    design = (reference_seed_var, reference_noise_var, tested_noise_var, tests)
    seeds = range(SEED_FLOOR, MAX_SEEDS + 1)
    return next((k for k in seeds if detection_power(k, *design) >= DESIGN_POWER), None)


def seeds_to_rule_out(
    seed_var: float, noise_var: float, margin: float, one_sided: float
) -> int | None:
    """Seeds at which a column's chi-square seed-std upper bound falls below `margin`, or None."""
    seeds = np.arange(SEED_FLOOR, MAX_SEEDS + 1)
    upper = (seed_var + noise_var) * (seeds - 1) / stats.chi2.ppf(one_sided, seeds - 1) - noise_var
    below = seeds[upper < margin**2]
    return int(below[0]) if len(below) else None
