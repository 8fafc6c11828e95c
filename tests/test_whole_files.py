"""A seed's appended file is written whole or not at all: a torn line from an append cut short
is dropped, and a full disk mid-write leaves the file as it was."""

from __future__ import annotations

import errno
from pathlib import Path

import pandas as pd
import pytest

from seedvar.seeds.trajectory import append_whole

COLUMNS = ["step", "epoch", "column", "key", "accuracy"]


def _rows(step: int) -> pd.DataFrame:
    return pd.DataFrame(
        [(step, 0, "Lexical (nonent)", "hans/lexical_nonent", 0.5)], columns=COLUMNS
    )


def test_a_torn_last_line_is_dropped_before_the_next_point(tmp_path: Path):
    path = tmp_path / "trajectory.csv"
    append_whole(path, _rows(0))
    path.write_text(path.read_text() + "200,0,Lexical (non")  # an append killed mid-line
    append_whole(path, _rows(400))
    frame = pd.read_csv(path)
    assert frame["step"].tolist() == [0, 400]
    assert list(frame.columns) == COLUMNS


def test_a_full_disk_mid_write_leaves_the_old_file(tmp_path: Path, monkeypatch):
    path = tmp_path / "trajectory.csv"
    append_whole(path, _rows(0))
    before = path.read_text()
    real = Path.write_text

    def half_then_full(self: Path, text: str, *args, **kwargs) -> int:
        real(self, text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        append_whole(path, _rows(200))
    monkeypatch.undo()
    assert path.read_text() == before
