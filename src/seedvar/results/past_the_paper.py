"""The analyses past the paper's, as tables in results/: which seed matters (variance
components), what picking by validation buys (best of n), when seeds part ways (trajectories)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
# factorial only: ANOVA's var_init - var_order (not floored) and its two-sided p (before Holm)
_JOINT_COLUMNS = ["column", "source", "std", "std_low", "std_high", "share", "note"]
COMPONENT_COLUMNS = [*_JOINT_COLUMNS, "init_minus_order_var", "init_vs_order_p"]
BEST_OF_N_COLUMNS = ["series", "runs", "pool", "column", "curve", "n", "mean", "se", "subset_std"]
BEST_OF_N_COLUMNS += ["tied", "tied_values", "low", "high"]
TRAJECTORY_COLUMNS = ["column", "step", "seeds", "mean", "std", "min", "max"]
PER_SEED_COLUMNS = ["seed", "step", "epoch", "column", "accuracy"]


def write_further(
    config: Config,
    table: pd.DataFrame,
    runs_dir: Path,
    results_dir: Path,
    noise: Mapping[str, float],
    headline: Sequence[str],
    reference: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """results/best_of_n.csv and the trajectories; returns the components table to word."""
    base, headline = primary_column(config.task), list(headline)
    pool, ours = f"over all {len(table)} seeds", table
    if config.factorial.cells:
        diagonal = diagonal_seeds(config)
        pool = f"over the {len(diagonal)} diagonal cells (no shared init or data seed)"
        ours = table[table["seed"].isin(diagonal)]
    curves = [best_of_n_curves(ours, base, headline, OURS, pool)]
    if reference is not None and config.reference and base in reference:
        shared, pool = [c for c in headline if c in reference], f"over all {len(reference)} runs"
        curves.append(best_of_n_curves(reference, base, shared, config.reference.name, pool))
    pd.concat(curves).to_csv(results_dir / "best_of_n.csv", index=False)
    per_seed = trajectories(runs_dir, config.seeds, headline)
    per_seed.to_csv(results_dir / "trajectory_seeds.csv", index=False)
    trajectory_spread(per_seed).to_csv(results_dir / "trajectories.csv", index=False)
    return component_table(config, table, [c for c in table.columns if c in noise], noise)


def diagonal_seeds(config: Config) -> list[int]:
    """The seed jobs of a factorial design that share no init or data-order seed with each
    other: the i-th init seed with the i-th data-order seed, min(n_init, n_data) of them."""
    inits, datas = config.factorial.init_seeds or [], config.factorial.data_seeds or []
    cells = enumerate(config.factorial.cells)
    return [job for job, (init, data) in cells if inits.index(init) == datas.index(data)]


def component_table(
    config: Config, table: pd.DataFrame, columns: list[str], noise: Mapping[str, float]
) -> pd.DataFrame:
    """Per column, its seed std by source (a factorial design) or the joint seed's."""
    rows: list[dict] = []
    if not config.factorial.cells:
        for row in seed_variance(table, noise, columns):
            share = 1.0 if row.seed_std else None
            found = (row.column, JOINT, row.seed_std, row.seed_std_low, row.seed_std_high, share)
            rows.append(dict(zip(_JOINT_COLUMNS, (*found, row.note), strict=True)))
        return pd.DataFrame(rows, columns=COMPONENT_COLUMNS)
    ordered = table.sort_values("seed")  # job k: init k // n_data, data order k % n_data
    for column in columns:
        values = ordered[column].to_numpy(dtype=float).reshape(config.factorial.shape)
        compared = compare_sources(column, values)
        tested = {"init_minus_order_var": compared.difference_var}
        tested["init_vs_order_p"] = compared.p_value
        rows += [vars(c) | tested for c in components(column, values, float(noise[column]))]
    return pd.DataFrame(rows, columns=COMPONENT_COLUMNS)


def best_of_n_curves(
    table: pd.DataFrame, by: str, headline: list[str], runs: str, pool: str
) -> pd.DataFrame:
    """Best-of-n curves of one table of runs (`runs`: ours or the reference's name)."""
    curves = best_of_n_table(table, by, headline)
    prefix = "" if runs == OURS else f"{runs} · "
    curves["series"] = prefix + curves["column"] + ": " + curves["curve"]
    curves["runs"], curves["pool"] = runs, pool
    curves["low"], curves["high"] = curves["mean"] - curves["se"], curves["mean"] + curves["se"]
    return curves[BEST_OF_N_COLUMNS]


def trajectories(runs_dir: Path, seeds: list[int], columns: list[str]) -> pd.DataFrame:
    """Per seed, step and column: the accuracy on the diagnostic subsample during training."""
    found = [(seed, FinishedSeed(runs_dir, seed).trajectory()) for seed in seeds]
    frames = [f[f["column"].isin(columns)].assign(seed=s) for s, f in found if f is not None]
    return pd.concat(frames)[PER_SEED_COLUMNS] if frames else pd.DataFrame(columns=PER_SEED_COLUMNS)


def trajectory_spread(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per column and step: how many seeds, and their mean, std (ddof 1), min and max."""
    if per_seed.empty:
        return pd.DataFrame(columns=TRAJECTORY_COLUMNS)
    grouped = per_seed.groupby(["column", "step"], sort=False)["accuracy"]
    spread = grouped.agg(seeds="count", mean="mean", std="std", min="min", max="max")
    return spread.reset_index()[TRAJECTORY_COLUMNS]
