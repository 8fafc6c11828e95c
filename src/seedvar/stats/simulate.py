"""Simulated studies with a known truth, to measure the verdict's error rates (pure: no I/O).

Signal detection on a shared test set: example j of gold label y (0 or 1) gives seed s the
evidence x = (y - 1/2) d_s + u_j + e_sj and the seed answers 1 when x > c_s (x is its score):
u_j is the example's pull shared by every seed, e_sj the seed x example part (std 1 on label 0,
`signal_std` on label 1; normal or Gumbel), d_s the seed's sensitivity (how it generalizes),
c_s its criterion (how readily it answers label 1). Seed effects are normal or Student-t(3),
scaled to the given std. The reference set has its own sensitivity and no seed effect.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from seedvar.metrics import accuracy_of_counts, bias_free_accuracy
from seedvar.stats.noise import Noise, Scored, paired_auc_noise, paired_noise
from seedvar.stats.verdict import Design

REFERENCE, TESTED = "reference", "tested (label 1)"
BIAS_FREE, EQUAL_VARIANCE = f"{TESTED} [AUC]", f"{TESTED} [bias-free]"
DESIGN = Design((REFERENCE,), (TESTED,), {REFERENCE: 0.5}, {TESTED: BIAS_FREE}, "AUC")
# the same study decided on the equal-variance measure, as a table of rates must be
EQUAL_DESIGN = replace(DESIGN, bias_free={TESTED: EQUAL_VARIANCE}, measure="equal-variance")


@dataclass(frozen=True)
class Truth:
    """One kind of study: seeds, examples and the seed effects (std, latent units)."""

    seeds: int = 12
    examples: int = 1000  # per gold label of the tested set
    sensitivity: float = 1.0  # mean d of the tested set
    sensitivity_std: float = 0.0  # seeds generalizing differently
    criterion: float = 0.5  # mean c: how reluctantly seeds answer label 1
    criterion_std: float = 0.0  # seeds answering label 1 more or less often
    reference_sensitivity: float = 2.0  # the in-distribution set: about 84 % accuracy
    reference_examples: int = 5000  # per gold label (MNLI-m: 9,815 pairs)
    shared: float = 0.7  # std of the examples' own pull, shared by every seed
    heavy_tails: bool = False
    signal_std: float = 1.0  # std of label 1's own evidence (label 0's: 1)
    evidence: Literal["normal", "gumbel"] = "normal"


def _effects(rng: np.random.Generator, truth: Truth, std: float) -> np.ndarray:
    if truth.heavy_tails:
        return std * rng.standard_t(3, truth.seeds) / np.sqrt(3.0)
    return rng.normal(0.0, std, truth.seeds)


def _answers(
    rng: np.random.Generator,
    truth: Truth,
    sensitivity: np.ndarray,
    criterion: np.ndarray,
    examples: int,
) -> Scored:
    gold = np.repeat([0, 1], examples)
    pull = rng.normal(0.0, truth.shared, len(gold))
    shape = (len(sensitivity), len(gold))
    if truth.evidence == "gumbel":  # standardized: mean 0, std 1
        own = (rng.gumbel(0.0, 1.0, shape) - np.euler_gamma) * np.sqrt(6) / np.pi
    else:
        own = rng.normal(0.0, 1.0, shape)
    own *= np.where(gold == 1, truth.signal_std, 1.0)[None, :]
    evidence = (gold - 0.5)[None, :] * sensitivity[:, None] + pull[None, :] + own
    scores = np.stack([-evidence, evidence], axis=-1)
    return Scored(gold, (evidence > criterion[:, None]).astype(int), 2, scores=scores)


def study(
    truth: Truth, seed: int, resamples: int = 200
) -> tuple[pd.DataFrame, dict[str, Noise], Design]:
    """One simulated study: its seeds table, each column's noise and the design (on the AUC)."""
    rng = np.random.default_rng(seed)
    sensitivity = truth.sensitivity + _effects(rng, truth, truth.sensitivity_std)
    criterion = truth.criterion + _effects(rng, truth, truth.criterion_std)
    tested = _answers(rng, truth, sensitivity, criterion, truth.examples)
    flat = np.zeros(truth.seeds)
    equal = Truth(seeds=truth.seeds, shared=truth.shared)  # equal-variance normal evidence
    sensitivities = flat + truth.reference_sensitivity
    reference = _answers(rng, equal, sensitivities, flat, truth.reference_examples)
    found = {
        REFERENCE: paired_noise(reference, accuracy_of_counts, resamples, seed),
        TESTED: paired_noise(tested.subset(tested.gold == 1), accuracy_of_counts, resamples, seed),
        BIAS_FREE: paired_auc_noise(tested, resamples, seed),
        EQUAL_VARIANCE: paired_noise(tested, bias_free_accuracy, resamples, seed),
    }
    return pd.DataFrame({name: f.values for name, f in found.items()}), found, DESIGN


@dataclass(frozen=True)
class Layout:
    """A diagnostic set written from templates: subcases of one gold label each (half of each
    label), templates within each subcase, and seed effects that live at each level (latent
    units): on the heuristic (main), on a subcase, on a template."""

    seeds: int = 12
    subcases: int = 5  # per gold label
    templates: int = 2  # per subcase
    examples: int = 100  # per template
    sensitivity: float = 0.5
    main_std: float = 0.0  # seeds differing on the heuristic
    subcase_std: float = 0.0  # seed x subcase
    template_std: float = 0.0  # seed x template
    reference_std: float = 0.0  # the reference set's own seed effect on sensitivity


def layout_study(
    layout: Layout, seed: int, resamples: int = 100, clustered: bool = True
) -> tuple[pd.DataFrame, dict[str, Noise], Scored, np.ndarray]:
    """One simulated study on a templated set: the seeds table (reference, tested, its AUC),
    each column's noise (over templates within subcases, or examples where not `clustered`),
    the tested set's answers and each example's subcase."""
    rng = np.random.default_rng(seed)
    k, units = layout.seeds, 2 * layout.subcases
    subcase = np.repeat(np.arange(units), layout.templates * layout.examples)
    template = np.repeat(np.arange(units * layout.templates), layout.examples)
    gold = (subcase >= layout.subcases).astype(int)
    effect = (
        layout.sensitivity
        + rng.normal(0.0, layout.main_std, (k, 1))
        + rng.normal(0.0, layout.subcase_std, (k, units))[:, subcase]
        + rng.normal(0.0, layout.template_std, (k, units * layout.templates))[:, template]
    )
    pull = rng.normal(0.0, 0.7, len(gold))
    evidence = (gold - 0.5)[None, :] * effect + pull[None, :] + rng.normal(0.0, 1.0, effect.shape)
    scores = np.stack([-evidence, evidence], axis=-1)
    answers = (evidence > 0).astype(int)
    clusters = template if clustered else None
    tested = Scored(gold, answers, 2, clusters, subcase, scores, ("templates", "subcases"))
    sensitivities = 2.0 + rng.normal(0.0, layout.reference_std, k)
    flat = np.zeros(k)
    reference = _answers(rng, Truth(seeds=k), sensitivities, flat, 2000)
    found = {
        REFERENCE: paired_noise(reference, accuracy_of_counts, resamples, seed),
        TESTED: paired_noise(tested.subset(gold == 1), accuracy_of_counts, resamples, seed),
        BIAS_FREE: paired_auc_noise(tested, resamples, seed),
    }
    table = pd.DataFrame({name: f.values for name, f in found.items()})
    return table, found, tested, subcase
