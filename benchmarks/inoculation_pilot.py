"""Candidate recipes for the positive control: where do seeds part ways on a held-out rule?

Each candidate is the inoculation profile (the offline MiniLM, one epoch on all 34,411 MNLI
training pairs plus HANS-like training pairs of the held-in heuristics, evaluated on the
complete MNLI-m/mm and HANS sets) with its own settings, trained by `seedvar launch` in a
folder of its own and aggregated by `seedvar aggregate`. Its row in
docs/results/inoculation/pilot.csv is the wall time, the verdict's outcome and margin and, per
HANS headline column (held in or held out of the augmentation), the seeds' raw range and the
seed-std lower bound (evaluation noise removed) of the raw accuracy and of its threshold-free
counterpart (the AUC of the entailment score within the heuristic). Each finished candidate's
seeds table and verdict go to docs/results/inoculation/pilot/<candidate>/, and its row is
written as soon as it lands, so a pilot can span sessions; measured candidates are skipped.

The profile's sweep over the augmentation size (`seedvar sweep --profile inoculation`) is
tabled the same way, a row per size, in docs/results/inoculation/sweep.csv (another sweep
over it, named by `sweep.study_name`, in <study>.csv and <study>/).

Usage:  python benchmarks/inoculation_pilot.py lexical-300 lexical-1000 [--seeds 0 1 2 3]
        python benchmarks/inoculation_pilot.py --markdown   (the table the results page shows)
        python benchmarks/inoculation_pilot.py --sweep [STUDY]  (a sweep's rows and table)
        python benchmarks/inoculation_pilot.py --smoke DIR  (lexical-100, tiny, into DIR)
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import smoke

from seedvar.config import load_config
from seedvar.report.figures import save_figure
from seedvar.stats.bounds import ALPHA
from seedvar.training.device import cpu_description

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results" / "inoculation"
TABLE = "pilot.csv"  # in the results folder
SWEEP_TABLE = RESULTS / "sweep.csv"  # the sweep over the augmentation size, a row a size
PROFILE = "inoculation"
LEXICAL_ONLY = "task.augmentation.held_out={heuristic: [subsequence, constituent]}"
CANDIDATES = {  # name -> its settings over the profile
    "lexical-100": ["data.augment_examples=100", LEXICAL_ONLY],
    "lexical-300": ["data.augment_examples=300", LEXICAL_ONLY],
    "lexical-1000": ["data.augment_examples=1000", LEXICAL_ONLY],
    "lexical-3000": ["data.augment_examples=3000", LEXICAL_ONLY],
    "lexical+subsequence-300": [
        "data.augment_examples=300",
        "task.augmentation.held_out={heuristic: [constituent]}",
    ],
}
# the sweep's levels: alpha / 3, each of its three sizes; alpha / 6, also for a second look at a
# size whose seeds were added after its first verdict
SPLITS = (3, 6)
HEURISTICS = {"Lexical (nonent)": "lexical_overlap", "Subseq (nonent)": "subsequence"}
HEURISTICS |= {"Constituent (nonent)": "constituent"}


def held(settings: list[str]) -> dict[str, str]:
    """Per headline column: "in" or "out" of the augmentation under these settings."""
    config = load_config(None, settings, profile=PROFILE)
    assert config.task.augmentation is not None
    out = config.task.augmentation.held_out.get("heuristic", [])
    return {column: "out" if name in out else "in" for column, name in HEURISTICS.items()}


def run_candidate(
    name: str, seeds: list[int], work: Path, results: Path, more: list[str]
) -> dict[str, object]:
    """Train and aggregate one candidate in `work`/`name` (with the settings `more` under the
    candidate's own), its seeds table and verdict published in `results`/pilot/`name`; its
    row of the pilot table."""
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "data").exists():
        (folder / "data").symlink_to(REPO / "data")
    settings = ["--profile", PROFILE, "--set", f"seeds={seeds}"]
    settings += [arg for setting in [*more, *CANDIDATES[name]] for arg in ("--set", setting)]
    started = time.monotonic()
    subprocess.run(["seedvar", "launch", *settings], cwd=folder, check=True)
    minutes = (time.monotonic() - started) / 60
    pilot = results / "pilot" / name
    return aggregated_row(name, CANDIDATES[name], settings, folder, folder, minutes, pilot)


def sweep_folder(study: str) -> Path:
    """Where a sweep's rows are published: the profile's sweep in sweep/, another in <study>/."""
    profiles = load_config(None, profile=PROFILE).sweep.study_name
    return RESULTS / ("sweep" if study == profiles else study)


def sweep_rows(study_name: str, work: Path) -> list[dict[str, object]]:
    """A row per completed trial of the sweep `study_name` over the augmentation size, its seeds
    aggregated as a study of their own (at the study's alpha; the sweep's report divides it by
    the number of configurations). Minutes: the trial's, seeds adopted into it not counted."""
    import optuna

    config = load_config(None, [f"sweep.study_name={study_name}"], profile=PROFILE)
    study = optuna.load_study(study_name=config.sweep.study_name, storage=config.sweep.storage)
    rows = []
    for trial in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        size = trial.params["augment_examples"]
        name, chosen = f"lexical-{size}", [f"data.augment_examples={size}", LEXICAL_ONLY]
        seeds, folder = trial.user_attrs["seeds"], trial.user_attrs["output_dir"]
        settings = [
            "--profile",
            PROFILE,
            "--set",
            f"seeds={seeds}",
            "--set",
            f"output_dir={folder}",
        ]
        settings += [arg for setting in chosen for arg in ("--set", setting)]
        assert trial.datetime_complete and trial.datetime_start  # a completed trial's
        minutes = (trial.datetime_complete - trial.datetime_start).total_seconds() / 60
        into = sweep_folder(study_name) / name
        row = aggregated_row(name, chosen, settings, REPO, work / name, minutes, into)
        overrides = [setting for setting in settings[2:] if setting != "--set"]
        for split in SPLITS:
            outcome, reason = verdict_at(overrides, ALPHA / split)
            row[f"outcome at alpha/{split}"], row[f"reason at alpha/{split}"] = outcome, reason
        rows.append(row)
    return rows


def verdict_at(overrides: list[str], alpha: float) -> tuple[str, str]:
    """The verdict on a size's seeds at `alpha` (see SPLITS), from their predictions; and its
    reason."""
    from seedvar.report.wording import reason_text
    from seedvar.results.aggregate import prediction_shares
    from seedvar.results.evidence import from_predictions
    from seedvar.seeds.finished import FinishedSeed
    from seedvar.stats.verdict import verdict

    config = load_config(None, overrides, profile=PROFILE)
    runs = Path(config.output_dir)
    table = pd.DataFrame([FinishedSeed(runs, seed).metrics() for seed in config.seeds])
    found = from_predictions(config, runs, table)
    shares = prediction_shares(config, table)
    decided = verdict(found.table, found.noise, found.design, shares, alpha)
    return decided.outcome, reason_text(decided.reason)


def aggregated_row(
    name: str,
    chosen: list[str],
    settings: list[str],
    cwd: Path,
    work: Path,
    minutes: float,
    published: Path,
) -> dict[str, object]:
    """`seedvar aggregate` with `settings`, run in `cwd`, into `work`/results; its seeds table
    and verdict copied to `published`; the candidate's row (`chosen`: its own settings)."""
    results = work.resolve() / "results"
    seedvar = ["seedvar", "aggregate", *settings, "--results", str(results)]
    subprocess.run(seedvar, cwd=cwd, check=True)
    published.mkdir(parents=True, exist_ok=True)
    for kept in ("seeds.csv", "verdict.json"):
        shutil.copy(results / kept, published / kept)
    verdict = json.loads((results / "verdict.json").read_text())
    seeds_table = pd.read_csv(results / "seeds.csv")
    columns = {row["column"]: row for row in verdict["columns"]}
    row: dict[str, object] = {
        "recipe": name,
        "settings": "; ".join(chosen),
        "seeds": len(seeds_table),
        "minutes": round(minutes, 1),
        "outcome": verdict["outcome"],
        "margin": verdict["margin"],
        "mnli_m_mean": columns["MNLI dev acc."]["mean"],
        "measure": verdict["design"].get("measure", "equal-variance"),
    }
    for column, where in held(chosen).items():
        free = columns[verdict["design"]["bias_free"][column]]
        row[f"{column}: held"] = where
        row[f"{column}: min"] = seeds_table[column].min()
        row[f"{column}: max"] = seeds_table[column].max()
        row[f"{column}: seed std low"] = columns[column]["seed_std_low"]
        row[f"{column}: counterpart mean"] = free["mean"]
        row[f"{column}: counterpart observed std"] = free["observed_std"]
        row[f"{column}: counterpart noise std"] = free["noise_std"]
        row[f"{column}: counterpart seed std low"] = free["seed_std_low"]
    row["cpu"] = cpu_description()
    row["date"] = datetime.date.today().isoformat()
    return row


def plot_sweep(rows: pd.DataFrame, path: Path) -> None:
    """Each seed's AUC per HANS heuristic against the augmentation size, chance dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(HEURISTICS), figsize=(11, 3.4), sharey=True)
    sizes = sorted(int(recipe.split("-")[1]) for recipe in rows["recipe"])
    for axis, column in zip(axes, HEURISTICS, strict=True):
        for place, size in enumerate(sizes):
            seeds = pd.read_csv(path.parent / f"lexical-{size}" / "seeds.csv")
            auc = 100 * seeds[f"{column} [AUC]"]
            axis.scatter([place] * len(auc), auc, s=14, alpha=0.7, color="tab:blue")
        held = rows[f"{column}: held"].iloc[0]
        axis.axhline(50, color="grey", linestyle="--", linewidth=0.8)
        axis.set(title=f"{column.split(' ')[0]} (held {held})", xlabel="lexical-overlap pairs")
        axis.set_xticks(range(len(sizes)), [f"{size:,}" for size in sizes])
    axes[0].set_ylabel("AUC of the entailment score (%)")
    figure.tight_layout()
    save_figure(figure, path)
    plt.close(figure)


def markdown(rows: pd.DataFrame) -> str:
    """The pilot as a Markdown table: per HANS heuristic (held in or out), the raw range, the
    raw seed-std lower bound and the counterpart's mean, observed std, noise and seed-std lower
    bound (points; AUC in %)."""
    lines = [
        "| recipe | seeds | MNLI-m | heuristic | held | raw range | raw seed std low | "
        "AUC mean | AUC observed std | AUC noise | AUC seed std low | margin | verdict |",
        "|---" * 13 + "|",
    ]
    for row in rows.to_dict("records"):
        for column in HEURISTICS:
            points = {key: 100 * row[f"{column}: {key}"] for key in _NUMBERS}
            lines.append(
                f"| {row['recipe']} | {row['seeds']} | {100 * row['mnli_m_mean']:.1f} % | "
                f"{column} | {row[f'{column}: held']} | "
                f"{points['min']:.1f}-{points['max']:.1f} % | {points['seed std low']:.2f} | "
                f"{points['counterpart mean']:.1f} | {points['counterpart observed std']:.2f} | "
                f"{points['counterpart noise std']:.2f} | "
                f"{points['counterpart seed std low']:.2f} | {100 * row['margin']:.2f} | "
                f"{row['outcome']} |"
            )
    return "\n".join(lines)


_NUMBERS = (
    "min",
    "max",
    "seed std low",
    "counterpart mean",
    "counterpart observed std",
    "counterpart noise std",
    "counterpart seed std low",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidates", nargs="*", help=", ".join(CANDIDATES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--markdown", action="store_true", help="print the table and stop")
    parser.add_argument(
        "--sweep",
        nargs="?",
        const=load_config(None, profile=PROFILE).sweep.study_name,
        metavar="STUDY",
        help="rows of a sweep over the augmentation size (default: the profile's, in sweep.csv; "
        "another in STUDY.csv), then its table",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/inoculation-pilot"))
    smoke.add_option(parser)
    args = parser.parse_args()
    results, work, candidates, more = RESULTS, args.work, args.candidates, []
    if args.smoke:
        results, work, candidates = args.smoke, args.smoke / "work", ["lexical-100"]
        more = smoke.SETTINGS
    table = results / TABLE
    if args.markdown:
        print(markdown(pd.read_csv(table)))
        return
    if args.sweep:
        folder = sweep_folder(args.sweep)
        table = SWEEP_TABLE if folder.name == "sweep" else RESULTS / f"{args.sweep}.csv"
        pd.DataFrame(sweep_rows(args.sweep, args.work / args.sweep)).to_csv(table, index=False)
        plot_sweep(pd.read_csv(table), folder / "auc_by_size.png")
        print(markdown(pd.read_csv(table)))
        return
    unknown = [name for name in candidates if name not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidate {', '.join(unknown)}; choose from {', '.join(CANDIDATES)}")
    rows = pd.read_csv(table).to_dict("records") if table.is_file() else []
    for name in candidates:
        if name in {row["recipe"] for row in rows}:
            print(f"{name}: measured before, skipped")
            continue
        rows.append(run_candidate(name, args.seeds, work, results, more))
        pd.DataFrame(rows).to_csv(table, index=False)  # after each: nothing measured is lost
        print(pd.Series(rows[-1]).to_string())
    if args.smoke:
        print(markdown(pd.DataFrame(rows)))


if __name__ == "__main__":
    main()
