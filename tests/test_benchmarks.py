"""Every benchmark's smoke mode (benchmarks/smoke.py), run as a user runs it, in a scratch study
folder: it exits 0, writes what the benchmark writes (the rows and keys it measures, every
number finite) into the smoke folder, and nothing over the committed results. A benchmark
whose optional packages are missing (`pip install -e '.[bench]'`; the locks hold them) fails,
saying so."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import REPO, STUDY, run_ok

pytestmark = pytest.mark.slow

NEEDS = {"throughput": ["accelerate"], "evaluation_levers": ["onnxruntime", "onnx"]}
COMMITTED = ["benchmarks/results", "docs/results", "docs/verdict.md"]  # what they write there


def numbers(tree: object) -> list[float]:
    """Every number in a JSON document."""
    if isinstance(tree, dict):
        return [n for value in tree.values() for n in numbers(value)]
    if isinstance(tree, list):
        return [n for value in tree for n in numbers(value)]
    return [float(tree)] if isinstance(tree, int | float) else []


def written(folder: Path, name: str) -> dict:
    """The JSON document `name` the benchmark wrote, all of its numbers finite."""
    document = json.loads((folder / name).read_text())
    assert all(map(math.isfinite, numbers(document))), document
    return document


def table(path: Path) -> pd.DataFrame:
    """The CSV table the benchmark wrote, all of its numbers finite."""
    frame = pd.read_csv(path)
    values = frame.select_dtypes("number").to_numpy(dtype=float)
    assert values.size and all(map(math.isfinite, values.flat)), frame
    return frame


def check_demo_recipes(folder: Path, output: str) -> None:
    (row,) = table(folder / "recipes.csv").to_dict("records")
    assert row["recipe"] == "32x1" and row["seeds"] == 2 and 0 <= row["mnli_m_mean"] <= 1
    assert "| 32 pairs x 1 |" in output  # the Markdown table of the results page


def check_evaluation_levers(folder: Path, output: str) -> None:
    results = written(folder, "evaluation-levers-cpu.json")
    assert len(results["ways"]) == 5 and set(results["sets"]) >= {"mnli_matched", "hans"}
    assert results["ways"]["torch fp32, batch 128"]["predicts_the_same"]
    assert all(way["seconds"] > 0 for way in results["ways"].values())


def check_gpu(folder: Path, output: str) -> None:
    """Every part measured on the CPU, the GPU's numbers "skipped: no GPU" rather than made up;
    the check's training is fine_tune's (equal weights), its recipe the paper profile's."""
    results = written(folder, "gpu-cpu.json")
    no_gpu = "skipped: no GPU"
    assert results["finished"] and results["host"]["cpu"] and results["machine"]["gpu"] == no_gpu
    assert {"datasets", "mlflow", "pydantic", "ray"} <= set(results["host"]["unimportable"])
    step = results["step"]
    assert step["host_step_ms"] > 0 and step["aten_ops_per_step"] > 0
    assert step["gpu_step_ms"] == step["gpu_busy_fraction"] == no_gpu
    assert results["grouped"]["padding_fraction"] < step["padding_fraction"] < 1
    stacked = results["stacked"]["2"]  # K = 2 seeds stacked, each way
    padded, unpadded = stacked["padded"], stacked["unpadded"]
    assert stacked["seeds"] == 2 and padded["padding_fraction"] > 0
    assert unpadded["padding_fraction"] < padded["padding_fraction"]  # packed: real tokens
    assert all(
        way["seeds_per_gpu_hour"] > 0 and way["host_step_ms"] > 0
        for way in stacked.values()
        if isinstance(way, dict)
    )
    assert stacked["unpadded_steps_per_s_over_padded"] > 0
    assert results["host_syncs"]["syncs_per_unit"] == no_gpu
    assert results["memory"]["peak_rss_bytes"] > 0 and results["memory"]["tokens_per_row"] == 128
    assert results["prediction"]["pairs_per_s"] > 0
    assert results["sharing"]["2"]["examples_per_s_total"] > 0
    assert results["sharing_mps"] == no_gpu
    assert results["checkpoint"]["resumed_weights_equal_uninterrupted"]
    assert results["fine_tune"] == {
        "weights_equal": True,
        "recipe_differs_from_paper_profile": {},
        "validation_key_is_the_papers": True,
        "labels_are_the_papers": True,
        "seed_gpu_gib_is_cluster_py": True,
    }
    done = {entry["part"]: entry["status"] for entry in results["timeline"]}
    assert done.pop("sharing_mps") == "skipped" and set(done.values()) == {"done"}


def check_inoculation_pilot(folder: Path, output: str) -> None:
    (row,) = table(folder / "pilot.csv").to_dict("records")
    assert row["recipe"] == "lexical-100" and row["seeds"] == 2
    assert row["Lexical (nonent): held"] == "in" and row["Subseq (nonent): held"] == "out"
    published = folder / "pilot" / "lexical-100"
    assert len(table(published / "seeds.csv")) == 2
    assert json.loads((published / "verdict.json").read_text())["outcome"] == row["outcome"]
    assert "| lexical-100 | 2 |" in output


def check_learning_curve(folder: Path, output: str) -> None:
    (row,) = table(folder / "points.csv").to_dict("records")
    assert (row["train_pairs"], row["epochs"], row["precision"]) == (32, 1, "32-true")
    assert 0 <= row["MNLI dev acc."] <= 1 and row["seed_seconds"] > 0
    assert (folder / "learning-curve.png").stat().st_size > 0


def check_seeds_at_once(folder: Path, output: str) -> None:
    results = written(folder, "seeds-at-once.json")
    assert results["recipe"]["profile"] == "smoke" and results["seeds"] == 2
    assert results["dvc_repro_target"] == "train"  # the seeds' stages only
    assert all(run[0]["seed_stages_s"] > 0 for run in results["runs"].values())
    assert len(results["runs"]) == 3 and results["speedup"] > 0
    # the same arithmetic at once and one after another at 1 thread: the same predictions
    assert results["predictions"]["at once vs one after another, 1 thread"]["identical"]
    assert results["projection"]["table"]


def check_stacked(folder: Path, output: str) -> None:
    (name,) = (path.name for path in folder.glob("stacked-cpu-*.json"))
    results = written(folder, name)
    assert results["cpu_flags"] and len(results["load_average_before"]) == 3
    ((case, by_k),) = results["cases"].items()
    ways = by_k["2"]["ways"]
    assert set(ways) == {"separate", "stacked padded", "stacked unpadded"}
    assert all(
        way["seed_steps_per_s"] > 0 and way["seed_steps_per_cpu_s"] > 0 for way in ways.values()
    )
    assert set(by_k["2"]["stacked_vs_separate"]) == {"stacked padded", "stacked unpadded"}
    # the same seeds' arithmetic each way: their last losses agree to float rounding
    assert max(by_k["2"]["last_loss_relative_difference_vs_separate"].values()) < 1e-5
    lines = output.splitlines()  # the printed table: a row for each way
    assert any(line.startswith(case) and "stacked unpadded" in line for line in lines)


def check_throughput(folder: Path, output: str) -> None:
    (name,) = (path.name for path in folder.glob("throughput-*.json"))
    results = written(folder, name)
    for phase in ("train", "eval"):
        assert {"seedvar@32-true", "peer_trainer_careful@32-true"} <= set(results[phase])
        assert all(variant["examples_per_s"] > 0 for variant in results[phase].values())
    assert results["memory"]["peak_rss_one_seed_mib"] > 0


def check_training_levers(folder: Path, output: str) -> None:
    results = written(folder, "training-levers-cpu.json")
    assert results["adamw_step"]["steps_each"] == 3
    compiled = results["compile_with_bucketed_lengths"]
    assert compiled["steps_each"] > 0 and all(n % 16 == 0 for n in compiled["bucketed_lengths"])
    assert results["lightning_overhead"]["steps_each"] > 0


def check_verdict_rates(folder: Path, output: str) -> None:
    """The copy of docs/verdict.md: the committed page, each table with a row for each of the
    committed table's (the same kinds of study, the same numbers of seeds)."""
    ours, committed = (folder / "verdict.md").read_text(), (REPO / "docs/verdict.md").read_text()
    for marker in ("rates", "bounds"):
        assert rows(ours, marker) == rows(committed, marker)
        ours, committed = (page.replace(block(page, marker), "") for page in (ours, committed))
    assert ours == committed


def block(page: str, marker: str) -> str:
    """The block of `page` between its `marker` markers."""
    return page[page.index(f"<!-- {marker}:start -->") : page.index(f"<!-- {marker}:end -->")]


def rows(page: str, marker: str) -> list[str]:
    """The first cell of each row of the table in a block of `page`."""
    lines = block(page, marker).splitlines()
    return [line.split("|")[1] for line in lines if line.startswith("|")]


CHECKS: dict[str, Callable[[Path, str], None]] = {
    "demo_recipes": check_demo_recipes,
    "evaluation_levers": check_evaluation_levers,
    "gpu": check_gpu,
    "inoculation_pilot": check_inoculation_pilot,
    "learning_curve": check_learning_curve,
    "seeds_at_once": check_seeds_at_once,
    "stacked": check_stacked,
    "throughput": check_throughput,
    "training_levers": check_training_levers,
    "verdict_rates": check_verdict_rates,
}


def snapshot() -> dict[str, tuple[int, int]]:
    """Size and modification time of every file under the committed results."""
    paths = [REPO / place for place in COMMITTED]
    files = [f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()]
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in files}


def test_the_gpu_check_records_why_a_part_that_would_not_fit_its_budget_was_skipped(
    study_dir: Path,
):
    out = study_dir / "gpu.json"
    script = str(REPO / "benchmarks" / "gpu.py")
    run_ok(sys.executable, script, "--cpu", "--budget-s", "1", "--out", str(out), cwd=study_dir)
    results = json.loads(out.read_text())
    assert results["finished"] and results["host"]["cpu"]
    assert results["step"].startswith("skipped: would not fit the budget")
    assert results["sharing"].startswith("skipped")  # after a machine part that never ran
    parts = [entry for entry in results["timeline"] if entry["part"] != "host"]
    assert len(parts) == 11 and {entry["status"] for entry in parts} == {"skipped"}


def test_every_benchmark_has_its_smoke_run_checked_here():
    scripts = (REPO / "benchmarks").glob("*.py")
    assert {path.stem for path in scripts if "__main__" in path.read_text()} == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_a_benchmarks_smoke_mode_runs_and_writes_its_results_into_its_folder(
    name: str, study_dir: Path, dvc_environment: None
):
    for module in NEEDS.get(name, []):
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"benchmarks/{name}.py needs {module}: pip install -e '.[bench]'")
    before, folder = snapshot(), study_dir / "smoke"
    script = str(REPO / "benchmarks" / f"{name}.py")
    # seeds_at_once.py runs `dvc repro` three times, once with a local Ray
    timeout = 2 * STUDY if name == "seeds_at_once" else STUDY
    output = run_ok(sys.executable, script, "--smoke", str(folder), cwd=study_dir, timeout=timeout)
    CHECKS[name](folder, output)
    assert snapshot() == before
