"""What the repository keeps: per-example predictions lossless and compact, figures as palette
PNGs, and a working tree small enough to travel to a lent GPU machine (64 MiB there)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from seedvar.report.figures import save_figure
from seedvar.seeds.evaluate import write_predictions

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TREE_LIMIT = 60 * 2**20  # bytes: the lent machine's 64 MiB, with room for what a check writes


def predictions(logits: np.ndarray) -> pd.DataFrame:
    rows = len(logits)
    frame = pd.DataFrame({"id": [str(i) for i in range(rows)], "gold": np.arange(rows) % 3})
    frame["predicted"] = logits.argmax(axis=1)
    for index, label in enumerate(("entailment", "neutral", "contradiction")):
        frame[f"logit_{label}"] = logits[:, index]
    frame["subcase"] = np.where(np.arange(rows) % 2, "ln_passive", "ln_subject/object_swap")
    return frame


def bf16_values(rows: int) -> np.ndarray:
    """float32 logits as a bf16 model gives them (the low 16 bits zero)."""
    values = np.random.default_rng(0).normal(0, 3, (rows, 3)).astype(np.float32)
    return (values.view(np.uint32) & 0xFFFF0000).view(np.float32)


def test_a_bf16_models_logits_are_kept_exactly_in_half_the_room(tmp_path: Path):
    frame = predictions(bf16_values(30_000))
    write_predictions(frame, tmp_path / "compact.parquet")
    frame.to_parquet(tmp_path / "plain.parquet", index=False)
    kept = pd.read_parquet(tmp_path / "compact.parquet")
    assert kept["logit_neutral"].dtype == np.float16
    for column in frame:
        assert kept[column].astype(frame[column].dtype).equals(frame[column]), column
    plain, compact = ((tmp_path / n).stat().st_size for n in ("plain.parquet", "compact.parquet"))
    assert compact < plain / 2


@pytest.mark.parametrize("value", [0.1, 1e-8, 70_000.0])
def test_a_logit_half_precision_would_change_keeps_its_full_precision(tmp_path: Path, value: float):
    logits = bf16_values(100)
    logits[7, 1] = value
    write_predictions(predictions(logits), tmp_path / "p.parquet")
    kept = pd.read_parquet(tmp_path / "p.parquet")
    assert kept["logit_neutral"].dtype == np.float32
    assert kept["logit_entailment"].dtype == np.float16  # each column decided on its own
    assert np.array_equal(kept[[f"logit_{n}" for n in ("entailment", "neutral")]], logits[:, :2])


def test_a_figure_is_kept_as_a_palette_png_smaller_than_matplotlibs(tmp_path: Path):
    figure, axis = plt.subplots(figsize=(8, 4))
    for seed in range(12):
        axis.plot(np.random.default_rng(seed).random(50), label=f"seed {seed}")
    axis.legend()
    save_figure(figure, tmp_path / "kept.png")
    figure.savefig(tmp_path / "full.png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    kept, full = Image.open(tmp_path / "kept.png"), Image.open(tmp_path / "full.png")
    assert kept.mode == "P" and kept.size == full.size
    assert (tmp_path / "kept.png").stat().st_size < (tmp_path / "full.png").stat().st_size / 2


def test_the_tracked_tree_travels_to_a_lent_gpu_machine():
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    sizes = [(REPO / name.decode()).stat().st_size for name in listed if name]
    assert sum(sizes) <= TREE_LIMIT, f"{sum(sizes) / 2**20:.1f} MiB tracked"
