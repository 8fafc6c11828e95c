"""A sweep's outputs: trials.csv, plots (PNG) and a short report on whether the spread persists."""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from seedvar.metrics import HANS_NON_ENTAILED, MNLI_MATCHED  # noqa: E402
from seedvar.study.report import REPRODUCED_STD_RATIO  # noqa: E402

ACCURACY = f"mean/{MNLI_MATCHED}"
SPREAD = f"std/{HANS_NON_ENTAILED}"
MNLI_SPREAD = f"std/{MNLI_MATCHED}"


def trials_table(study: optuna.Study) -> pd.DataFrame:
    """One row per trial: number, state, hyperparameters, means and stds across its seeds."""
    rows = []
    for trial in study.trials:
        row = {
            "trial": trial.number,
            "state": trial.state.name,
            "default": bool(trial.user_attrs.get("default", False)),
        }
        row.update({f"param/{k}": v for k, v in trial.params.items()})
        row.update({k: v for k, v in trial.user_attrs.items() if k != "default"})
        rows.append(row)
    return pd.DataFrame(rows)


def plot_accuracy_vs_spread(table: pd.DataFrame, pareto: set[int]) -> Figure:
    """Per trial: mean MNLI-m accuracy against the std across seeds of HANS non-entailed
    accuracy; the default configuration starred, the Pareto front circled."""
    complete = table[table["state"] == "COMPLETE"]
    figure, axis = plt.subplots(figsize=(7, 5), layout="constrained")
    axis.scatter(complete[ACCURACY], complete[SPREAD], color="tab:blue", label="trial")
    front = complete[complete["trial"].isin(pareto)]
    if len(front):
        circles = {"s": 160, "facecolors": "none", "edgecolors": "tab:red"}
        axis.scatter(front[ACCURACY], front[SPREAD], label="Pareto front", **circles)
    default = complete[complete["default"]]
    if len(default):
        star = {"marker": "*", "s": 300, "color": "tab:orange", "zorder": 3}
        axis.scatter(default[ACCURACY], default[SPREAD], label="default configuration", **star)
    for _, row in complete.iterrows():
        axis.annotate(str(int(row["trial"])), (row[ACCURACY], row[SPREAD]), fontsize=8)
    axis.set_xlabel("mean MNLI-m accuracy across seeds")
    axis.set_ylabel("std across seeds of HANS non-entailed accuracy")
    axis.set_title("Accuracy and spread per configuration")
    axis.legend()
    return figure


def sweep_verdict(table: pd.DataFrame) -> str:
    """From the numbers: does the HANS spread persist across the configurations tried?"""
    complete = table[table["state"] == "COMPLETE"]
    if complete.empty:
        return "No trial has completed yet."
    ratio = complete[SPREAD] / complete[MNLI_SPREAD]
    persists = int((ratio >= REPRODUCED_STD_RATIO).sum())
    pruned = int((table["state"] == "PRUNED").sum())
    accuracy, spread, mnli_spread = complete[ACCURACY], complete[SPREAD], complete[MNLI_SPREAD]
    return (
        f"{len(complete)} configurations completed ({pruned} pruned). Mean MNLI-m accuracy "
        f"ranged {accuracy.min():.1%}-{accuracy.max():.1%}. The std across seeds of HANS "
        f"non-entailed accuracy ranged {spread.min():.2%}-{spread.max():.2%} (median "
        f"{spread.median():.2%}), against an MNLI-m std of {mnli_spread.min():.2%}-"
        f"{mnli_spread.max():.2%}. In "
        f"{persists} of {len(complete)} configurations the HANS spread is at least "
        f"{REPRODUCED_STD_RATIO:.0f} times the MNLI-m spread (median ratio {ratio.median():.1f}): "
        + (
            "the spread persists across the configurations tried."
            if persists == len(complete)
            else "some configurations shrink the HANS spread to the in-distribution level."
        )
    )


def write_sweep_outputs(study: optuna.Study, out_dir: Path) -> list[Path]:
    """trials.csv, optimization history, parameter importances, accuracy vs spread, report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = trials_table(study)
    table.to_csv(out_dir / "trials.csv", index=False)
    multi = len(study.directions) > 1
    pareto = {t.number for t in study.best_trials} if multi and len(table) else set()
    target = (lambda t: t.values[0]) if multi else None
    written = [out_dir / "trials.csv"]
    figures = {"accuracy_vs_spread": plot_accuracy_vs_spread(table, pareto)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        history = optuna.visualization.matplotlib.plot_optimization_history(
            study, target=target, target_name="mean MNLI-m accuracy"
        )
        figures["optimization_history"] = history.figure
        if len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) >= 2:
            importances = optuna.visualization.matplotlib.plot_param_importances(
                study, target=target, target_name="mean MNLI-m accuracy"
            ).figure
        else:
            importances, axis = plt.subplots(figsize=(6, 2))
            axis.text(0.5, 0.5, "importances need 2 or more completed trials", ha="center")
            axis.set_axis_off()
        figures["param_importances"] = importances
    for name, figure in figures.items():
        figure.savefig(out_dir / f"{name}.png", dpi=120, bbox_inches="tight")
        plt.close(figure)
        written.append(out_dir / f"{name}.png")
    params = [c for c in table if c.startswith("param/")]
    columns = ["trial", "state", "default", *params, ACCURACY, MNLI_SPREAD, SPREAD]
    shown = table[[c for c in columns if c in table]]
    report = (
        f"# Sweep `{study.study_name}`\n\n{sweep_verdict(table)}\n\n"
        f"{shown.to_markdown(index=False, floatfmt='.4g')}\n\n"
        + "".join(f"![{name}]({name}.png)\n\n" for name in figures)
    )
    (out_dir / "report.md").write_text(report)
    return [*written, out_dir / "report.md"]
