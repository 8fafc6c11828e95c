"""The analyses past the paper's, as tables in results/: which seed matters (variance
components of a factorial design), what picking by validation accuracy buys (best-of-n curves),
and when seeds part ways (trajectories)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from seedvar.config import Config
from seedvar.declared import primary_column
from seedvar.seeds.finished import FinishedSeed
from seedvar.stats.best_of_n import best_of_n_table
from seedvar.stats.bounds import seed_variance
from seedvar.stats.components import compare_sources, components

JOINT = "seed (init and data order together)"
OURS = "ours"
COMPONENT_COLUMNS = [
    "column",
    "source",
    "std",
    "std_low",
    "std_high",
    "share",
    "note",
    "init_minus_order_var",  # factorial: ANOVA's var_init - var_order, not floored
    "init_vs_order_p",  # factorial: its two-sided p, before Holm's correction
]
BEST_OF_N_COLUMNS = [
    "series",
    "runs",
    "pool",
    "column",
    "curve",
    "n",
    "mean",
    "se",
    "subset_std",
    "tied",
    "tied_values",
    "low",
    "high",
]


def write_further(
    config: Config,
    table: pd.DataFrame,
    runs_dir: Path,
    results_dir: Path,
    noise: Mapping[str, float],
    headline: Sequence[str],
    reference: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """results/best_of_n.csv (ours, and the published reference's where it has the columns),
    trajectory_seeds.csv and trajectories.csv; returns the components table (`noise`: each
    column's paired noise variance), its notes as reasons for the report layer to word."""
    base = primary_column(config.task)
    if config.factorial.cells:
        diagonal = diagonal_seeds(config)
        pool = f"over the {len(diagonal)} diagonal cells (no shared init or data seed)"
        ours = best_of_n_curves(
            table[table["seed"].isin(diagonal)], base, list(headline), OURS, pool
        )
    else:
        ours = best_of_n_curves(table, base, list(headline), OURS, f"over all {len(table)} seeds")
    curves = [ours]
    if reference is not None and config.reference and base in reference:
        shared = [c for c in headline if c in reference]
        name = config.reference.name
        curves.append(
            best_of_n_curves(reference, base, shared, name, f"over all {len(reference)} runs")
        )
    pd.concat(curves).to_csv(results_dir / "best_of_n.csv", index=False)
    per_seed = trajectories(runs_dir, config.seeds, list(headline))
    per_seed.to_csv(results_dir / "trajectory_seeds.csv", index=False)
    trajectory_spread(per_seed).to_csv(results_dir / "trajectories.csv", index=False)
    return component_table(config, table, [c for c in table.columns if c in noise], noise)


def diagonal_seeds(config: Config) -> list[int]:
    """The seed jobs of a factorial design that share no init or data-order seed with each
    other: the i-th init seed with the i-th data-order seed, min(n_init, n_data) of them."""
    factorial = config.factorial
    inits, datas = factorial.init_seeds or [], factorial.data_seeds or []
    return [
        job
        for job, (init, data) in enumerate(factorial.cells)
        if inits.index(init) == datas.index(data)
    ]


def component_table(
    config: Config, table: pd.DataFrame, columns: list[str], noise: Mapping[str, float]
) -> pd.DataFrame:
    """Per column, its seed std split into init, data order and interaction (a factorial
    design, with the test of init against data order), or the joint seed's whole (the paper's
    design), each with its LEVEL interval and a note (a reason) where a value is not
    identified; `noise`: each column's paired noise variance."""
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
                "note": row.note,
            }
            for row in seed_variance(table, noise, columns)
        ]
        return pd.DataFrame(rows, columns=COMPONENT_COLUMNS)
    shape = config.factorial.shape
    ordered = table.sort_values("seed")  # job k: init k // n_data, data order k % n_data
    rows = []
    for column in columns:
        values = ordered[column].to_numpy(dtype=float).reshape(shape)
        noise_var = float(noise[column])
        comparison = compare_sources(column, values, noise_var)
        tested = {
            "init_minus_order_var": comparison.difference_var,
            "init_vs_order_p": comparison.p_value,
        }
        found = components(column, values, noise_var)
        rows += [asdict(c) | tested | {"note": c.note} for c in found]
    return pd.DataFrame(rows, columns=COMPONENT_COLUMNS)


def best_of_n_curves(
    table: pd.DataFrame, by: str, headline: list[str], runs: str, pool: str
) -> pd.DataFrame:
    """Best-of-n curves of the in-distribution column `by` and of each headline diagnostic
    column (its best, and the seed chosen by `by`) of one table of runs (`runs`: ours, or the
    reference's name; `pool`: which of them, in words), with a `series` name per curve for the
    plots and a band of one bootstrap standard error."""
    curves = best_of_n_table(table, by, headline)
    prefix = "" if runs == OURS else f"{runs} · "
    curves["series"] = prefix + curves["column"] + ": " + curves["curve"]
    curves["runs"], curves["pool"] = runs, pool
    curves["low"], curves["high"] = curves["mean"] - curves["se"], curves["mean"] + curves["se"]
    return curves[BEST_OF_N_COLUMNS]


TRAJECTORY_COLUMNS = ["column", "step", "seeds", "mean", "std", "min", "max"]
PER_SEED_COLUMNS = ["seed", "step", "epoch", "column", "accuracy"]


def trajectories(runs_dir: Path, seeds: list[int], columns: list[str]) -> pd.DataFrame:
    """Per seed, step and column (of `columns`): the accuracy on the diagnostic subsample
    during training, from the seeds trained with a trajectory."""
    frames = []
    for seed in seeds:
        found = FinishedSeed(runs_dir, seed).trajectory()
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
