"""Configurations of one study side by side (`seedvar compare`): the test of equal seed spread,
and the page built from real aggregated studies (the inoculation size sweep's)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from seedvar.cli import main
from seedvar.stats.spread import spread_differs

REISSUED = Path(__file__).resolve().parents[1] / "docs" / "results" / "reissued-2026-12"
SIZES = (300, 1000, 3000)


def test_a_configuration_whose_seeds_spread_four_times_as_far_is_told_apart():
    rng = np.random.default_rng(0)
    narrow, wide = rng.normal(0.5, 0.01, 24), rng.normal(0.5, 0.04, 24)
    found = spread_differs("Subseq (nonent) [AUC]", {"a": narrow, "b": narrow[::-1], "c": wide})
    assert found.p is not None and found.p < 0.001
    assert found.stds["c"] > 3 * found.stds["a"]
    alike = spread_differs("x", {"a": narrow, "b": rng.normal(0.5, 0.01, 24)})
    assert alike.p is not None and alike.p > 0.05


def test_too_few_seeds_or_no_spread_is_not_tested():
    assert spread_differs("x", {"a": np.array([0.5, 0.6]), "b": np.ones(5)}).p is None
    assert spread_differs("x", {"a": np.ones(4), "b": np.ones(4)}).statistic is None


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The inoculation size sweep's three sizes as `seedvar aggregate` leaves them."""
    root = tmp_path_factory.mktemp("sizes")
    for size in SIZES:
        (root / str(size)).mkdir()
        shutil.copy(REISSUED / f"inoculation-{size}.json", root / str(size) / "verdict.json")
        shutil.copy(REISSUED / f"inoculation-{size}.seeds.csv", root / str(size) / "seeds.csv")
    return {str(size): root / str(size) for size in SIZES}


def test_compare_writes_the_answer_the_figure_and_the_table(
    studies: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
):
    assert (
        main(["compare", *(f"{n}={p}" for n, p in studies.items()), "--output", str(tmp_path)]) == 0
    )
    record = json.loads((tmp_path / "compare.json").read_text())
    assert record["columns"] == ["Subseq (nonent) [AUC]", "Constituent (nonent) [AUC]"]
    assert record["level"] == 0.025  # 0.05 over the two held-out columns
    seeds = {n: pd.read_csv(p / "seeds.csv") for n, p in studies.items()}
    for test in record["spread"]:
        expected = stats.levene(*(t[test["column"]] for t in seeds.values()), center="median")
        assert test["p"] == pytest.approx(expected.pvalue)
    rows = pd.read_csv(tmp_path / "compare.csv")
    assert len(rows) == 6 and rows["seeds"].tolist() == [24, 24, 24, 24, 16, 16]
    subseq = rows[(rows["configuration"] == 3000) & (rows["column"] == "Subseq (nonent) [AUC]")]
    assert subseq["seed_std"].item() == pytest.approx(0.0521, abs=1e-4)  # verdict.json's
    answer = capsys.readouterr().out.splitlines()[0]
    assert answer.startswith("Across 3 configurations (MNLI dev acc. 67.75%-67.82%")
    assert "Subseq (nonent) [AUC]: seed std 300 2.56 [1.71, 3.95]" in answer
    assert "not shown to differ (Brown-Forsythe p = 0.026, level 0.025)" in answer
    assert (tmp_path / "compare.md").read_text().splitlines()[2] == answer
    assert (tmp_path / "spread.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["recipe"], "'recipe': give each configuration as NAME=RESULTS_FOLDER"),
        (["recipe=nowhere"], "recipe=nowhere: no seeds.csv or verdict.json there"),
    ],
)
def test_bad_configurations_get_one_line(
    given: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
):
    assert main(["compare", *given, "--output", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"seedvar: error: {message}") and error.count("\n") == 1
    assert not (tmp_path / "out").exists()
