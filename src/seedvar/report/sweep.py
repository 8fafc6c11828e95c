"""A sweep's outputs: trials.csv, plots (PNG) and a short report on whether the spread persists."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from seedvar.config import Config  # noqa: E402
from seedvar.report.figures import save_figure  # noqa: E402
from seedvar.report.wording import search_summary, sweep_summary  # noqa: E402
from seedvar.results.aggregate import prediction_shares  # noqa: E402
from seedvar.results.evidence import from_predictions  # noqa: E402
from seedvar.seeds.finished import FinishedSeed  # noqa: E402
from seedvar.stats.heuristic import HeuristicTest  # noqa: E402
from seedvar.stats.noise import Noise  # noqa: E402
from seedvar.stats.sweep import SweepVerdict, sweep_verdict  # noqa: E402
from seedvar.sweep.search import axes_of  # noqa: E402
from seedvar.sweep.trial import MLFLOW_RUN_ATTR, OUTPUT_DIR_ATTR, SEEDS_ATTR  # noqa: E402


def trials_table(study: optuna.Study) -> pd.DataFrame:
    """One row per trial: number, state, hyperparameters, means and stds across its seeds."""
    hidden = ("default", OUTPUT_DIR_ATTR, SEEDS_ATTR, MLFLOW_RUN_ATTR)
    rows = []
    for trial in study.trials:
        default = bool(trial.user_attrs.get("default", False))
        row = {"trial": trial.number, "state": trial.state.name, "default": default}
        row |= {f"param/{k}": v for k, v in trial.params.items()}
        rows.append(row | {k: v for k, v in trial.user_attrs.items() if k not in hidden})
    return pd.DataFrame(rows)


def plot_accuracy_vs_spread(config: Config, table: pd.DataFrame, pareto: set[int]) -> Figure:
    """Per trial: accuracy against spread (`axes_of`); the default configuration starred, the
    Pareto front circled."""
    accuracy, spread, _ = axes_of(config)
    complete = table[table["state"] == "COMPLETE"]
    figure, axis = plt.subplots(figsize=(7, 5), layout="constrained")
    axis.scatter(complete[accuracy], complete[spread], color="tab:blue", label="trial")
    front, default = complete[complete["trial"].isin(pareto)], complete[complete["default"]]
    circled: dict[str, Any] = {"s": 160, "facecolors": "none", "edgecolors": "tab:red"}
    starred: dict[str, Any] = {"marker": "*", "s": 300, "color": "tab:orange", "zorder": 3}
    for rows, label, style in (
        (front, "Pareto front", circled),
        (default, "default configuration", starred),
    ):
        if len(rows):
            axis.scatter(rows[accuracy], rows[spread], label=label, **style)
    for _, row in complete.iterrows():
        axis.annotate(str(int(row["trial"])), (row[accuracy], row[spread]), fontsize=8)
    axis.set_xlabel(f"{accuracy} (across seeds)")
    axis.set_ylabel(f"{spread} (across seeds)")
    axis.set_title("Accuracy and spread per configuration")
    axis.legend()
    return figure


def decide(config: Config, study: optuna.Study) -> SweepVerdict | None:
    """The sweep's verdict from the completed trials' seeds (their predictions, read back from
    their folders); None before any trial has completed."""
    tables: dict[str, pd.DataFrame] = {}
    shares: dict[str, dict[str, list[float]]] = {}
    noise: dict[str, dict[str, Noise]] = {}
    heuristics: dict[str, dict[str, HeuristicTest]] = {}
    design = None
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if OUTPUT_DIR_ATTR not in trial.user_attrs:  # added by hand: no seeds to read back
            continue
        runs_dir, seeds = Path(trial.user_attrs[OUTPUT_DIR_ATTR]), trial.user_attrs[SEEDS_ATTR]
        finished = [FinishedSeed(runs_dir, s) for s in seeds]
        for seed in finished:
            seed.check()
        table = pd.DataFrame([seed.metrics() for seed in finished])
        evidence = from_predictions(config.model_copy(update={"seeds": seeds}), runs_dir, table)
        drawn = ", ".join(f"{key}={value}" for key, value in trial.params.items())
        name = f"trial {trial.number} ({drawn})"
        tables[name], noise[name], design = evidence.table, evidence.noise, evidence.design
        shares[name] = prediction_shares(config, table)
        heuristics[name] = evidence.heuristics
    if design is None:
        return None
    return sweep_verdict(tables, noise, design, shares, config.plan.alpha, heuristics)


def write_sweep_outputs(config: Config, study: optuna.Study, out_dir: Path) -> list[Path]:
    """trials.csv, optimization history, parameter importances, accuracy vs spread, report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = trials_table(study)
    table.to_csv(out_dir / "trials.csv", index=False)
    multi = len(study.directions) > 1
    pareto = {t.number for t in study.best_trials} if multi and len(table) else set()
    target, target_name = ((lambda t: t.values[0]) if multi else None), axes_of(config)[0]
    plots = optuna.visualization.matplotlib
    searching = config.sweep.seeds_per_trial < 2  # one seed a trial: accuracy, never spread
    figures = (
        {} if searching else {"accuracy_vs_spread": plot_accuracy_vs_spread(config, table, pareto)}
    )
    with warnings.catch_warnings(action="ignore", category=optuna.exceptions.ExperimentalWarning):
        history = plots.plot_optimization_history(study, target=target, target_name=target_name)
        figures["optimization_history"] = _figure_of(history)
        if len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) >= 2:
            importances = plots.plot_param_importances(
                study, target=target, target_name=target_name
            )
            figures["param_importances"] = _figure_of(importances)
        else:
            figures["param_importances"], axis = plt.subplots(figsize=(6, 2))
            axis.text(0.5, 0.5, "importances need 2 or more completed trials", ha="center")
            axis.set_axis_off()
    for name, figure in figures.items():
        save_figure(figure, out_dir / f"{name}.png")
        plt.close(figure)
    params = [c for c in table if c.startswith("param/")]
    axes = axes_of(config)[:1] if searching else axes_of(config)
    shown = table[[c for c in ["trial", "state", "default", *params, *axes] if c in table]]
    if searching:
        summary = search_summary(axes[0], table)
    else:
        summary = sweep_summary(axes_of(config), table, decide(config, study))
    report = (
        f"# Sweep `{study.study_name}`\n\n{summary}\n\n"
        f"{shown.to_markdown(index=False, floatfmt='.4g')}\n\n"
        + "".join(f"![{name}]({name}.png)\n\n" for name in figures)
    )
    (out_dir / "report.md").write_text(report)
    pngs = [out_dir / f"{name}.png" for name in figures]
    return [out_dir / "trials.csv", *pngs, out_dir / "report.md"]


def _figure_of(axes: Axes) -> Figure:
    """The figure an Optuna plot was drawn on."""
    figure = axes.get_figure(root=True)
    assert figure is not None  # Optuna draws on a new figure
    return figure
