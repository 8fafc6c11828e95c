"""The report's plots of the analyses past the paper's: best of n, components, trajectories."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from seedvar.results.past_the_paper import OURS


def panels(
    count: int, width: float = 4.2, height: float = 3.8, columns: int = 4
) -> tuple[Figure, list]:
    """A figure of `count` panels of `width` x `height` inches, at most `columns` to a row."""
    columns = min(count, columns)
    rows = -(-count // columns)
    size = (width * columns, height * rows)
    figure, axes = plt.subplots(rows, columns, figsize=size, layout="constrained", squeeze=False)
    for axis in axes.flat[count:]:
        axis.set_visible(False)
    return figure, list(axes.flat[:count])


def further_figures(results_dir: Path, headline: list[str]) -> dict[str, Figure]:
    """The three plots, from results/."""
    return {
        "best_of_n": plot_best_of_n(pd.read_csv(results_dir / "best_of_n.csv")),
        "components": plot_components(pd.read_csv(results_dir / "components.csv"), headline),
        "trajectories": plot_trajectories(
            pd.read_csv(results_dir / "trajectory_seeds.csv"), headline
        ),
    }


def plot_best_of_n(curves: pd.DataFrame) -> Figure:
    """(e) One panel per column: its best-of-n curve, and the chosen-by-validation curve."""
    columns = list(dict.fromkeys(curves["column"]))
    figure, axes = panels(len(columns))
    for axis, column in zip(axes, columns, strict=True):
        rows = curves[curves["column"] == column]
        for (runs, curve), frame in rows.groupby(["runs", "curve"], sort=False):
            ours = runs == OURS
            label = curve if ours else f"{runs}: {curve}"
            style = {"marker": "."} if ours else {"linestyle": "--", "linewidth": 1}
            axis.plot(frame["n"], frame["mean"], label=label, **style)
            axis.fill_between(frame["n"], frame["low"], frame["high"], alpha=0.15 if ours else 0.06)
        if (rows["runs"] != OURS).any():
            axis.set_xscale("log")
        axis.set(xlabel="seeds trained (n)", ylabel="expected accuracy")
        axis.set_title(column, fontsize=9)
        axis.legend(fontsize=7)
    return figure


def plot_components(table: pd.DataFrame, headline: list[str]) -> Figure:
    """(f) The std of each source of seed variance, per headline column, with intervals."""
    table = table[table["column"].isin(headline)]
    sources = list(dict.fromkeys(table["source"]))
    figure, axis = plt.subplots(figsize=(max(6, 1.6 * len(headline)), 4), layout="constrained")
    width = 0.8 / max(len(sources), 1)
    positions = np.arange(len(headline))
    for index, source in enumerate(sources):
        rows = table[table["source"] == source].set_index("column").reindex(headline)
        offset = positions - 0.4 + width * (index + 0.5)
        axis.bar(offset, rows["std"], width=width, label=source)
        interval = [rows["std"] - rows["std_low"], rows["std_high"] - rows["std"]]
        axis.errorbar(offset, rows["std"], yerr=interval, fmt="none", ecolor="black", capsize=2)
    axis.set_xticks(positions, headline, rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("seed std (accuracy)")
    axis.legend(fontsize=8)
    return figure


def plot_trajectories(per_seed: pd.DataFrame, headline: list[str]) -> Figure:
    """(g) One panel per headline column: each seed's accuracy over training steps."""
    figure, axes = panels(len(headline))
    for axis, column in zip(axes, headline, strict=True):
        rows = per_seed[per_seed["column"] == column]
        for _, seed in rows.groupby("seed"):
            axis.plot(seed["step"], seed["accuracy"], marker=".", linewidth=1, alpha=0.7)
        if rows.empty:
            axis.text(0.5, 0.5, "trained without a trajectory", ha="center", va="center")
        axis.set(ylim=(-0.03, 1.03), xlabel="training step", ylabel="accuracy (subsample)")
        axis.set_title(column, fontsize=9)
    return figure
