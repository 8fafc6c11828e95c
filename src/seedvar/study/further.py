"""The analyses past the paper's, as tables in results/: which seed matters (variance
components of a factorial design), what picking by validation accuracy buys (best-of-n curves),
and when seeds part ways (trajectories)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from seedvar.config import Config
from seedvar.declared import primary_column
from seedvar.study.best_of_n import best_of_n_table
from seedvar.study.components import components
from seedvar.study.job import SeedJob
from seedvar.study.verdict import column_noise_var, seed_variance

JOINT = "seed (init and data order together)"
OURS = "ours"
COMPONENT_COLUMNS = ["column", "source", "std", "std_low", "std_high", "share"]


@dataclass(frozen=True)
class Noise:
    """What each column's evaluation noise comes from: its size (binomial) and, where its set
    declares clusters, the cluster bootstrap's variance."""

    sizes: Mapping[str, int]
    clustered: Mapping[str, float]


def write_further(
    config: Config,
    table: pd.DataFrame,
    runs_dir: Path,
    results_dir: Path,
    noise: Noise,
    headline: Sequence[str],
    reference: pd.DataFrame | None = None,
) -> None:
    """results/components.csv, best_of_n.csv (ours, and the published reference's where it
    has the columns), trajectory_seeds.csv and trajectories.csv."""
    measured = [c for c in table.columns if c in noise.sizes]
    component_table(config, table, measured, noise).to_csv(
        results_dir / "components.csv", index=False
    )
    base = primary_column(config.task)
    curves = [best_of_n_curves(table, base, list(headline), OURS)]
    if reference is not None and config.reference and base in reference:
        shared = [c for c in headline if c in reference]
        curves.append(best_of_n_curves(reference, base, shared, config.reference.name))
    pd.concat(curves).to_csv(results_dir / "best_of_n.csv", index=False)
    per_seed = trajectories(runs_dir, config.seeds, list(headline))
    per_seed.to_csv(results_dir / "trajectory_seeds.csv", index=False)
    trajectory_spread(per_seed).to_csv(results_dir / "trajectories.csv", index=False)


def component_table(
    config: Config, table: pd.DataFrame, columns: list[str], noise: Noise
) -> pd.DataFrame:
    """Per column, its seed std split into init, data order and interaction (a factorial
    design), or the joint seed's whole (the paper's design), each with its LEVEL interval."""
    cells = config.factorial.cells
    if not cells:
        rows = [
            {
                "column": row.column,
                "source": JOINT,
                "std": row.seed_std,
                "std_low": row.seed_std_low,
                "std_high": row.seed_std_high,
                "share": 1.0 if row.seed_std else None,
            }
            for row in seed_variance(table, noise.sizes, columns, noise.clustered)
        ]
        return pd.DataFrame(rows, columns=COMPONENT_COLUMNS)
    shape = config.factorial.shape
    ordered = table.sort_values("seed")
    rows = []
    for column in columns:
        values = ordered[column].to_numpy(dtype=float)
        noise_var = column_noise_var(values, noise.sizes[column], column, noise.clustered)
        rows += [asdict(c) for c in components(column, values.reshape(shape), noise_var)]
    return pd.DataFrame(rows)


def best_of_n_curves(table: pd.DataFrame, by: str, headline: list[str], runs: str) -> pd.DataFrame:
    """Best-of-n curves of the in-distribution column `by` and of each headline diagnostic
    column (its best, and the seed chosen by `by`) of one table of runs (`runs`: ours, or the
    reference's name), with a `series` name per curve for the plots and a band of one std
    across subsets."""
    curves = best_of_n_table(table, by, headline)
    prefix = "" if runs == OURS else f"{runs} · "
    curves["series"] = prefix + curves["column"] + ": " + curves["curve"]
    curves["runs"] = runs
    curves["low"], curves["high"] = curves["mean"] - curves["std"], curves["mean"] + curves["std"]
    return curves[["series", "runs", "column", "curve", "n", "mean", "std", "low", "high"]]


TRAJECTORY_COLUMNS = ["column", "step", "seeds", "mean", "std", "min", "max"]
PER_SEED_COLUMNS = ["seed", "step", "epoch", "column", "accuracy"]


def trajectories(runs_dir: Path, seeds: list[int], columns: list[str]) -> pd.DataFrame:
    """Per seed, step and column (of `columns`): the accuracy on the diagnostic subsample
    during training, from the seeds trained with a trajectory."""
    frames = []
    for seed in seeds:
        found = SeedJob(runs_dir, seed).finished_trajectory()
        if found is not None:
            frames.append(found[found["column"].isin(columns)].assign(seed=seed))
    if not frames:
        return pd.DataFrame(columns=PER_SEED_COLUMNS)
    return pd.concat(frames)[PER_SEED_COLUMNS]


def trajectory_spread(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per column and step: how many seeds, and their mean, std (ddof 1), min and max."""
    if per_seed.empty:
        return pd.DataFrame(columns=TRAJECTORY_COLUMNS)
    grouped = per_seed.groupby(["column", "step"], sort=False)["accuracy"]
    spread = grouped.agg(seeds="count", mean="mean", std="std", min="min", max="max")
    return spread.reset_index()[TRAJECTORY_COLUMNS]
