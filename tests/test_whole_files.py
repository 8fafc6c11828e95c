"""A seed's files whole or not at all: a torn line from an append cut short is dropped, a full
disk mid-write leaves the file as it was, and a published file damaged in place is named in one
line and taken again from seedvar's intact copy, or trained again."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pandas as pd
import pytest

from seedvar.config import Config, load_config
from seedvar.errors import DataError
from seedvar.files import TEMPORARY, remove_temporaries, temporary, write_atomically
from seedvar.seeds.finished import MANIFEST, manifest_of
from seedvar.seeds.job import AlreadyPublished, SeedJob
from seedvar.seeds.trajectory import append_whole

COLUMNS = ["step", "epoch", "column", "key", "accuracy"]


def _rows(step: int) -> pd.DataFrame:
    return pd.DataFrame(
        [(step, 0, "Lexical (nonent)", "hans/lexical_nonent", 0.5)], columns=COLUMNS
    )


def fill_the_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Path.write_text from now on writes half its text, then finds the disk full."""
    real = Path.write_text

    def half_then_full(self: Path, text: str, *args, **kwargs) -> int:
        real(self, text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)


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
    fill_the_disk(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        append_whole(path, _rows(200))
    monkeypatch.undo()
    assert path.read_text() == before


def _kept_seed(keep: Path) -> tuple[SeedJob, Config, Path]:
    """A finished seed as a publication leaves it in seedvar's keep: its files and manifest."""
    config = load_config(None, profile="smoke").with_seed(0)
    job = SeedJob(keep.parent / "runs", 0, keep=keep)
    entry = job.recipes / config.hash()
    (entry / "predictions").mkdir(parents=True)
    (entry / "metrics.json").write_text(json.dumps({"MNLI dev acc.": 0.5}))
    (entry / "predictions" / "hans.parquet").write_bytes(b"PAR1 not really")
    config.save(entry / "config.yaml")
    (entry / MANIFEST).write_text(json.dumps(manifest_of(entry)))
    return job, config, entry


def test_a_finished_seed_damaged_in_place_is_named_in_one_line(tmp_path: Path):
    job, config, entry = _kept_seed(tmp_path / ".seedvar")
    job.publish_view(entry)
    job.finished.check()  # intact
    damaged = job.folder / "predictions" / "hans.parquet"
    damaged.unlink()  # the view is hard links into the keep: a new file, not the kept one
    damaged.write_bytes(b"PAR1 damaged")
    with pytest.raises(DataError) as caught:
        job.finished.check()
    assert str(caught.value).startswith(f"{damaged} is damaged (it differs from the seed's")
    assert "\n" not in str(caught.value)
    assert job.finished_dir(config) == entry  # the kept copy is intact: published again
    job.publish_view(entry)
    job.finished.check()


def test_a_kept_seed_damaged_in_place_is_trained_again(tmp_path: Path):
    job, config, entry = _kept_seed(tmp_path / ".seedvar")
    assert job.finished_dir(config) == entry
    (entry / "metrics.json").write_text(json.dumps({"MNLI dev acc.": 0.9}))  # same size
    assert job.finished_dir(config) is None


def test_an_atomic_write_cut_short_leaves_the_file_as_it_was_and_no_temporary(
    tmp_path: Path, monkeypatch
):
    path = tmp_path / "metrics.json"
    write_atomically(path, '{"a": 1}')
    fill_the_disk(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, '{"a": 2, "b": 3}')
    monkeypatch.undo()
    assert path.read_text() == '{"a": 1}' and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_temporaries_a_killed_writer_left_are_removed_and_nothing_else(tmp_path: Path):
    kept = [tmp_path / "metrics.json", tmp_path / "predictions" / "hans.parquet"]
    for path in kept:
        path.parent.mkdir(exist_ok=True)
        path.write_text("whole")
    left = [temporary(kept[0]), temporary(tmp_path / "predictions")]
    left[0].write_text("half")
    left[1].mkdir()
    (left[1] / "hans.parquet").write_text("half")
    remove_temporaries(tmp_path)
    assert sorted(tmp_path.rglob("*")) == sorted([*kept, kept[1].parent])
    assert not list(tmp_path.rglob(f"*{TEMPORARY}*"))


def test_a_late_attempt_never_publishes_over_a_finished_seed(tmp_path: Path):
    """An attempt that worked unseen beside another (it claimed an empty folder, as one on
    another machine would): the other publishes first, this one is refused (AlreadyPublished)
    and the first's seed stays."""
    config = load_config(None, [f"output_dir={tmp_path / 'runs'}"], profile="smoke").with_seed(0)
    first, second = SeedJob.of(config), SeedJob.of(config)
    entry = None
    for job, accuracy in ((first, 0.5), (second, 0.9)):
        job.claim(config)
        config.save(job.work_dir / "config.yaml")
        (job.work_dir / "metrics.json").write_text(json.dumps({"MNLI dev acc.": accuracy}))
        if entry is None:
            entry = first.publish()
            continue
        with pytest.raises(AlreadyPublished, match="the published seed stays"):
            job.publish()
    assert json.loads((entry / "metrics.json").read_text()) == {"MNLI dev acc.": 0.5}
    assert json.loads((first.folder / "metrics.json").read_text()) == {"MNLI dev acc.": 0.5}
