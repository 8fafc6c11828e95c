"""Gather the seeds of a study into results/: tables, statistics, agreement, the verdict."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from seedvar.config import Config
from seedvar.data.io import read_table
from seedvar.declared import in_distribution_name, primary_column, shown_columns
from seedvar.errors import SeedvarError
from seedvar.metrics import MAJORITY_SHARE, Column, diagnostic_columns, majority_share_column
from seedvar.results.evidence import Evidence, answers, from_predictions
from seedvar.results.past_the_paper import write_further
from seedvar.results.plan import control_tests, plan_look
from seedvar.seeds.finished import FinishedSeed
from seedvar.stats import analysis
from seedvar.stats.correlation import Correlation, Prediction, correlate, predicts
from seedvar.stats.plan import ControlTest, Look
from seedvar.stats.verdict import Verdict, verdict

SCATTER_X, SCATTER_Y = "in-distribution accuracy", "diagnostic accuracy"  # results/scatter.csv
HEADLINE = "headline.json"  # the study's DVC metrics: `dvc exp show` a column per number


@dataclass(frozen=True)
class Aggregated:
    """What `aggregate` decided, for the records the report layer words (report.wording)."""

    evidence: Evidence
    decision: Verdict
    predicts: Prediction
    reference_predicts: Prediction | None
    correlations: list[Correlation]
    components: pd.DataFrame  # its notes as reasons
    look: Look  # the analysis plan's look at these seeds
    control: list[ControlTest]  # the treated spread against the negative control's


def seed_table(runs_dir: Path, seeds: list[int], first: Sequence[str] = ()) -> pd.DataFrame:
    """One row per finished seed: the seed, the `first` columns there are, then the rest."""
    rows = []
    for seed in seeds:
        job = FinishedSeed(runs_dir, seed)
        job.check()
        metrics = job.metrics()
        if metrics is None:
            raise SeedvarError(
                f"seed {seed} has no results ({job.folder} is not finished); "
                f"run `dvc repro` or `seedvar train --seed {seed}` first"
            )
        rows.append({"seed": seed, **metrics})
    for row in rows[1:]:
        if row.keys() != rows[0].keys():
            missing = sorted(rows[0].keys() ^ row.keys())
            raise SeedvarError(
                f"seeds {rows[0]['seed']} and {row['seed']} report different metrics "
                f"({', '.join(missing[:5])}): they were evaluated on different sets or groups; "
                "evaluate every seed of a study on the same data"
            )
    table = pd.DataFrame(rows)
    columns = list(dict.fromkeys(c for c in ("seed", *first) if c in table))
    return table[[*columns, *[c for c in table.columns if c not in columns]]]


def as_trained(config: Config, runs_dir: Path) -> Config:
    """The study's config with its "auto" precisions as its first finished seed chose them
    (the machine that aggregates may not be the one that trained)."""
    seeds = (FinishedSeed(runs_dir, s) for s in config.seeds)
    first = next((seed for seed in seeds if seed.metrics() is not None), None)
    return config if first is None else config.with_precisions_of(first.config())


def require_one_recipe(config: Config, runs_dir: Path, seeds: list[int]) -> None:
    """SeedvarError naming the seeds whose recipe is not the study's (`config` as trained)."""
    expected = config.recipe(per_seed=False)
    problems = []
    for seed in seeds:
        trained = FinishedSeed(runs_dir, seed).config().recipe(per_seed=False)
        differing = [
            f"{key} {trained.get(key)!r} (study: {expected.get(key)!r})"
            for key in sorted(expected.keys() | trained.keys())
            if trained.get(key) != expected.get(key)
        ]
        if differing:
            problems.append(f"seed {seed}: {', '.join(differing[:4])}")
    if problems:
        raise SeedvarError(
            f"seeds trained with another recipe than this study's: {'; '.join(problems[:3])}; "
            "aggregate one recipe at a time (retrain those seeds or point output_dir elsewhere)"
        )


def aggregate(config: Config, runs_dir: Path, results_dir: Path) -> Aggregated:
    """Write results/ but for its worded records and return what the report layer words."""
    results_dir.mkdir(parents=True, exist_ok=True)
    seeds, task = config.seeds, config.task
    paper = read_table(Path(config.reference.runs)) if config.reference else None
    first = [*(paper.columns if paper is not None else ())]
    first += [in_distribution_name(n, d) for n, d in task.evaluation.items()]
    table = seed_table(runs_dir, seeds, first)
    config = as_trained(config, runs_dir)
    require_one_recipe(config, runs_dir, seeds)
    evidence = from_predictions(config, runs_dir, table)
    table, design = evidence.table, evidence.design
    table.to_csv(results_dir / "seeds.csv", index=False)
    columns = FinishedSeed(runs_dir, seeds[0]).columns()
    accuracies = [c for c in columns if not c.name.startswith(MAJORITY_SHARE)]
    diagnostics = [c for c in accuracies if c.set in config.diagnostics]
    diagnostic = [c for c in table.columns if c in {d.name for d in diagnostics}]  # its order
    base = primary_column(task)

    numeric = [c for c in table.columns if c != "seed"]
    summary = analysis.describe(table, numeric)
    write_json(results_dir / "summary.json", {"seeds": seeds, "columns": summary.to_dict("index")})
    _write_agreement(config, runs_dir, results_dir, accuracies)
    compared = [c for c in numeric if not c.startswith(MAJORITY_SHARE)]
    comparison = analysis.compare_spread(table, paper, compared, base)
    comparison.to_csv(results_dir / "comparison.csv", index_label="column")
    interaction = analysis.interaction_table(table, subgroups(config, runs_dir))
    interaction.to_csv(results_dir / "interaction.csv", index=False)
    planned = plan_look(config, runs_dir)
    shares = prediction_shares(config, table)
    decision = verdict(table, evidence.noise, design, shares, planned.alpha, evidence.heuristics)
    control = control_tests(config, table, design)
    variance = {column: found.paired_var for column, found in evidence.noise.items()}
    components = write_further(config, table, runs_dir, results_dir, variance, design.tested, paper)
    predicted = [*design.tested, *(c.name for c in diagnostics if c.key.endswith("/overall"))]
    scatter = {"seed": table["seed"], SCATTER_X: table[base], SCATTER_Y: table[design.tested[0]]}
    pd.DataFrame(scatter).to_csv(results_dir / "scatter.csv", index=False)
    keys = {column.name: column.key for column in columns}
    shown = [c for c in shown_columns(task, config.diagnostics) if c in table]
    stats = ["mean", "std", "min", "max"]
    headline: dict[str, object] = {keys[c]: summary.loc[c, stats].to_dict() for c in shown}
    headline |= {"seeds": {"count": len(seeds)}, "verdict": {"outcome": decision.outcome}}
    write_headline(results_dir / HEADLINE, headline)
    reference = None
    if paper is not None and base in paper:
        reference = predicts(paper, base, [c for c in predicted if c in paper])
    correlations = correlate(table, base, diagnostic)
    found = (predicts(table, base, predicted), reference, correlations, components)
    return Aggregated(evidence, decision, *found, planned, control)


def subgroups(config: Config, runs_dir: Path) -> list[analysis.Subgroup]:
    """Every diagnostic set's nested groups (HANS: each heuristic's subcases), from seed one."""
    found = []
    for name, declared in config.diagnostics.items():
        examples = answers(runs_dir, config.seeds[:1], name)[0]
        found += analysis.nested_subgroups(name, declared, examples)
    return found


def write_headline(path: Path, headline: dict[str, object]) -> None:
    """The headline as DVC metrics, one file (entries by MLflow key, e.g. hans/lexical_nonent),
    so that `dvc exp show` names each column by its key alone, without the file's path."""
    write_json(path, headline)


def read_headline(path: Path) -> dict[str, dict[str, object]]:
    """The headline `write_headline` wrote, by key."""
    return json.loads(path.read_text())


def prediction_shares(config: Config, table: pd.DataFrame) -> dict[str, list[float]]:
    """Per in-distribution set, each seed's share of its most frequent predicted label."""
    return {
        name: table[majority_share_column(name)].tolist()
        for name in config.task.evaluation
        if majority_share_column(name) in table
    }


def _write_agreement(
    config: Config, runs_dir: Path, results_dir: Path, columns: list[Column]
) -> None:
    """results/agreement/<set>.csv (seeds right per example) and multibootstrap.csv."""
    folder = results_dir / "agreement"
    folder.mkdir(exist_ok=True)
    rows = []
    for set_name in (*config.task.evaluation, *config.diagnostics):
        examples, predicted = answers(runs_dir, config.seeds, set_name)
        correct = predicted == examples["gold"].to_numpy()[None, :]
        examples["n_correct"] = analysis.agreement(correct)
        examples["n_seeds"] = len(config.seeds)
        examples.to_csv(folder / f"{set_name}.csv", index=False)
        if set_name not in config.diagnostics:
            continue
        masks = diagnostic_masks(config, set_name, examples)
        for column in [c for c in columns if c.set == set_name]:
            found = analysis.multibootstrap(correct[:, masks[column.name]])
            keys = ("set", "column", "accuracy", "ci_low", "ci_high")
            rows.append(dict(zip(keys, (set_name, column.name, *found), strict=True)))
    pd.DataFrame(rows).to_csv(results_dir / "multibootstrap.csv", index=False)


def diagnostic_masks(
    config: Config, set_name: str, examples: pd.DataFrame
) -> dict[str, np.ndarray]:
    """Each column of a diagnostic set with the mask of its examples."""
    found = diagnostic_columns(set_name, config.diagnostics[set_name], examples)
    return {column.name: mask for column, mask in found}


def write_json(path: Path, content: object) -> None:
    """JSON without NaN or inf (an undefined number is written as null)."""
    finite = json.loads(json.dumps(content), parse_constant=lambda _: None)
    path.write_text(json.dumps(finite, indent=2, allow_nan=False))


def flat_headline(results_dir: Path) -> dict[str, float]:
    """The headline's numbers as flat MLflow metric keys, e.g. study/hans/lexical_nonent/std."""
    headline = read_headline(results_dir / HEADLINE)
    return {
        f"study/{column}/{stat}": value
        for column, stats in headline.items()
        for stat, value in stats.items()
        if isinstance(value, int | float)
    }
