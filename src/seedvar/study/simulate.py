"""Simulated studies with a known truth, to measure the verdict's error rates (pure: no I/O).

Signal detection on a shared test set: every seed answers the same examples. Example j of
gold label y (0 or 1) gives seed s the evidence x = (y - 1/2) d_s + u_j + e_sj, and the seed
answers 1 when x > c_s. `u_j` is the example's own pull, shared by every seed (examples many
seeds get right or wrong together), `e_sj` the seed x example part, d_s the seed's
sensitivity (how well it generalizes) and c_s its criterion (how readily it answers label 1).
Seeds that differ only in c_s differ in how often they answer a label, not in how they
generalize. Seed effects are normal, or Student-t with 3 degrees of freedom (heavy tails),
scaled to the given std. The in-distribution reference set works the same way with its own
sensitivity and no seed effect unless given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from seedvar.metrics import accuracy_of_counts, bias_free_accuracy
from seedvar.study.evidence import as_noise
from seedvar.study.noise import Scored, paired_noise
from seedvar.study.verdict import Design, Noise

REFERENCE, TESTED, BIAS_FREE = "reference", "tested (label 1)", "tested (label 1) [bias-free]"
DESIGN = Design((REFERENCE,), (TESTED,), {REFERENCE: 0.5}, {TESTED: BIAS_FREE})


@dataclass(frozen=True)
class Truth:
    """One kind of study: seeds, examples and the seed effects (std, latent units)."""

    seeds: int = 12
    examples: int = 1000  # per gold label, of the tested set and of the reference set
    sensitivity: float = 1.0  # mean d of the tested set
    sensitivity_std: float = 0.0  # seeds generalizing differently
    criterion: float = 0.5  # mean c: how reluctantly seeds answer label 1
    criterion_std: float = 0.0  # seeds answering label 1 more or less often
    reference_sensitivity: float = 2.0  # the in-distribution set: about 84 % accuracy
    shared: float = 0.7  # std of the examples' own pull, shared by every seed
    heavy_tails: bool = False


def _effects(rng: np.random.Generator, truth: Truth, std: float) -> np.ndarray:
    if truth.heavy_tails:
        return std * rng.standard_t(3, truth.seeds) / np.sqrt(3.0)
    return rng.normal(0.0, std, truth.seeds)


def _answers(
    rng: np.random.Generator, truth: Truth, sensitivity: np.ndarray, criterion: np.ndarray
) -> Scored:
    gold = np.repeat([0, 1], truth.examples)
    pull = rng.normal(0.0, truth.shared, len(gold))
    own = rng.normal(0.0, 1.0, (truth.seeds, len(gold)))
    evidence = (gold - 0.5)[None, :] * sensitivity[:, None] + pull[None, :] + own
    return Scored(gold, (evidence > criterion[:, None]).astype(int), 2)


def study(
    truth: Truth, seed: int, resamples: int = 200
) -> tuple[pd.DataFrame, dict[str, Noise], Design]:
    """One simulated study: its seeds table (the reference's accuracy, the tested set's
    accuracy on label 1 and its bias-free accuracy), their noise, and the design."""
    rng = np.random.default_rng(seed)
    sensitivity = truth.sensitivity + _effects(rng, truth, truth.sensitivity_std)
    criterion = truth.criterion + _effects(rng, truth, truth.criterion_std)
    tested = _answers(rng, truth, sensitivity, criterion)
    flat = np.zeros(truth.seeds)
    reference = _answers(rng, truth, flat + truth.reference_sensitivity, flat)
    found = {
        REFERENCE: paired_noise(reference, accuracy_of_counts, resamples, seed),
        TESTED: paired_noise(tested.subset(tested.gold == 1), accuracy_of_counts, resamples, seed),
        BIAS_FREE: paired_noise(tested, bias_free_accuracy, resamples, seed),
    }
    table = pd.DataFrame({name: f.values for name, f in found.items()})
    noise = {name: as_noise(f) for name, f in found.items()}
    return table, noise, DESIGN
