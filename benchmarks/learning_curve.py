"""Learning curve of the cpu profile: accuracy against training pairs, epochs and seconds.

Each point is seed 0 of the cpu profile with `data.max_train_examples` and `train.epochs` (and
optionally `train.precision`) set, trained and evaluated on the complete MNLI-m/mm and HANS
sets by the same `run_seed` every study uses; its seconds are the seed's own `time/` metrics.
Points are appended to docs/results/learning-curve/points.csv as each finishes, and points
already there are skipped, so the curve can be measured over several sessions. The plot,
learning-curve.png, puts MNLI-m and HANS non-entailed accuracy against seconds per seed, with
the 15-minute budget of one cpu-profile seed.

Usage:  python benchmarks/learning_curve.py 6000x1 6000x2 17000x1@bf16-mixed ...
        python benchmarks/learning_curve.py --plot
        python benchmarks/learning_curve.py --smoke DIR   (the point 32x1, tiny, into DIR)
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import smoke  # noqa: E402
from mlflow import MlflowClient  # noqa: E402

from seedvar.config import load_config  # noqa: E402
from seedvar.declared import primary_column  # noqa: E402
from seedvar.metrics import EVALUATE_SECONDS, TRAIN_SECONDS  # noqa: E402
from seedvar.report.figures import save_figure  # noqa: E402
from seedvar.seeds.seed import run_seed  # noqa: E402
from seedvar.training.device import (  # noqa: E402
    cpu_description,
    resolve_eval_precision,
    resolve_precision,
)

PAPER = load_config(None)  # the paper's declaration names the columns measured here
MNLI_MATCHED = primary_column(PAPER.task)
NON_ENTAILED_COLUMNS = PAPER.diagnostics["hans"].headline
SUBJECT_OBJECT_SWAP = PAPER.diagnostics["hans"].highlight[0]
HANS_NON_ENTAILED = "HANS non-entailed"  # points.csv's column: the headline columns' mean


def hans_non_entailed(metrics: dict[str, float]) -> float:
    return sum(metrics[column] for column in NON_ENTAILED_COLUMNS) / len(NON_ENTAILED_COLUMNS)


REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results" / "learning-curve"
POINTS = "points.csv"  # in the results folder
BUDGET_SECONDS = 15 * 60  # one cpu-profile seed, training and evaluation
KEY = ["train_pairs", "epochs", "precision"]


def parse_point(text: str) -> tuple[int, int, str]:
    """'17000x1' or '17000x1@bf16-mixed' -> (17000, 1, '32-true' or the precision)."""
    size, _, precision = text.partition("@")
    pairs, epochs = size.split("x")
    return int(pairs), int(epochs), precision or "32-true"


def measure(
    pairs: int, epochs: int, precision: str, workdir: Path, more: list[str]
) -> dict[str, object]:
    """Train and evaluate seed 0 of the cpu profile (with the settings `more`) at this size;
    its row of points.csv."""
    name = f"{pairs}x{epochs}@{precision}"
    config = load_config(
        None,
        [
            *more,
            f"data.max_train_examples={pairs}",
            f"train.epochs={epochs}",
            f"train.precision={precision}",
            f"output_dir={workdir / name}",
            f"tracking.uri=sqlite:///{workdir / 'mlflow.db'}",
            "tracking.experiment=learning-curve",
        ],
        profile="cpu",
    )
    result = run_seed(config, "reuse")  # a seed measured before this row was written: kept
    assert result.run_id is not None and result.metrics is not None  # a finished seed's
    timings = MlflowClient(config.tracking.uri).get_run(result.run_id).data.metrics
    train_s, evaluate_s = timings[TRAIN_SECONDS], timings[EVALUATE_SECONDS]
    metrics = result.metrics
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    return {
        "train_pairs": pairs,
        "epochs": epochs,
        "precision": resolve_precision(config),
        "eval_precision": resolve_eval_precision(config),
        "cpu": cpu_description(),
        "train_seconds": round(train_s, 1),
        "evaluate_seconds": round(evaluate_s, 1),
        "seed_seconds": round(train_s + evaluate_s if result.reused else result.wall_seconds, 1),
        MNLI_MATCHED: metrics[MNLI_MATCHED],
        HANS_NON_ENTAILED: hans_non_entailed(metrics),
        **{column: metrics[column] for column in (*NON_ENTAILED_COLUMNS, SUBJECT_OBJECT_SWAP)},
        "commit": commit,
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def measured_points(results: Path) -> pd.DataFrame:
    """The points measured into `results`/points.csv."""
    points = results / POINTS
    return pd.read_csv(points) if points.exists() else pd.DataFrame(columns=KEY)


def plot(points: pd.DataFrame, results: Path) -> Path:
    """MNLI-m and HANS non-entailed accuracy against seconds per seed, one marker per point;
    written to `results`/learning-curve.png."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for axis, column in zip(axes, (MNLI_MATCHED, HANS_NON_ENTAILED), strict=True):
        for precision, group in points.groupby("precision"):
            axis.scatter(group["seed_seconds"] / 60, group[column] * 100, label=precision)
            for _, row in group.iterrows():
                label = f"{row['train_pairs']:,} x {row['epochs']}"
                axis.annotate(
                    label,
                    (row["seed_seconds"] / 60, row[column] * 100),
                    xytext=(4, -12 if precision == "32-true" else 4),  # apart at the same size
                    textcoords="offset points",
                    fontsize=8,
                )
        axis.axvline(BUDGET_SECONDS / 60, color="gray", linestyle="--", label="15-minute budget")
        axis.set_xlabel("minutes per seed (training + full evaluation, 2 CPU cores)")
        axis.set_ylabel(f"{column} (%)")
        axis.set_title(column)
    axes[0].axhline(100 / 3, color="lightgray", linestyle=":", label="chance")
    axes[0].legend(fontsize=8)
    figure.suptitle("Offline MiniLM, seed 0: training pairs x epochs (labels), one seed each")
    out = results / "learning-curve.png"
    save_figure(figure, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("points", nargs="*", help="PAIRSxEPOCHS[@PRECISION], e.g. 17000x1")
    parser.add_argument("--workdir", type=Path, default=REPO / ".cache" / "learning-curve")
    parser.add_argument("--plot", action="store_true", help="only redraw the plot")
    smoke.add_option(parser)
    args = parser.parse_args()
    results, workdir, texts, more = RESULTS, args.workdir, args.points, []
    if args.smoke:
        results, workdir, texts, more = args.smoke, args.smoke / "work", ["32x1"], smoke.SETTINGS
    results.mkdir(parents=True, exist_ok=True)
    for text in [] if args.plot else texts:
        point = parse_point(text)
        done = measured_points(results)
        if ((done[KEY] == pd.Series(point, index=KEY)).all(axis=1)).any():
            print(f"{text}: measured before, skipped")
            continue
        row = measure(*point, workdir, more)
        pd.concat([done, pd.DataFrame([row])]).to_csv(results / POINTS, index=False)
        print(f"{text}: {row}", flush=True)
    points = measured_points(results)
    if len(points):
        print(points.to_string(index=False))
        print(f"plot: {plot(points, results)}")


if __name__ == "__main__":
    main()
