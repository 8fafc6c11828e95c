"""Plots (PNG and SVG) and a self-contained report (HTML and Markdown) from results/."""

from __future__ import annotations

import base64
import html
import json
from datetime import date
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from seedvar import tracking  # noqa: E402
from seedvar.config import Config  # noqa: E402
from seedvar.data.io import read_table  # noqa: E402
from seedvar.metrics import (  # noqa: E402
    MNLI_MATCHED,
    NON_ENTAILED_COLUMNS,
    PAPER_COLUMNS,
    SUBCASES,
    SUBJECT_OBJECT_SWAP,
)
from seedvar.study.aggregate import as_trained, flat_headline  # noqa: E402
from seedvar.tracking import provenance  # noqa: E402

OURS, PAPER = "tab:blue", "tab:gray"


def plot_subcases(ours: pd.DataFrame, paper: pd.DataFrame) -> Figure:
    """(a) Accuracy on each HANS subcase, one point per seed; the paper's runs beside ours."""
    figure, axis = plt.subplots(figsize=(14, 5), layout="constrained")
    positions = np.arange(len(SUBCASES))
    jitter = np.random.default_rng(0)
    for offset, table, color, label in (
        (-0.18, paper, PAPER, f"paper ({len(paper)} runs)"),
        (0.18, ours, OURS, f"ours ({len(ours)} seeds)"),
    ):
        xs = np.concatenate([np.full(len(table), p + offset) for p in positions])
        xs = xs + jitter.uniform(-0.06, 0.06, size=xs.size)
        ys = np.concatenate([table[s].to_numpy() for s in SUBCASES])
        axis.scatter(xs, ys, s=9, alpha=0.6, color=color, label=label)
    axis.set_xticks(positions, SUBCASES, rotation=70, ha="right", fontsize=8)
    axis.set_ylabel("accuracy")
    axis.set_ylim(-0.03, 1.03)
    axis.set_title("HANS accuracy per subcase across seeds")
    figure.legend(loc="outside right upper")  # beside the axes: no point under it
    return figure


def plot_mnli_vs_hans(
    ours: pd.DataFrame, paper: pd.DataFrame, column: str = "Lexical (nonent)"
) -> Figure:
    """(b) MNLI-m accuracy against HANS lexical-overlap non-entailed accuracy, one point per
    seed (labelled), beside the paper's 100 runs; both axes span 0-1 so spreads compare."""
    figure, axis = plt.subplots(figsize=(6, 6), layout="constrained")
    axis.scatter(paper[MNLI_MATCHED], paper[column], s=12, color=PAPER, label="paper (100 runs)")
    axis.scatter(ours[MNLI_MATCHED], ours[column], color=OURS, label=f"ours ({len(ours)} seeds)")
    for _, row in ours.iterrows():  # clipped to the axes: a seed at 100 % stays off the title
        point = (row[MNLI_MATCHED], row[column])
        axis.annotate(str(int(row["seed"])), point, fontsize=7, annotation_clip=True, clip_on=True)
    axis.set_xlim(-0.02, 1.02)
    axis.set_ylim(-0.02, 1.02)
    axis.set_aspect("equal")
    axis.set_xlabel("MNLI dev-matched accuracy")
    axis.set_ylabel(f"HANS {column} accuracy")
    axis.set_title("In-distribution vs out-of-distribution, per seed")
    axis.legend(loc="upper left")
    return figure


def plot_agreement(mnli: pd.DataFrame, hans: pd.DataFrame) -> Figure:
    """(c) How many seeds got each example right, MNLI-m and HANS."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for axis, table, name in ((axes[0], mnli, "MNLI dev-matched"), (axes[1], hans, "HANS")):
        n_seeds = int(table["n_seeds"].iloc[0])
        axis.hist(table["n_correct"], bins=np.arange(n_seeds + 2) - 0.5, color=OURS)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole seeds only
        axis.set_xlabel(f"seeds correct (of {n_seeds})")
        axis.set_ylabel("examples")
        axis.set_title(f"{name}: per-example agreement")
    return figure


def plot_std(comparison: pd.DataFrame, decision: dict) -> Figure:
    """(d) Spread across seeds per column: the paper's std beside our seed std (evaluation
    noise removed) with its 95 % interval and our evaluation-noise std (results/verdict.json)."""
    columns = ["seed_std", "seed_std_low", "seed_std_high", "noise_std"]
    ours = pd.DataFrame(decision["columns"]).set_index("column")[columns]
    ours = ours.astype(float).reindex(comparison.index)  # None (one seed: no std) -> NaN
    figure, axis = plt.subplots(figsize=(14, 5), layout="constrained")
    positions = np.arange(len(comparison))
    axis.bar(positions - 0.2, comparison["paper_std"], width=0.4, color=PAPER, label="paper: std")
    axis.bar(
        positions + 0.2,
        ours["seed_std"],
        width=0.4,
        color=OURS,
        label="ours: seed std (evaluation noise removed)",
    )
    axis.errorbar(
        positions + 0.2,
        ours["seed_std"],
        yerr=[ours["seed_std"] - ours["seed_std_low"], ours["seed_std_high"] - ours["seed_std"]],
        fmt="none",
        ecolor="black",
        capsize=2,
        label="ours: 95 % interval of the seed std",
    )
    axis.scatter(
        positions + 0.2,
        ours["noise_std"],
        marker="_",
        s=80,
        color="black",
        zorder=3,
        label="ours: evaluation-noise std",
    )
    axis.set_xticks(positions, comparison.index, rotation=70, ha="right", fontsize=8)
    axis.set_ylabel("std across seeds (accuracy)")
    axis.set_title("Spread across seeds per column")
    figure.legend(loc="outside right upper")
    return figure


def made_from(config: Config, n_seeds: int, mnli_examples: int, hans_examples: int) -> str:
    """What the report was made from: profile, model, sizes, code version and date."""
    sources = provenance()
    return (
        f"Made from the {config.profile} study ({config.study_hash()}): {n_seeds} seeds of "
        f"{config.model.name}, {config.train.epochs} epoch(s) on "
        f"{config.data.max_train_examples or 'all'} training pairs, evaluated on "
        f"{mnli_examples:,} MNLI-m and {hans_examples:,} HANS examples; seedvar "
        f"{sources['version.seedvar']}, commit {sources['git.commit'][:12]}, "
        f"{date.today().isoformat()}."
    )


def findings(comparison: pd.DataFrame, decision: dict, n_seeds: int) -> str:
    """One paragraph: the spread in numbers, then the tested verdict and the correlation
    answers (results/verdict.json), each with the reason the decision gives."""
    mnli = comparison.loc[MNLI_MATCHED]
    hans = comparison.loc[list(NON_ENTAILED_COLUMNS)]
    widest = hans["ours_std"].idxmax()
    swap = comparison.loc[SUBJECT_OBJECT_SWAP]
    ours, paper = decision["mnli_predicts_hans"], decision["paper_mnli_predicts_hans"]
    return (
        f"Across {n_seeds} seeds, MNLI dev-matched accuracy ranges {mnli.ours_min:.1%}-"
        f"{mnli.ours_max:.1%} (std {mnli.ours_std:.2%}; the paper's 100 runs: "
        f"{mnli.paper_min:.1%}-{mnli.paper_max:.1%}, std {mnli.paper_std:.2%}). On HANS, "
        f"{widest} has the widest spread of the non-entailed columns, std "
        f"{hans.loc[widest, 'ours_std']:.2%} (the paper: {hans.loc[widest, 'paper_std']:.2%}), "
        f"and subject/object swap ranges {swap.ours_min:.1%}-{swap.ours_max:.1%} (the paper: "
        f"{swap.paper_min:.1%}-{swap.paper_max:.1%}). Verdict: {decision['reason']}. "
        f"Does MNLI-m accuracy predict HANS accuracy across seeds? Ours: {ours['reason']}. "
        f"The paper's runs: {paper['reason']}."
    )


def write_report(config: Config, results_dir: Path, report_dir: Path) -> list[Path]:
    """Draw the four plots (PNG and SVG) and write report.html and report.md."""
    report_dir.mkdir(parents=True, exist_ok=True)
    ours = pd.read_csv(results_dir / "seeds.csv")
    paper = read_table(Path(config.data.reference_runs))
    comparison = pd.read_csv(results_dir / "comparison.csv", index_col="column")
    decision = json.loads((results_dir / "verdict.json").read_text())
    figures = {
        "subcases": plot_subcases(ours, paper),
        "mnli_vs_hans": plot_mnli_vs_hans(ours, paper),
        "agreement": plot_agreement(
            pd.read_csv(results_dir / "agreement_mnli_matched.csv"),
            pd.read_csv(results_dir / "agreement_hans.csv"),
        ),
        "std": plot_std(comparison, decision),
    }
    written = []
    for name, figure in figures.items():
        for suffix in ("png", "svg"):
            path = report_dir / f"{name}.{suffix}"
            figure.savefig(path, dpi=120, bbox_inches="tight")
            written.append(path)
        plt.close(figure)
    mnli_examples = len(pd.read_csv(results_dir / "agreement_mnli_matched.csv"))
    hans_examples = len(pd.read_csv(results_dir / "agreement_hans.csv"))
    paragraph = made_from(config, len(ours), mnli_examples, hans_examples) + "\n\n"
    paragraph += findings(comparison, decision, len(ours))
    table = _comparison_table(comparison)
    (report_dir / "report.md").write_text(_markdown(paragraph, table, figures))
    (report_dir / "report.html").write_text(_html(paragraph, table, figures, report_dir))
    return [*written, report_dir / "report.md", report_dir / "report.html"]


def report_study(config: Config, results_dir: Path, report_dir: Path) -> tuple[list[Path], str]:
    """Write the report and log it, with the study's headline numbers, on the study's MLflow
    run; returns the files written and that run's id."""
    config = as_trained(config, Path(config.output_dir))
    written = write_report(config, results_dir, report_dir)
    run_id = tracking.log_study_results(
        config, flat_headline(results_dir), [results_dir, report_dir]
    )
    return written, run_id


def _comparison_table(comparison: pd.DataFrame) -> pd.DataFrame:
    stats = {"min": "min", "max": "max", "mean": "mean", "std": "std"}
    stats["range_ratio"] = "range / MNLI range"
    columns = {
        f"{source}_{key}": f"{source} {label}"
        for source in ("ours", "paper")
        for key, label in stats.items()
    }
    rows = [c for c in PAPER_COLUMNS if c in comparison.index]
    return comparison.loc[rows, list(columns)].rename(columns=columns).round(4)


TITLE = "seedvar: do seeds that score alike generalize alike?"
CAPTIONS = {
    "subcases": "(a) HANS accuracy per subcase, one point per seed; the paper's 100 runs in gray.",
    "mnli_vs_hans": "(b) MNLI-m accuracy vs HANS lexical-overlap non-entailed accuracy.",
    "agreement": "(c) Per-example agreement: how many seeds got each example right.",
    "std": (
        "(d) Spread across seeds per column: the paper's std; our seed std with evaluation "
        "noise removed, its 95 % interval, and our evaluation-noise std."
    ),
}


def _markdown(paragraph: str, table: pd.DataFrame, figures: dict) -> str:
    images = "\n\n".join(f"![{CAPTIONS[n]}]({n}.png)\n\n{CAPTIONS[n]}" for n in figures)
    return (
        f"# {TITLE}\n\n{paragraph}\n\n## Spread across seeds, ours and the paper's\n\n"
        f"{table.to_markdown()}\n\n## Plots\n\n{images}\n"
    )


def _html(paragraph: str, table: pd.DataFrame, figures: dict, report_dir: Path) -> str:
    images = "".join(
        f'<figure><img alt="{html.escape(CAPTIONS[n])}" src="data:image/png;base64,'
        f'{base64.b64encode((report_dir / f"{n}.png").read_bytes()).decode()}">'
        f"<figcaption>{html.escape(CAPTIONS[n])}</figcaption></figure>"
        for n in figures
    )
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
        "padding:2px 6px;text-align:right}img{max-width:100%}"
    )
    paragraphs = "".join(f"<p>{html.escape(part)}</p>" for part in paragraph.split("\n\n"))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{TITLE}</title>"
        f"<style>{style}</style></head><body><h1>{html.escape(TITLE)}</h1>"
        f"{paragraphs}<h2>Spread across seeds, ours and the paper's</h2>"
        f"{table.rename_axis(None).to_html()}<h2>Plots</h2>{images}</body></html>"
    )
