"""Candidate recipes for the demo: does any give a bias-free effect in about ten minutes?

Each candidate is the demo profile (4 seeds of the offline MiniLM, 3,000 pairs of MNLI-m,
MNLI-mm and HANS) with `data.max_train_examples` and `train.epochs` set, trained in fp32 (what
`make study` does on a CPU without native bf16) by `seedvar launch` in a folder of its own, then
aggregated by `seedvar aggregate`; the row it adds to docs/results/demo/recipes.csv is the
study's wall time and its verdict: the outcome, and per HANS headline column the seeds' spread
(the lower bound of the seed std, evaluation noise removed) of the raw accuracy and of the
bias-free accuracy, beside the verdict's margin. Candidates already in the file are skipped, so
the comparison can be measured over several sessions.

Usage:  python benchmarks/demo_recipes.py 3000x1 6000x1 3000x2 [--work /tmp/demo-recipes]
        python benchmarks/demo_recipes.py --markdown   (the table docs/results/demo shows)
        python benchmarks/demo_recipes.py --smoke DIR  (32x1, tiny, its table into DIR)
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import time
from pathlib import Path

import pandas as pd
import smoke

from seedvar.config import load_config
from seedvar.training.device import cpu_description

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "docs" / "results" / "demo" / "recipes.csv"
HEADLINE = load_config(None, profile="demo").diagnostics["hans"].headline


def overrides(pairs: int, epochs: int, more: list[str]) -> list[str]:
    """`--set` arguments: the settings `more`, then the candidate's own."""
    settings = [*more, f"data.max_train_examples={pairs}", f"train.epochs={epochs}"]
    return [arg for setting in [*settings, "train.precision=32-true"] for arg in ("--set", setting)]


def run_candidate(name: str, work: Path, more: list[str]) -> dict[str, object]:
    """Train and aggregate one candidate in `work`/`name` (with the settings `more` under the
    candidate's own); its row of the comparison."""
    pairs, epochs = map(int, name.split("x"))
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "data").exists():
        (folder / "data").symlink_to(REPO / "data")
    settings = ["--profile", "demo", *overrides(pairs, epochs, more)]
    started = time.monotonic()
    subprocess.run(["seedvar", "launch", *settings], cwd=folder, check=True)
    minutes = (time.monotonic() - started) / 60
    subprocess.run(
        ["seedvar", "aggregate", *settings, "--results", "results"], cwd=folder, check=True
    )
    verdict = json.loads((folder / "results" / "verdict.json").read_text())
    columns = {row["column"]: row for row in verdict["columns"]}
    row: dict[str, object] = {
        "recipe": name,
        "train_pairs": pairs,
        "epochs": epochs,
        "seeds": columns[HEADLINE[0]]["n_seeds"],
        "minutes": round(minutes, 1),
        "outcome": verdict["outcome"],
        "margin": verdict["margin"],
        "mnli_m_mean": columns["MNLI dev acc."]["mean"],
        # what the counterpart columns hold: the AUC of the label's score from saved logits
        # (studies aggregated since the AUC counterpart), else the equal-variance measure
        "measure": verdict["design"].get("measure", "equal-variance"),
    }
    for column in HEADLINE:
        free = columns[verdict["design"]["bias_free"][column]]
        row[f"{column}: seed std low"] = columns[column]["seed_std_low"]
        row[f"{column}: bias-free mean"] = free["mean"]
        row[f"{column}: bias-free seed std low"] = free["seed_std_low"]
    row["cpu"] = cpu_description()
    row["date"] = datetime.date.today().isoformat()
    return row


def _counterpart_mean(value: float, measure: str) -> str:
    return f"AUC {value:.3f}" if measure == "AUC" else f"{100 * value:.1f} %"


def markdown(rows: pd.DataFrame) -> str:
    """The comparison as a Markdown table: per headline column the seed-std lower bounds of
    the raw column and of its bias-free counterpart (in points), and the counterpart's mean
    (the equal-variance bias-free accuracy in %, or the AUC of the label's score), with the
    measure named per row (rows measured before the AUC counterpart lack it: equal-variance)."""
    head = "| recipe | minutes | MNLI-m | counterpart | " + " | ".join(
        f"{c}: spread, counterpart spread (mean)" for c in HEADLINE
    )
    lines = [head + " | margin | verdict |", "|---" * (len(HEADLINE) + 6) + "|"]
    for row in rows.to_dict("records"):
        measure = row.get("measure")
        measure = measure if isinstance(measure, str) else "equal-variance"
        points = {k: 100 * v for k, v in row.items() if isinstance(v, float)}
        cells = [
            f"{points[f'{c}: seed std low']:.1f}, {points[f'{c}: bias-free seed std low']:.1f}"
            f" ({_counterpart_mean(row[f'{c}: bias-free mean'], measure)})"
            for c in HEADLINE
        ]
        lines.append(
            f"| {int(row['train_pairs']):,} pairs x {int(row['epochs'])} | {row['minutes']} | "
            f"{100 * row['mnli_m_mean']:.1f} % | {measure} | "
            + " | ".join(cells)
            + f" | {100 * row['margin']:.1f} | {row['outcome']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidates", nargs="*", help="PAIRSxEPOCHS, e.g. 6000x1")
    parser.add_argument("--markdown", action="store_true", help="print the table and stop")
    parser.add_argument("--work", type=Path, default=Path("/tmp/demo-recipes"))
    smoke.add_option(parser)
    args = parser.parse_args()
    table, work, candidates, more = TABLE, args.work, args.candidates, []
    if args.smoke:
        table, work, candidates = args.smoke / TABLE.name, args.smoke / "work", ["32x1"]
        more = smoke.SETTINGS
    if args.markdown:
        print(markdown(pd.read_csv(table)))
        return
    rows = pd.read_csv(table).to_dict("records") if table.is_file() else []
    for name in candidates:
        if name in {row["recipe"] for row in rows}:
            print(f"{name}: measured before, skipped")
            continue
        rows.append(run_candidate(name, work, more))
        pd.DataFrame(rows).to_csv(table, index=False)  # after each: nothing measured is lost
        print(pd.Series(rows[-1]).to_string())
    if args.smoke:
        print(markdown(pd.DataFrame(rows)))


if __name__ == "__main__":
    main()
