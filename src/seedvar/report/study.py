"""Plots (PNG and SVG) and a self-contained report (HTML and Markdown) from results/."""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass
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
from seedvar.declared import design_columns, primary_column, primary_set  # noqa: E402
from seedvar.metrics import other_labels_column  # noqa: E402
from seedvar.report import wording  # noqa: E402
from seedvar.report.figures import save_figure  # noqa: E402
from seedvar.report.past_the_paper import further_figures, panels  # noqa: E402
from seedvar.report.wording import CAPTIONS, TITLE  # noqa: E402
from seedvar.results.aggregate import as_trained, diagnostic_masks, flat_headline  # noqa: E402
from seedvar.tracking import provenance  # noqa: E402

OURS, PAPER = "tab:blue", "tab:gray"


def plot_groups(
    ours: pd.DataFrame, paper: pd.DataFrame | None, by_set: dict[str, list[str]], name: str
) -> Figure:
    """(a) Accuracy on each column of each diagnostic set, one point per seed (and run)."""
    figure, axes = panels(len(by_set), 14, 4.5, columns=1)
    jitter = np.random.default_rng(0)
    for axis, (set_name, columns) in zip(axes, by_set.items(), strict=True):
        positions = np.arange(len(columns))
        tables = [(0.18, ours, OURS, f"ours ({len(ours)} seeds)")]
        if paper is not None and all(c in paper for c in columns):
            tables.insert(0, (-0.18, paper, PAPER, name))
        for offset, table, color, label in tables:
            xs = np.concatenate([np.full(len(table), p + offset) for p in positions])
            xs = xs + jitter.uniform(-0.06, 0.06, size=xs.size)
            ys = np.concatenate([table[c].to_numpy() for c in columns])
            axis.scatter(xs, ys, s=9, alpha=0.6, color=color, label=label)
        axis.set_xticks(positions, columns, rotation=70, ha="right", fontsize=8)
        title = f"{set_name}: accuracy per column across seeds"
        axis.set(ylabel="accuracy", ylim=(-0.03, 1.03), title=title)
        axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside: no point under it
    return figure


def plot_scatter(
    ours: pd.DataFrame, paper: pd.DataFrame | None, base: str, tested: list[str], name: str
) -> Figure:
    """(b) The primary in-distribution accuracy against each tested headline column, one point
    per seed (labelled), beside the reference's runs; both axes span 0-1 so spreads compare."""
    figure, axes = panels(len(tested), 5, 5, columns=len(tested))
    for axis, column in zip(axes, tested, strict=True):
        if paper is not None and column in paper and base in paper:
            axis.scatter(paper[base], paper[column], s=12, color=PAPER, label=name)
        axis.scatter(ours[base], ours[column], color=OURS, label=f"ours ({len(ours)} seeds)")
        for _, row in ours.iterrows():  # clipped to the axes: a seed at 100 % stays inside
            point = (row[base], row[column])
            axis.annotate(str(int(row["seed"])), point, fontsize=7, annotation_clip=True)
        axis.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), aspect="equal", xlabel=base, ylabel=column)
        axis.legend(loc="upper left")
    figure.suptitle("In-distribution vs diagnostic accuracy, per seed")
    return figure


def plot_agreement(tables: dict[str, pd.DataFrame]) -> Figure:
    """(c) How many seeds got each example right, per set."""
    figure, axes = panels(len(tables), 5.5, 4, columns=len(tables))
    for axis, (name, table) in zip(axes, tables.items(), strict=True):
        n_seeds = int(table["n_seeds"].iloc[0])
        axis.hist(table["n_correct"], bins=np.arange(n_seeds + 2) - 0.5, color=OURS)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole seeds only
        xlabel, title = f"seeds correct (of {n_seeds})", f"{name}: per-example agreement"
        axis.set(xlabel=xlabel, ylabel="examples", title=title)
    return figure


def plot_bias(ours: pd.DataFrame, headline: list[str], counterpart: dict[str, str]) -> Figure:
    """(b2) Per headline column, each seed's accuracy on it against that on its group's other
    gold labels, coloured by its bias-free counterpart: a threshold falls on a falling line."""
    shown = [c for c in headline if other_labels_column(c) in ours]
    figure, axes = panels(max(len(shown), 1), 4.2, 4, columns=max(len(shown), 1))
    for axis, column in zip(axes, shown, strict=False):
        x, colour = ours[other_labels_column(column)], ours[counterpart[column]]
        points = axis.scatter(
            x, ours[column], c=colour, cmap="viridis", vmin=0.5, vmax=1.0, edgecolors="black"
        )
        axis.plot([0, 1], [1, 0], color="gray", linestyle=":", label="a pure threshold shift")
        axis.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03), ylabel=column)
        axis.set_xlabel("accuracy on its group's other labels")
        axis.set_title(column, fontsize=9)
        figure.colorbar(points, ax=axis, label=counterpart[column].rsplit(" ", 1)[-1])
    if not shown:
        axes[0].text(0.5, 0.5, "no headline column has other labels", ha="center")
    axes[0].legend(loc="lower left", fontsize=8)
    return figure


def plot_std(comparison: pd.DataFrame, decision: dict) -> Figure:
    """(d) Per column the reference's std beside our seed std, interval and noise std."""
    columns = ["seed_std", "seed_std_low", "seed_std_high", "noise_std"]
    ours = pd.DataFrame(decision["columns"]).set_index("column")[columns]
    ours = ours.astype(float).reindex(comparison.index)  # None (one seed: no std) -> NaN
    figure, axis = plt.subplots(figsize=(14, 5), layout="constrained")
    positions = np.arange(len(comparison))
    if "paper_std" in comparison:
        reference = comparison["paper_std"]
        axis.bar(positions - 0.2, reference, width=0.4, color=PAPER, label="reference: std")
    x, std = positions + 0.2, ours["seed_std"]
    axis.bar(x, std, width=0.4, color=OURS, label="ours: seed std (evaluation noise removed)")
    interval = [std - ours["seed_std_low"], ours["seed_std_high"] - std]
    label = "ours: 95 % interval of the seed std"
    axis.errorbar(x, std, yerr=interval, fmt="none", ecolor="black", capsize=2, label=label)
    label = "ours: evaluation-noise std"
    axis.scatter(x, ours["noise_std"], marker="_", s=80, color="black", zorder=3, label=label)
    axis.set_xticks(positions, comparison.index, rotation=70, ha="right", fontsize=8)
    axis.set(ylabel="std across seeds (accuracy)", title="Spread across seeds per column")
    figure.legend(loc="outside right upper")
    return figure


def one_label_columns(config: Config, agreement: dict[str, pd.DataFrame]) -> dict[str, str]:
    """Each diagnostic column with the gold label all its examples have ("" where several)."""
    found = {}
    for set_name, diagnostic in config.diagnostics.items():
        examples = agreement[set_name]
        for column, mask in diagnostic_masks(config, set_name, examples).items():
            golds = examples.loc[mask, "gold"].unique()
            found[column] = diagnostic.labels[int(golds[0])] if len(golds) == 1 else ""
    return found


def write_report(config: Config, results_dir: Path, report_dir: Path) -> list[Path]:
    """Draw the plots (PNG and SVG) and write report.html and report.md."""
    report_dir.mkdir(parents=True, exist_ok=True)
    ours = pd.read_csv(results_dir / "seeds.csv")
    paper = read_table(Path(config.reference.runs)) if config.reference else None
    name = config.reference.name if config.reference else ""
    comparison = pd.read_csv(results_dir / "comparison.csv", index_col="column")
    decision = json.loads((results_dir / "verdict.json").read_text())
    evaluated = [*config.task.evaluation, *config.diagnostics]
    agreement = {s: pd.read_csv(results_dir / "agreement" / f"{s}.csv") for s in evaluated}
    plotted = [primary_set(config.task), *config.diagnostics]
    boot = pd.read_csv(results_dir / "multibootstrap.csv")  # the columns in aggregate's order
    by_set = {s: boot.loc[boot["set"] == s, "column"].tolist() for s in config.diagnostics}
    by_set = {s: [c for c in columns if not c.endswith("overall")] for s, columns in by_set.items()}
    base = primary_column(config.task)
    headline = list(design_columns(config.task, config.diagnostics)[1])
    figures = {
        "groups": plot_groups(ours, paper, by_set, name),
        "scatter": plot_scatter(ours, paper, base, headline, name),
        "bias": plot_bias(ours, headline, decision["design"]["bias_free"]),
        "agreement": plot_agreement({s: agreement[s] for s in plotted}),
        "std": plot_std(comparison, decision),
        **further_figures(results_dir, headline),
    }
    written = []
    for figure_name, figure in figures.items():
        written += [report_dir / f"{figure_name}.png", report_dir / f"{figure_name}.svg"]
        save_figure(figure, *written[-2:])
        plt.close(figure)
    sizes = {s: len(table) for s, table in agreement.items()}
    interaction = results_dir / "interaction.csv"
    one_label = one_label_columns(config, agreement)
    paragraphs = [
        wording.made_from(config, len(ours), sizes, provenance()),
        wording.findings(config, comparison, decision, len(ours)),
        wording.claims_text(decision),
        wording.further_text(results_dir, base, headline),
        wording.interaction_text(pd.read_csv(interaction)) if interaction.is_file() else "",
        wording.label_caveat(one_label),
    ]
    page = Page(
        answer=wording.answer_text(decision, base, (ours[base].min(), ours[base].max())),
        figure="bias" if decision["rule"] in wording.LABEL_RULES else "scatter",
        headline=headline_table(comparison, decision, [base, *headline]),
        paragraphs=[part for part in paragraphs if part],
        table=_comparison_table(comparison, base),
        title=f"Spread across seeds, ours and the {name}" if name else "Spread across seeds",
    )
    page.table["one gold label"] = [one_label.get(column, "") for column in page.table.index]
    (report_dir / "report.md").write_text(_markdown(page, figures))
    (report_dir / "report.html").write_text(_html(page, figures, report_dir))
    return [*written, report_dir / "report.md", report_dir / "report.html"]


@dataclass
class Page:
    """What the report says, in its order: first screen (the answer, the figure that shows
    why, the headline numbers), then how it was found, every column and every plot."""

    answer: str
    figure: str
    headline: pd.DataFrame
    paragraphs: list[str]
    table: pd.DataFrame
    title: str


def headline_table(comparison: pd.DataFrame, decision: dict, columns: list[str]) -> pd.DataFrame:
    """The headline columns and their threshold-free counterparts: our range and seed std
    (noise removed, 95 % interval) beside the reference's range and std, in points."""
    bias_free = decision["design"]["bias_free"]
    shown = [c for col in columns for c in (col, bias_free.get(col)) if c in comparison.index]
    ours = pd.DataFrame(decision["columns"]).set_index("column")
    rows = {}
    for column in shown:
        row, found = comparison.loc[column], ours.loc[column]
        published = "paper_min" in row and pd.notna(row.paper_min)
        rows[column] = {
            "ours: range": f"{100 * row.ours_min:.1f}-{100 * row.ours_max:.1f}",
            "ours: seed std [95 %]": _std(
                found["seed_std"], found["seed_std_low"], found["seed_std_high"]
            ),
            "reference: range": f"{100 * row.paper_min:.1f}-{100 * row.paper_max:.1f}"
            if published
            else NOT_PUBLISHED,
            "reference: std": f"{100 * row.paper_std:.2f}" if published else NOT_PUBLISHED,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def _std(*values: float | None) -> str:
    """A seed std and its interval in points; a dash where there is none (one seed)."""
    if any(v is None or not np.isfinite(v) for v in values):
        return "-"
    std, low, high = (100 * float(v) for v in values if v is not None)
    return f"{std:.2f} [{low:.2f}, {high:.2f}]"


def report_study(config: Config, results_dir: Path, report_dir: Path) -> tuple[list[Path], str]:
    """Write the report, log it on the study's MLflow run; the files written and the run's id."""
    config = as_trained(config, Path(config.output_dir))
    written = write_report(config, results_dir, report_dir)
    headline = flat_headline(results_dir)
    return written, tracking.log_study_results(config, headline, [results_dir, report_dir])


NOT_PUBLISHED = "not published"  # a column the reference's table does not have (its AUCs)


def _comparison_table(comparison: pd.DataFrame, base: str) -> pd.DataFrame:
    stats = {s: s for s in ("min", "max", "mean", "std")} | {"range_ratio": f"range / {base} range"}
    columns = {
        f"{source}_{key}": f"{source} {label}"
        for source in ("ours", "paper")
        for key, label in stats.items()
        if f"{source}_{key}" in comparison
    }
    table = comparison[list(columns)].rename(columns=columns).round(4).astype(object)
    published = [c for c in table.columns if c.startswith("paper ")]
    table[published] = table[published].where(table[published].notna(), NOT_PUBLISHED)
    return table


def _markdown(page: Page, figures: dict) -> str:
    images = "\n\n".join(f"![{CAPTIONS[n]}]({n}.png)\n\n{CAPTIONS[n]}" for n in figures)
    paragraphs = "\n\n".join(page.paragraphs)
    return (
        f"# {TITLE}\n\n**{page.answer}**\n\n![{CAPTIONS[page.figure]}]({page.figure}.png)\n\n"
        f"{page.headline.to_markdown()}\n\n## How this was found\n\n{paragraphs}\n\n"
        f"## {page.title}\n\n{page.table.to_markdown()}\n\n## Plots\n\n{images}\n"
    )


def _html(page: Page, figures: dict, report_dir: Path) -> str:
    def image(name: str, element_id: str = "") -> str:
        data = base64.b64encode((report_dir / f"{name}.png").read_bytes()).decode()
        caption = html.escape(CAPTIONS[name])
        ident = f' id="{element_id}"' if element_id else ""
        return (
            f'<figure{ident}><img alt="{caption}" src="data:image/png;base64,{data}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )

    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
        "padding:2px 6px;text-align:right}img{max-width:100%}"
        "#answer{font-size:1.25em;font-weight:bold;margin:0.4em 0}"
        "#answer-figure img{max-height:45vh}#answer-figure{margin:0.4em 0}"
        "figcaption{font-size:12px;color:#444}"
    )
    paragraphs = "".join(f"<p>{html.escape(part)}</p>" for part in page.paragraphs)
    images = "".join(image(name) for name in figures)
    headline = page.headline.to_html(table_id="headline")
    table = page.table.rename_axis(None).to_html()
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{TITLE}</title><style>{style}</style></head><body>"
        f"<h1>{html.escape(TITLE)}</h1><p id='answer'>{html.escape(page.answer)}</p>"
        f"{image(page.figure, 'answer-figure')}{headline}"
        f"<h2>How this was found</h2>{paragraphs}<h2>{html.escape(page.title)}</h2>{table}"
        f"<h2>Plots</h2>{images}</body></html>"
    )
