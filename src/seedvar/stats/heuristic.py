"""Do the seeds differ on a heuristic, or only on its subcases? (pure functions, no I/O)

A column's AUC over a heuristic (HANS's Subseq: its entailed against its non-entailed pairs) is
the mean of its cells, the AUC of each first-label subcase's pairs against each other-label
subcase's (exactly so with subcases of equal size). Seeds x first-label subcases x other-label
subcases is a crossed design. With the subcases a sample of the heuristic's (random), the claim
that seeds differ on the heuristic is a seed main effect, tested against the seed x subcase
interaction by a quasi-F (Cornfield-Tukey, Satterthwaite's df): the templates within a subcase,
and the evaluation noise, sit inside that interaction. The interaction has its own test: its
mean square against what the evaluation noise alone gives, from the paired bootstrap of the
cells over the set's units (templates within subcases, else examples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from seedvar.stats.noise import RESAMPLES, Scored, resample_weights, weighted_auc


@dataclass(frozen=True)
class HeuristicTest:
    """A seed main effect on a heuristic's AUC against the seed x subcase interaction, and the
    interaction against the evaluation noise (AUC units; p None where a test has no df)."""

    subcases: tuple[int, int]  # first-label subcases, other-label subcases
    seeds: int
    main_f: float | None
    main_df: tuple[float, float] | None
    main_p: float | None
    main_sd: float  # seed main effect's sd, net of the interaction (0 where negative)
    interaction_sd: float  # sd of a seed's deviation on one subcase, net of the noise
    interaction_ratio: float | None  # interaction mean square / the noise's expectation of it
    interaction_df: float | None  # the noise's effective df (Satterthwaite, from the bootstrap)
    interaction_p: float | None


@dataclass(frozen=True)
class _Squares:
    """Sums of squares and df of the seed terms of a seeds x A x B layout."""

    seed: tuple[float, int]
    by_first: tuple[float, int]  # seed x first-label subcase
    by_other: tuple[float, int]  # seed x other-label subcase
    residual: tuple[float, int]  # seed x cell


def cell_aucs(scored: Scored, subcase: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Resamples x seeds x A x B: each cell's AUC of the first gold label's score (scored: two
    gold labels; `weights`: resamples x examples)."""
    first = int(np.unique(scored.gold)[0])
    positive = scored.gold == first
    a_units, b_units = (np.unique(subcase[positive == side]) for side in (True, False))
    out = np.empty((len(weights), len(scored.predicted), len(a_units), len(b_units)))
    for i, a in enumerate(a_units):
        for j, b in enumerate(b_units):
            cell = (positive & (subcase == a)) | (~positive & (subcase == b))
            for s in range(len(scored.predicted)):
                score = scored.scores[s, cell, first]  # type: ignore[index]
                out[:, s, i, j] = weighted_auc(score, positive[cell], weights[:, cell])
    return out


def _squares(y: np.ndarray) -> _Squares:
    """The seed terms of a three-way layout with one value per cell (seeds x A x B)."""
    k, a, b = y.shape
    mean = y.mean()
    seed, first, other = y.mean((1, 2)), y.mean((0, 2)), y.mean((0, 1))
    seed_first, seed_other, cell = y.mean(2), y.mean(1), y.mean(0)
    by_first = seed_first - seed[:, None] - first[None, :] + mean
    by_other = seed_other - seed[:, None] - other[None, :] + mean
    residual = (
        y
        - seed_first[:, :, None]
        - seed_other[:, None, :]
        - cell[None]
        + seed[:, None, None]
        + first[None, :, None]
        + other[None, None, :]
        - mean
    )
    return _Squares(
        (a * b * float(((seed - mean) ** 2).sum()), k - 1),
        (b * float((by_first**2).sum()), (k - 1) * (a - 1)),
        (a * float((by_other**2).sum()), (k - 1) * (b - 1)),
        (float((residual**2).sum()), (k - 1) * (a - 1) * (b - 1)),
    )


def _mean_square(term: tuple[float, int]) -> float:
    return term[0] / term[1] if term[1] > 0 else 0.0


def _satterthwaite(terms: list[tuple[float, int]]) -> float:
    """The df of a sum of mean squares."""
    used = [(_mean_square(t), t[1]) for t in terms if t[1] > 0]
    spread = sum(square**2 / df for square, df in used)
    return sum(square for square, _ in used) ** 2 / spread if spread > 0 else 0.0


def main_effect(y: np.ndarray) -> tuple[float | None, tuple[float, float] | None, float | None]:
    """Quasi-F of the seed main effect over the seed x subcase interaction (Cornfield-Tukey:
    (MS seed + MS residual) / (MS seed x A + MS seed x B)), its Satterthwaite df and p."""
    found = _squares(y)
    numerator = [found.seed, found.residual]
    denominator = [found.by_first, found.by_other]
    bottom = sum(_mean_square(t) for t in denominator)
    if found.seed[1] < 1 or not any(t[1] for t in denominator) or bottom <= 0:
        return None, None, None
    f = sum(_mean_square(t) for t in numerator) / bottom
    df = (_satterthwaite(numerator), _satterthwaite(denominator))
    return f, df, float(stats.f.sf(f, *df))


def _interaction(found: _Squares, noise: _Squares, a: int, b: int) -> float:
    """Variance of a seed's deviation on one cell from the interaction, net of the noise's
    share of each term (seed x A per first-label subcase, seed x B per other-label one)."""
    net = 0.0
    for term, expected, size in (
        (found.by_first, noise.by_first, b),
        (found.by_other, noise.by_other, a),
    ):
        if term[1] > 0:
            net += max(term[0] - expected[0], 0.0) / (term[1] * size)
    return net


def heuristic_test(
    scored: Scored, subcase: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
) -> HeuristicTest:
    """`HeuristicTest` of one column's scope: `scored` (two gold labels, scores) and each
    example's subcase; the noise resamples `scored`'s units within its strata."""
    observed = cell_aucs(scored, subcase, np.ones((1, len(scored.gold))))[0]
    draws = cell_aucs(scored, subcase, resample_weights(scored, resamples, seed))
    return cells_test(observed, draws - observed[None])


def cells_test(observed: np.ndarray, noise: np.ndarray | None = None) -> HeuristicTest:
    """`HeuristicTest` of a seeds x A x B table of cell values; `noise`: draws of their
    evaluation noise (resamples x seeds x A x B), without which the interaction is untested
    and its sd includes the noise."""
    k, a, b = observed.shape
    found = _squares(observed)
    main_f, main_df, main_p = main_effect(observed) if k >= 2 else (None, None, None)
    ms = [_mean_square(t) for t in (found.seed, found.residual, found.by_first, found.by_other)]
    main = (ms[0] + ms[1] - ms[2] - ms[3]) / (a * b)
    deviations = [_squares(d) for d in (np.zeros((1, *observed.shape)) if noise is None else noise)]
    expected_of = {
        term: (float(np.mean([getattr(d, term)[0] for d in deviations])), getattr(found, term)[1])
        for term in ("seed", "by_first", "by_other", "residual")
    }
    interaction_ss = found.by_first[0] + found.by_other[0]
    noise_ss = np.array([d.by_first[0] + d.by_other[0] for d in deviations])
    ratio = p = effective = None
    expected = float(noise_ss.mean())
    if found.by_first[1] + found.by_other[1] > 0 and expected > 0:
        ratio = interaction_ss / expected
        effective = 2 * expected**2 / float(noise_ss.var(ddof=1))
        p = float(stats.chi2.sf(ratio * effective, effective))
    main_sd = float(np.sqrt(max(main, 0.0)))
    interaction_sd = float(np.sqrt(_interaction(found, _Squares(**expected_of), a, b)))
    return HeuristicTest(
        (a, b), k, main_f, main_df, main_p, main_sd, interaction_sd, ratio, effective, p
    )
