"""The report's part on the analyses past the paper's: best-of-n curves, variance components,
trajectories; a plot each and the sentences that say what the numbers show."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from seedvar.results.past_the_paper import JOINT, OURS
from seedvar.stats.components import ALPHA, holm

CAPTIONS = {
    "best_of_n": (
        "(e) Best of n seeds: the expected accuracy of the best seed on the in-distribution "
        "column and on each headline column, and each headline column's accuracy for the seed "
        "picked by in-distribution accuracy; bands: one standard error (bootstrap over seeds)."
    ),
    "components": (
        "(f) Where the seed variance comes from: per column, the std of each source with its "
        "95 % interval (init and data order in a factorial design; the joint seed otherwise)."
    ),
    "trajectories": (
        "(g) Headline columns during training, on a fixed subsample of each diagnostic set: "
        "one line per seed."
    ),
}


def _panels(count: int) -> tuple[Figure, list]:
    """A figure of `count` panels, at most four to a row."""
    columns = min(count, 4)
    rows = -(-count // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(4.2 * columns, 3.8 * rows), layout="constrained", squeeze=False
    )
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
    figure, axes = _panels(len(columns))
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
        axis.set_xlabel("seeds trained (n)")
        axis.set_ylabel("expected accuracy")
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
        axis.errorbar(
            offset,
            rows["std"],
            yerr=[rows["std"] - rows["std_low"], rows["std_high"] - rows["std"]],
            fmt="none",
            ecolor="black",
            capsize=2,
        )
    axis.set_xticks(positions, headline, rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("seed std (accuracy)")
    axis.legend(fontsize=8)
    return figure


def plot_trajectories(per_seed: pd.DataFrame, headline: list[str]) -> Figure:
    """(g) One panel per headline column: each seed's accuracy over training steps."""
    figure, axes = _panels(len(headline))
    for axis, column in zip(axes, headline, strict=True):
        rows = per_seed[per_seed["column"] == column]
        for _, seed in rows.groupby("seed"):
            axis.plot(seed["step"], seed["accuracy"], marker=".", linewidth=1, alpha=0.7)
        if rows.empty:
            axis.text(0.5, 0.5, "trained without a trajectory", ha="center", va="center")
        axis.set_ylim(-0.03, 1.03)
        axis.set_xlabel("training step")
        axis.set_ylabel("accuracy (subsample)")
        axis.set_title(column, fontsize=9)
    return figure


def best_of_n_text(all_curves: pd.DataFrame, base: str, headline: list[str]) -> str:
    """What picking by in-distribution accuracy buys, at the largest n (ours, then the
    reference's where it has the columns)."""
    text = _picked(all_curves[all_curves["runs"] == OURS], base, headline, "Best of n")
    for runs, curves in all_curves[all_curves["runs"] != OURS].groupby("runs"):
        shared = [c for c in headline if c in set(curves["column"])]
        text += " " + _picked(curves, base, shared, f"The {runs}")
    return text


def _picked(curves: pd.DataFrame, base: str, headline: list[str], lead: str) -> str:
    """At the largest n: the value kept by `base` (± its bootstrap SE, and the tied seeds'
    values where it is their mean), the best on the column and one seed's on average."""
    top = int(curves["n"].max())
    last = curves[curves["n"] == top].set_index(["column", "curve"])
    chosen = f"chosen by {base}"
    parts = []
    for column in headline:
        kept = last.loc[(column, chosen)]
        tie = ""
        if kept["tied"] > 1 and pd.notna(kept["tied_values"]) and str(kept["tied_values"]):
            values = ", ".join(f"{float(v):.1%}" for v in str(kept["tied_values"]).split())
            tie = f", the mean of {int(kept['tied'])} seeds tied on {base}: {values}"
        one = curves[(curves["column"] == column) & (curves["n"] == 1)]["mean"].iloc[0]
        parts.append(
            f"{column} {kept['mean']:.1%} ± {100 * kept['se']:.1f}{tie} (the best of the {top} "
            f"on it: {last.loc[(column, 'best'), 'mean']:.1%}; one seed on average: {one:.1%})"
        )
    pool = curves["pool"].iloc[0] if "pool" in curves else f"over all {top}"
    return (
        f"{lead} {pool}: keeping the seed with the best {base} of the {top} gives "
        f"{'; '.join(parts)} (± one bootstrap standard error over seeds, in points)."
    )


def components_text(table: pd.DataFrame, headline: list[str]) -> str:
    """Which seed matters, per headline column: init against data order by the generalized
    test, Holm corrected across the headline columns at family-wise ALPHA."""
    if (table["source"] == JOINT).all():
        return (
            "Which seed matters: not measurable here, each seed set both the initialisation "
            "and the data order (a factorial design separates them)."
        )
    tested = [c for c in headline if (table["column"] == c).any()]
    first = table.drop_duplicates("column").set_index("column").reindex(tested)
    adjusted, rejected = holm(first["init_vs_order_p"].tolist(), ALPHA)
    parts = []
    for column, p, reject in zip(tested, adjusted, rejected, strict=True):
        rows = table[table["column"] == column].set_index("source")
        init, order = rows.loc["init"], rows.loc["data order"]
        if not reject:
            answer = f"no difference shown (Holm-adjusted p = {p:.2g})"
        elif first.loc[column, "init_minus_order_var"] > 0:
            answer = f"init varies more (Holm-adjusted p = {p:.2g})"
        else:
            answer = f"data order varies more (Holm-adjusted p = {p:.2g})"
        interaction = rows.loc["interaction"]
        said = (
            f"interaction {interaction['std']:.1%} [{interaction['std_low']:.1%}, "
            f"{interaction['std_high']:.1%}]"
        )
        if pd.notna(interaction["note"]) and interaction["note"]:
            said += f" ({interaction['note']})"
        parts.append(
            f"{column}: init {init['std']:.1%} [{init['std_low']:.1%}, {init['std_high']:.1%}], "
            f"data order {order['std']:.1%} [{order['std_low']:.1%}, {order['std_high']:.1%}], "
            f"{said}: {answer}"
        )
    return (
        "Which seed matters (seed std by source, 95 % intervals; init against data order "
        f"tested, Holm corrected over {len(tested)} columns at family-wise {ALPHA:g}): "
        + "; ".join(parts)
        + "."
    )


def trajectories_text(spread: pd.DataFrame, headline: list[str]) -> str:
    """How the spread across seeds of each headline column moved during training."""
    if spread.empty:
        return "Trajectories: the seeds were trained without one (train.trajectory_examples 0)."
    parts = []
    for column in headline:
        rows = spread[spread["column"] == column].sort_values("step")
        if not rows["std"].notna().any():
            parts.append(f"{column}: one seed, no spread")
            continue
        widest = rows.loc[rows["std"].idxmax()]
        parts.append(
            f"{column} std {rows['std'].iloc[0]:.1%} at step {int(rows['step'].iloc[0])}, "
            f"widest {widest['std']:.1%} at step {int(widest['step'])}, "
            f"{rows['std'].iloc[-1]:.1%} at the end (step {int(rows['step'].iloc[-1])})"
        )
    return (
        "Trajectories (std across seeds on the subsample, which adds its own binomial noise): "
        + "; ".join(parts)
        + "."
    )


def further_text(results_dir: Path, base: str, headline: list[str]) -> str:
    """The three paragraphs, from results/."""
    return "\n\n".join(
        [
            best_of_n_text(pd.read_csv(results_dir / "best_of_n.csv"), base, headline),
            components_text(pd.read_csv(results_dir / "components.csv"), headline),
            trajectories_text(pd.read_csv(results_dir / "trajectories.csv"), headline),
        ]
    )
