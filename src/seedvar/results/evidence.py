"""What the verdict weighs, gathered from a study's seeds: the seeds table with each tested
column's bias-free counterpart, every column's evaluation noise and the design. From the seeds'
predictions and scores (paired noise; the AUC of the label's score), or from a published table
of rates (binomial noise; the equal-variance bias-free accuracy, the only one rates allow)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import logsumexp

from seedvar import metrics
from seedvar.config import Config
from seedvar.data.sets import diagnostic_reading
from seedvar.declared import Diagnostic, design_columns, in_distribution_name, task_to_diagnostic
from seedvar.errors import SeedvarError
from seedvar.seeds.finished import FinishedSeed
from seedvar.stats.analysis import Subgroup, nested_subgroups
from seedvar.stats.heuristic import HeuristicTest, cells_test, heuristic_test
from seedvar.stats.noise import Noise, Scored, binomial_noise, paired_auc_noise, paired_noise
from seedvar.stats.verdict import Design, Measure


@dataclass(frozen=True)
class Evidence:
    """The seeds table (bias-free counterparts added), each column's noise, the design, and
    each tested column's seed main-effect test where its scope has subcases."""

    table: pd.DataFrame
    noise: dict[str, Noise]
    design: Design
    heuristics: dict[str, HeuristicTest] = field(default_factory=dict)


def answers(runs_dir: Path, seeds: list[int], set_name: str) -> tuple[pd.DataFrame, np.ndarray]:
    """One set's examples (the first seed's: id, gold, groups) and seeds x examples predictions."""
    frames = [pd.read_parquet(FinishedSeed(runs_dir, seed).predictions(set_name)) for seed in seeds]
    examples = frames[0].drop(columns=[c for c in frames[0].columns if c.startswith("logit_")])
    for seed, frame in zip(seeds, frames, strict=True):
        if not frame["id"].equals(examples["id"]):
            raise SeedvarError(
                f"seed {seed} was evaluated on other {set_name} examples than seed {seeds[0]}; "
                "aggregate only seeds of one study (same data settings)"
            )
    predicted = np.stack([f["predicted"].to_numpy() for f in frames])
    return examples.drop(columns=["predicted"]), predicted


def auc_column(column: str) -> str:
    """The seeds-table name of a column's threshold-free counterpart (its label's AUC)."""
    return f"{column} [AUC]"


def label_scores(
    runs_dir: Path, seeds: list[int], set_name: str, config: Config, target: np.ndarray
) -> np.ndarray:
    """Seeds x examples x labels: each label's log-odds from the saved logits, a label being the
    task labels `target` maps to it (a diagnostic's: task_to_diagnostic; the task's: itself)."""
    names = [f"logit_{label}" for label in config.task.labels]
    found = []
    for seed in seeds:
        path = FinishedSeed(runs_dir, seed).predictions(set_name)
        frame = pd.read_parquet(path)
        if not set(names) <= set(frame.columns):
            raise SeedvarError(f"{path} has no logits ({', '.join(names)}); evaluate it again")
        logits = frame[names].to_numpy(float)
        odds = [
            logsumexp(logits[:, target == x], axis=1) - logsumexp(logits[:, target != x], axis=1)
            for x in range(int(target.max()) + 1)
        ]
        found.append(np.stack(odds, axis=-1))
    return np.stack(found)


def _design(config: Config, gold: dict[str, np.ndarray], measure: Measure) -> Design:
    """The design, each reference column with its set's majority-class share (`gold`); on the
    AUC, each reference's own AUC sets the counterparts' margin (one scale)."""
    reference, tested = design_columns(config.task, config.diagnostics)
    majority = {c: float(np.bincount(g).max() / len(g)) for c, g in gold.items()}
    name = auc_column if measure == "AUC" else metrics.bias_free_column
    own = {c: auc_column(c) for c in reference} if measure == "AUC" else {}
    held_in = tuple(config.plan.held_in)
    return Design(reference, tested, majority, {c: name(c) for c in tested}, measure, own, held_in)


def unit_values(
    config: Config, set_name: str, examples: pd.DataFrame, group: str | None
) -> np.ndarray | None:
    """Each example's value of a declared cluster or stratum group (None: none declared), from
    the seeds' predictions, or from the declared source by example id where the predictions
    predate the column (HANS's templates, recovered after those seeds were evaluated)."""
    if group is None:
        return None
    if group in examples and examples[group].notna().all():
        return examples[group].astype(str).to_numpy()
    declared = config.diagnostics[set_name]
    source = diagnostic_reading(config.task, declared).load(config).set_index("id")[group]
    values = examples["id"].map(source)
    if values.isna().any():
        raise SeedvarError(
            f"diagnostics.{set_name}: {values.isna().sum()} evaluated examples have no {group} "
            f"in {declared.source}; give the set its {group} column, or declare "
            f"`clusters: []` / `strata: null` to resample single examples"
        )
    return values.astype(str).to_numpy()


def subcases_of(
    set_name: str, declared: Diagnostic, examples: pd.DataFrame, tested: list[str]
) -> dict[str, tuple[Subgroup, np.ndarray, np.ndarray]]:
    """Per tested column whose bias-free scope is exactly a nested group's one-label subgroups
    of two labels (HANS: a heuristic's subcases): the subgroup, the scope and each example's
    subcase code (-1 outside)."""
    masks = dict((c.name, m) for c, m in metrics.diagnostic_columns(set_name, declared, examples))
    scopes = metrics.bias_free_scopes(set_name, declared, examples)
    found = {}
    for subgroup in nested_subgroups(set_name, declared, examples):
        union = np.logical_or.reduce([masks[c] for c in subgroup.columns])
        if len(set(subgroup.labels)) != 2:
            continue
        subcase = np.full(len(union), -1)
        for code, name in enumerate(subgroup.columns):
            subcase[masks[name]] = code
        for column in [c for c in tested if c in scopes and np.array_equal(scopes[c], union)]:
            found[column] = (subgroup, union, subcase)
    return found


def rate_cells(table: pd.DataFrame, subgroup: Subgroup) -> np.ndarray:
    """Seeds x first-label x other-label subcases: each pair's equal-variance bias-free
    accuracy from the two subcases' rates, Phi((z(a) + z(b)) / 2) (rates kept off 0 and 1 by
    half an example)."""
    first = min(subgroup.labels)
    z = {}
    for column, size in zip(subgroup.columns, subgroup.sizes, strict=True):
        rate = table[column].to_numpy(float).clip(0.5 / size, 1 - 0.5 / size)
        z[column] = stats.norm.ppf(rate)
    chosen = [(c, x) for c, x in zip(subgroup.columns, subgroup.labels, strict=True)]
    a = [z[c] for c, x in chosen if x == first]
    b = [z[c] for c, x in chosen if x != first]
    return stats.norm.cdf((np.stack(a, 1)[:, :, None] + np.stack(b, 1)[:, None, :]) / 2)


def from_predictions(config: Config, runs_dir: Path, table: pd.DataFrame) -> Evidence:
    """Evidence from the seeds' predictions: paired noise, and each tested column's AUC."""
    seeds, task = config.seeds, config.task
    noise: dict[str, Noise] = {}
    golds: dict[str, np.ndarray] = {}
    extra: dict[str, np.ndarray] = {}
    heuristics: dict[str, HeuristicTest] = {}
    for name, evaluated in task.evaluation.items():
        examples, predicted = answers(runs_dir, seeds, name)
        accuracy = in_distribution_name(name, evaluated)
        golds[accuracy] = gold = examples["gold"].to_numpy()
        scored = Scored(gold, predicted, len(task.labels))
        noise[accuracy] = paired_noise(scored, metrics.accuracy_of_counts)
        if evaluated.headline:
            own = np.arange(len(task.labels))
            scores = label_scores(runs_dir, seeds, name, config, own)
            found_auc = paired_auc_noise(Scored(gold, predicted, len(own), scores=scores))
            noise[auc_column(accuracy)] = found_auc
            extra[auc_column(accuracy)] = np.asarray(found_auc.values)
    _, tested = design_columns(config.task, config.diagnostics)
    for name, declared in config.diagnostics.items():
        examples, predicted = answers(runs_dir, seeds, name)
        gold = examples["gold"].to_numpy()
        cluster = declared.clusters[0] if declared.clusters else None
        clusters, strata = (
            unit_values(config, name, examples, g) for g in (cluster, declared.strata)
        )
        target = np.asarray(task_to_diagnostic(config.task, declared, name))
        scores = label_scores(runs_dir, seeds, name, config, target)
        units = (f"{cluster}s", f"{declared.strata}s")
        scored = Scored(gold, predicted, len(declared.labels), clusters, strata, scores, units)
        for tested_column, (_, scope, subcase) in subcases_of(
            name, declared, examples, [*tested]
        ).items():
            heuristics[tested_column] = heuristic_test(scored.subset(scope), subcase[scope])
        scopes = metrics.bias_free_scopes(name, declared, examples)
        for column, mask in metrics.diagnostic_columns(name, declared, examples):
            noise[column.name] = paired_noise(scored.subset(mask), metrics.accuracy_of_counts)
            if column.name in tested:
                auc = auc_column(column.name)
                noise[auc] = paired_auc_noise(scored.subset(scopes[column.name]))
                extra[auc] = np.asarray(noise[auc].values)
                rest = scopes[column.name] & ~mask
                if rest.any():
                    hits = predicted[:, rest] == gold[rest]
                    extra[metrics.other_labels_column(column.name)] = hits.mean(axis=1)
    return Evidence(table.assign(**extra), noise, _design(config, golds, "AUC"), heuristics)


def _rate_noise(rates: list[np.ndarray], sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Bias-free accuracy of two labels' rates per seed, and its binomial (delta) variance."""

    def value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        (n_a, n_b), miss_a, miss_b = sizes, 1 - a, 1 - b
        counts = np.stack(
            [np.stack([a * n_a, miss_a * n_a], -1), np.stack([miss_b * n_b, b * n_b], -1)], -2
        )
        return metrics.bias_free_accuracy(counts)

    a, b = rates
    step = 1e-6
    slope_a = (value(np.clip(a + step, 0, 1), b) - value(np.clip(a - step, 0, 1), b)) / (2 * step)
    slope_b = (value(a, np.clip(b + step, 0, 1)) - value(a, np.clip(b - step, 0, 1))) / (2 * step)
    variance = slope_a**2 * a * (1 - a) / sizes[0] + slope_b**2 * b * (1 - b) / sizes[1]
    return value(a, b), variance


def from_rates(config: Config, table: pd.DataFrame, examples: dict[str, pd.DataFrame]) -> Evidence:
    """Evidence from a per-run table of accuracies and the declared sets' `examples`."""
    reference, tested = design_columns(config.task, config.diagnostics)
    missing = [c for c in (*reference, *tested) if c not in table.columns]
    if missing:
        raise SeedvarError(
            f"the table has no column {', '.join(map(repr, missing[:3]))} of the study's "
            "design; give a table of this study's columns (one row per run), or the profile "
            "it was made with (--profile), or drop the sets it lacks (--set diagnostics.X=null)"
        )
    golds = {
        in_distribution_name(name, evaluated): examples[name]["label"].to_numpy()
        for name, evaluated in config.task.evaluation.items()
    }
    noise = {
        c: binomial_noise(table[c].to_numpy(float), len(g)) for c, g in golds.items() if c in table
    }
    extra: dict[str, np.ndarray] = {}
    for name, declared in config.diagnostics.items():
        gold = examples[name]["label"].to_numpy()
        masks = {c.name: m for c, m in metrics.diagnostic_columns(name, declared, examples[name])}
        scopes = metrics.bias_free_scopes(name, declared, examples[name])
        for c, m in masks.items():
            if c in table:
                noise[c] = binomial_noise(table[c].to_numpy(float), int(m.sum()))
        for column in [c for c in masks if c in tested]:
            scope = scopes[column]
            labels = sorted(set(gold[scope].tolist()))
            partners = [
                next((c for c, m in masks.items() if np.array_equal(m, scope & (gold == x))), None)
                for x in labels
            ]
            if len(labels) != 2 or None in partners or not set(partners) <= set(table.columns):
                raise SeedvarError(
                    f"{column}: a table of rates gives its bias-free accuracy only from one "
                    "column per gold label of its scope (two labels); run `seedvar aggregate` "
                    "over the seeds' predictions instead"
                )
            other = next(p for p in partners if p != column)
            extra[metrics.other_labels_column(column)] = table[other].to_numpy(float)
            sizes = [int((scope & (gold == x)).sum()) for x in labels]
            values, variance = _rate_noise([table[p].to_numpy(float) for p in partners], sizes)
            free = metrics.bias_free_column(column)
            extra[free] = values
            method = "delta method on binomial rates"
            noise[free] = Noise(float(variance.mean()), variance, method, values)
    heuristics = {}
    for name, declared in config.diagnostics.items():
        found = subcases_of(name, declared, examples[name], [*tested])
        for column, (subgroup, _, _) in found.items():
            if set(subgroup.columns) <= set(table.columns):
                heuristics[column] = cells_test(rate_cells(table, subgroup))
    design = _design(config, golds, "equal-variance")
    return Evidence(table.assign(**extra), noise, design, heuristics)
