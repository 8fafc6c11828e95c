"""The study's analysis plan against its seeds: the look the verdict reads, whether the plan
was declared before every seed trained, and the treated spread against the negative control."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from seedvar.config import Config
from seedvar.data.io import read_table
from seedvar.errors import SeedvarError
from seedvar.seeds.finished import CONFIG, FinishedSeed
from seedvar.stats.plan import ControlTest, Look, exceeds_control, look
from seedvar.stats.verdict import Design


def plan_look(config: Config, runs_dir: Path) -> Look:
    """The look at the study's seeds; seeds whose config.yaml records no plan, or another one,
    trained before this plan was declared."""
    declared = config.plan.model_dump()
    foreign = 0
    for seed in config.seeds:
        recorded = yaml.safe_load((FinishedSeed(runs_dir, seed).folder / CONFIG).read_text())
        foreign += recorded.get("plan") != declared
    return look(len(config.seeds), config.plan.looks, config.plan.alpha, foreign)


def control_tests(config: Config, table: pd.DataFrame, design: Design) -> list[ControlTest]:
    """Each tested column that is not held in, and its counterpart, against the declared
    negative control's seeds.csv (none declared: empty)."""
    if config.plan.control is None:
        return []
    control = read_table(Path(config.plan.control))
    compared = [
        c for t in design.tested if t not in design.held_in for c in (t, design.bias_free[t])
    ]
    missing = [c for c in compared if c not in control]
    if missing:
        raise SeedvarError(
            f"plan.control ({config.plan.control}) has no column {missing[0]!r}; give the "
            "control study's results/seeds.csv, aggregated with this seedvar"
        )
    return [exceeds_control(c, table[c].to_numpy(), control[c].to_numpy()) for c in compared]
