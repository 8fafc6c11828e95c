"""`seedvar compare`'s page: the answer, the figure of each configuration's seed spread with
its interval beside its in-distribution mean, and the table."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from seedvar.report.figures import save_figure  # noqa: E402
from seedvar.report.wording import configurations_text  # noqa: E402
from seedvar.results.configurations import compare  # noqa: E402

FIGURE = "spread.png"


def spread_figure(rows: pd.DataFrame, reference: str) -> Figure:
    """Per compared column: each configuration's seed std (points) with its 95 % interval,
    at its in-distribution mean."""
    columns = list(dict.fromkeys(rows["column"]))
    figure, axes = plt.subplots(1, len(columns), figsize=(5 * len(columns), 4), squeeze=False)
    for axis, column in zip(axes[0], columns, strict=True):
        shown = rows[rows["column"] == column]
        x, y = 100 * shown[reference], 100 * shown["seed_std"]
        below, above = y - 100 * shown["seed_std_low"], 100 * shown["seed_std_high"] - y
        axis.errorbar(x, y, yerr=[below, above], fmt="o", capsize=4)
        for name, at_x, at_y in zip(shown["configuration"], x, y, strict=True):
            axis.annotate(name, (at_x, at_y), textcoords="offset points", xytext=(6, 4))
        axis.set(title=column, xlabel=f"{reference} (%, mean over seeds)")
        axis.set_ylim(bottom=0)
    axes[0][0].set_ylabel("seed std (points) with its 95 % interval")
    figure.tight_layout()
    return figure


def write_comparison(studies: dict[str, Path], output: Path, columns: list[str] | None) -> str:
    """Write compare.json (the numbers), compare.csv (a row per configuration and column),
    spread.png and compare.md (the answer first) into `output`; return the answer."""
    record = compare(studies, columns)
    output.mkdir(parents=True, exist_ok=True)
    (output / "compare.json").write_text(json.dumps(record, indent=2))
    rows = pd.DataFrame(record["rows"])
    rows.to_csv(output / "compare.csv", index=False)
    figure = spread_figure(rows, record["reference"])
    save_figure(figure, output / FIGURE)
    plt.close(figure)
    answer = configurations_text(record)
    numbers = ["mean", "observed_std", "seed_std", "seed_std_low", "seed_std_high", "noise_std"]
    shown = rows.assign(**{c: 100 * rows[c] for c in [record["reference"], *numbers]})
    page = [
        "# Configurations compared",
        "",
        answer,
        "",
        f"![each configuration's seed spread beside its {record['reference']}]({FIGURE})",
        "",
        "In points (seed std: net of the evaluation noise, with its 95 % interval):",
        "",
        shown.to_markdown(index=False, floatfmt=".2f"),
        "",
    ]
    (output / "compare.md").write_text("\n".join(page))
    return answer
