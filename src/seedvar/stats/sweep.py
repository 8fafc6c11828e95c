"""The verdict over a sweep's configurations (pure functions, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from seedvar.stats.bounds import ALPHA
from seedvar.stats.heuristic import HeuristicTest
from seedvar.stats.noise import Noise
from seedvar.stats.reason import Reason
from seedvar.stats.verdict import OUTCOMES, Design, Outcome, Verdict, learned, verdict


@dataclass(frozen=True)
class SweepVerdict:
    """Outcome over several configurations; those that did not learn the task are ignored."""

    outcome: Outcome
    reason: Reason
    verdicts: dict[str, Verdict]  # configurations that learned the task
    ignored: tuple[str, ...]  # configurations not above the majority class


def sweep_verdict(
    configurations: Mapping[str, pd.DataFrame],
    noise: Mapping[str, Mapping[str, Noise]],
    design: Design,
    prediction_shares: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    alpha: float = ALPHA,
    heuristics: Mapping[str, Mapping[str, HeuristicTest]] | None = None,
) -> SweepVerdict:
    """`verdict` per configuration that learned the task, each at alpha / their number (so
    that those said to reproduce hold family-wise); the sweep reproduces, or does not, only
    when every learned configuration does."""
    if not configurations:
        raise ValueError("a sweep needs at least one configuration")
    shares, tested = prediction_shares or {}, heuristics or {}
    ignored = tuple(
        name
        for name, table in configurations.items()
        if learned(table, noise[name], design, alpha) is not None
    )
    kept = [name for name in configurations if name not in ignored]
    each = alpha / max(len(kept), 1)
    verdicts = {
        name: verdict(
            configurations[name], noise[name], design, shares.get(name), each, tested.get(name)
        )
        for name in kept
    }
    counts = {o: [n for n, v in verdicts.items() if v.outcome == o] for o in OUTCOMES}
    numbers = {"total": len(verdicts), "ignored": len(ignored), "counts": counts, "alpha": alpha}
    every: dict[Outcome, str] = {"reproduces": "all reproduce", "does not reproduce": "none do"}
    for outcome, rule in every.items():
        if verdicts and len(counts[outcome]) == len(verdicts):
            return SweepVerdict(outcome, Reason(rule, numbers), verdicts, ignored)
    rule = "mixed" if verdicts else "none learned"
    return SweepVerdict("inconclusive", Reason(rule, numbers), verdicts, ignored)
