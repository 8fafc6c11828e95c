"""aggregate and report on synthetic seeds: files, values, one point per seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seedvar.config import Config, load_config
from seedvar.errors import SeedvarError
from seedvar.metrics import SUBCASES, EvalSet
from seedvar.study.aggregate import aggregate, flat_headline
from seedvar.study.evaluate import prediction_frame, prediction_metrics
from seedvar.study.report import plot_mnli_vs_hans, plot_subcases, write_report
from tests.conftest import OFFLINE

SEEDS = [0, 1, 2, 3]
REFERENCE = OFFLINE / "reference" / "mccoy2020_runs.csv"


def _examples() -> dict[EvalSet, pd.DataFrame]:
    mnli = pd.DataFrame({"id": [str(i) for i in range(60)], "label": np.arange(60) % 3})
    heuristic = {"l": "lexical_overlap", "s": "subsequence", "c": "constituent"}
    hans = pd.DataFrame(
        [
            {
                "id": f"ex{i * 4 + k}",
                "label": int(s[1] == "n"),
                "heuristic": heuristic[s[0]],
                "subcase": s,
                "template": None,
            }
            for i, s in enumerate(SUBCASES)
            for k in range(4)
        ]
    )
    return {EvalSet.MNLI_MATCHED: mnli, EvalSet.MNLI_MISMATCHED: mnli, EvalSet.HANS: hans}


def _write_seed(
    runs: Path, seed: int, examples: dict[EvalSet, pd.DataFrame], config: Config
) -> None:
    rng = np.random.default_rng(seed)
    metrics = {}
    for name, frame in examples.items():
        logits = rng.normal(size=(len(frame), 3)).astype(np.float32)
        predictions = prediction_frame(name, frame, logits)
        (runs / f"seed-{seed}" / "predictions").mkdir(parents=True, exist_ok=True)
        predictions.to_parquet(runs / f"seed-{seed}" / "predictions" / f"{name}.parquet")
        metrics.update(prediction_metrics(name, predictions))
    (runs / f"seed-{seed}" / "metrics.json").write_text(json.dumps(metrics))
    config.with_seed(seed).save(runs / f"seed-{seed}" / "config.yaml")


@pytest.fixture
def results(tmp_path: Path) -> tuple[Path, object]:
    examples = _examples()
    config = load_config(None, [f"seeds={SEEDS}", f"data.reference_runs={REFERENCE}"])
    for seed in SEEDS:
        _write_seed(tmp_path / "runs", seed, examples, config)
    aggregate(config, tmp_path / "runs", tmp_path / "results")
    return tmp_path / "results", config


def test_aggregate_writes_every_table(results):
    results_dir, _ = results
    seeds = pd.read_csv(results_dir / "seeds.csv")
    assert seeds["seed"].tolist() == SEEDS
    assert list(seeds.columns[:3]) == ["seed", "MNLI dev acc.", "Lexical (entailed)"]
    assert set(SUBCASES) <= set(seeds.columns) and "MNLI-mm acc." in seeds.columns

    summary = json.loads((results_dir / "summary.json").read_text())
    swap = summary["columns"]["ln_subject/object_swap"]
    values = seeds["ln_subject/object_swap"]
    assert swap["min"] == values.min() and swap["max"] == values.max()
    assert swap["std"] == pytest.approx(values.std(ddof=1))
    assert swap["ci_low"] <= swap["mean"] <= swap["ci_high"]

    hans = pd.read_csv(results_dir / "agreement_hans.csv")
    assert len(hans) == 120 and hans["n_seeds"].eq(4).all()
    by_hand = sum(
        (
            pd.read_parquet(results_dir.parent / f"runs/seed-{s}/predictions/hans.parquet")
            .eval("gold == predicted")
            .to_numpy()
        )
        for s in SEEDS
    )
    assert hans["n_correct"].tolist() == by_hand.tolist()
    mnli = pd.read_csv(results_dir / "agreement_mnli_matched.csv")
    assert len(mnli) == 60 and mnli["n_correct"].between(0, 4).all()

    boot = pd.read_csv(results_dir / "multibootstrap.csv")
    assert boot["subcase"].tolist() == list(SUBCASES)
    assert (boot["ci_low"] <= boot["accuracy"]).all() and (
        boot["accuracy"] <= boot["ci_high"]
    ).all()

    comparison = pd.read_csv(results_dir / "comparison.csv", index_col="column")
    paper = pd.read_csv(REFERENCE)
    assert comparison.loc["ln_subject/object_swap", "paper_std"] == pytest.approx(
        paper["ln_subject/object_swap"].std(ddof=1)
    )
    assert comparison.loc["MNLI dev acc.", "paper_min"] == pytest.approx(0.8367, abs=1e-4)

    correlations = pd.read_csv(results_dir / "correlations.csv")
    assert len(correlations) == 6 + 1 + 30

    flat = flat_headline(results_dir)
    assert flat["study/mnli/matched_accuracy/mean"] == pytest.approx(seeds["MNLI dev acc."].mean())
    assert flat["study/seeds/count"] == 4 and "study/verdict/outcome" not in flat
    headline = json.loads((results_dir / "headline.json").read_text())
    assert set(headline) == {
        "mnli/matched_accuracy",
        "hans/lexical_nonent",
        "hans/subseq_nonent",
        "hans/constituent_nonent",
        "hans/ln_subject/object_swap",
        "seeds",
        "verdict",
    }
    decision = json.loads((results_dir / "verdict.json").read_text())
    assert headline["verdict"]["outcome"] == decision["outcome"] == "inconclusive"
    assert decision["reason"] == (  # random logits: MNLI-m at chance
        "inconclusive: mean MNLI-m accuracy 0.304 is within 5 points of chance (1/3)"
    )
    assert "Infinity" not in (results_dir / "verdict.json").read_text()


def test_report_files_and_one_point_per_seed(results):
    results_dir, config = results
    written = write_report(config, results_dir, results_dir.parent / "report")
    names = {path.name for path in written}
    for plot in ("subcases", "mnli_vs_hans", "agreement", "std"):
        assert {f"{plot}.png", f"{plot}.svg"} <= names
        assert (results_dir.parent / "report" / f"{plot}.png").stat().st_size > 10_000
    page = (results_dir.parent / "report" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "Across 4 seeds" in page
    markdown = (results_dir.parent / "report" / "report.md").read_text()
    decision = json.loads((results_dir / "verdict.json").read_text())
    assert f"Verdict: {decision['reason']}." in markdown
    assert "Made from the paper study" in markdown and "4 seeds of bert-base-uncased" in markdown
    assert "<th>column</th>" not in page  # no stray header row

    seeds = pd.read_csv(results_dir / "seeds.csv")
    paper_runs, our_seeds = plot_mnli_vs_hans(seeds, pd.read_csv(REFERENCE)).axes[0].collections
    assert len(our_seeds.get_offsets()) == len(SEEDS) and len(paper_runs.get_offsets()) == 100
    paper_points, our_points = plot_subcases(seeds, pd.read_csv(REFERENCE)).axes[0].collections
    assert len(our_points.get_offsets()) == 30 * len(SEEDS)
    assert len(paper_points.get_offsets()) == 30 * 100


def test_aggregate_refuses_seeds_of_another_recipe(tmp_path: Path):
    config = load_config(None, ["seeds=[0, 1]", f"data.reference_runs={REFERENCE}"])
    other = load_config(None, ["train.learning_rate=1e-3", "train.epochs=1"])
    _write_seed(tmp_path / "runs", 0, _examples(), config)
    _write_seed(tmp_path / "runs", 1, _examples(), other)
    with pytest.raises(SeedvarError) as refused:
        aggregate(config, tmp_path / "runs", tmp_path / "results")
    assert str(refused.value).startswith(
        "seeds trained with another recipe than this study's: seed 1: train.epochs 1 (study: 3), "
        "train.learning_rate 0.001 (study: 2e-05)"
    )


def test_aggregate_refuses_seeds_evaluated_on_other_subcases(tmp_path: Path):
    config = load_config(None, ["seeds=[0, 1]", f"data.reference_runs={REFERENCE}"])
    examples = _examples()
    _write_seed(tmp_path / "runs", 0, examples, config)
    fewer = {**examples, EvalSet.HANS: examples[EvalSet.HANS].iloc[4:]}  # no subject/object swap
    _write_seed(tmp_path / "runs", 1, fewer, config)
    with pytest.raises(SeedvarError, match=r"seeds 0 and 1 report different metrics \(ln_subj"):
        aggregate(config, tmp_path / "runs", tmp_path / "results")
