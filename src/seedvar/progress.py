"""How far an attempt at a seed has got, in its work folder's progress.json: a driver reads it to
tell a seed that advances from one stuck (frozen, or blocked in a system call while its other
threads live). Training and prediction tick it once per batch; written at most once a second."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

from seedvar.files import write_atomically

WRITE_SECONDS = 1.0


@dataclass
class Progress:
    """An attempt's progress: `batches` counts every batch trained or predicted so far."""

    attempt: str
    submission: int
    phase: str = "loading"  # loading, training, evaluating
    step: int = 0
    total: int = 0
    batches: int = 0


_path: Path | None = None
_current: Progress | None = None
_written = 0.0


@contextmanager
def reporting(path: Path, attempt: str, submission: int) -> Iterator[None]:
    """Record this process's progress in `path` while the block runs."""
    global _path, _current
    _path, _current = path, Progress(attempt, submission)
    _write()
    try:
        yield
    finally:
        _path = _current = None


def claimed() -> None:
    """The attempt has claimed its seed (its work folder exists now): record its progress there
    at once, so that a driver sees the attempt (and what it took over) before its first batch."""
    _write()


def tick(phase: str | None = None, step: int | None = None, total: int | None = None) -> None:
    """One more batch (of `phase`, else the phase so far; training gives its step of `total`)."""
    if _current is None:
        return
    _current.batches += 1
    changed = phase is not None and phase != _current.phase
    _current.phase = phase or _current.phase
    _current.step = _current.step if step is None else step
    _current.total = _current.total if total is None else total
    if changed or time.monotonic() - _written >= WRITE_SECONDS:
        _write()


def waiting() -> None:
    """The attempt waits for something outside it (a busy tracking store) and is not stuck:
    counted as a batch, so that a driver does not take the wait for a freeze and cancel it
    rather than the attempt that holds the store. Written at once: waits are few and long."""
    if _current is not None:
        _current.batches += 1
        _write()


def _write() -> None:
    global _written
    if _path is None or _current is None:
        return
    with suppress(OSError):  # the folder went (published, or taken over): nothing to report on
        write_atomically(_path, json.dumps(asdict(_current)))
        _written = time.monotonic()


def read(path: Path) -> Progress | None:
    """The progress recorded in `path`, or None (not written yet, or being replaced)."""
    try:
        return Progress(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
