"""Evaluation noise that respects how a diagnostic set was built (pure functions, no I/O).

HANS's examples come from templates, a few per subcase, so they are not independent draws: the
binomial noise p(1-p)/n of a seed's accuracy assumes they are. Here the clusters (templates
where a set has them, else subcases) are resampled instead, with replacement, within the
examples of one column; a seed's noise variance is the variance of its accuracy over the
resamples, and a column's the mean over seeds. A column whose examples hold one cluster has no
cluster noise (None): its binomial noise stands.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

RESAMPLES = 2000


def cluster_noise_var(
    correct: np.ndarray, clusters: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
) -> float | None:
    """Mean over seeds of the bootstrap variance of accuracy, resampling `clusters`.

    `correct`: a seeds x examples matrix of hits; `clusters`: each example's cluster."""
    codes = np.unique(np.asarray(clusters), return_inverse=True)[1]
    n_clusters = int(codes.max()) + 1 if len(codes) else 0
    if n_clusters < 2:
        return None
    sizes = np.bincount(codes, minlength=n_clusters).astype(float)
    hits = np.stack([np.bincount(codes, row, n_clusters) for row in np.asarray(correct, float)])
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(n_clusters, np.full(n_clusters, 1 / n_clusters), size=resamples)
    accuracy = (drawn @ hits.T) / (drawn @ sizes)[:, None]  # resamples x seeds
    return float(accuracy.var(axis=0, ddof=1).mean())


def cluster_of(examples: pd.DataFrame, candidates: list[str]) -> str | None:
    """The first of `candidates` (finest first, e.g. template, subcase) that the examples hold
    values of, or None."""
    return next((c for c in candidates if c in examples and examples[c].notna().any()), None)
