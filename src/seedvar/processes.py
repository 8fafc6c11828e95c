"""The process table (psutil): a process's starters and descendants, and what a killed command
left behind, for the next to end. A process is told from a later one with its pid by its start
time (`started_at`)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import psutil

RECORD_SECONDS = 5.0


def started_at(pid: int) -> str | None:
    """When process `pid` started (a stable text, to compare), or None where none runs."""
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except psutil.Error:
        return None


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants(root: int) -> dict[int, str]:
    """Every living descendant of `root`, with its start time."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return {}
    found = {child.pid: started_at(child.pid) for child in children}
    return {pid: start for pid, start in found.items() if start is not None}


def end_recorded(record: Path) -> None:
    """SIGKILL what `record` lists that still runs (a killed command's Ray)."""
    try:
        listed = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    for pid, start in listed.items():
        if started_at(int(pid)) == start and alive(int(pid)):
            with suppress(psutil.Error):
                psutil.Process(int(pid)).kill()
    record.unlink(missing_ok=True)


def keep_recording(record: Path, stop: threading.Event) -> None:
    """Record this process's descendants in `record` every few seconds until `stop` is set
    (then remove the record: they end with this process's orderly exit)."""

    def run() -> None:
        while not stop.is_set():
            with suppress(OSError):
                record.write_text(json.dumps(descendants(os.getpid())))
            stop.wait(RECORD_SECONDS)
        record.unlink(missing_ok=True)

    threading.Thread(target=run, daemon=True, name="seedvar record processes").start()


def watch_starters(then: Callable[[], None]) -> None:
    """Call `then()` once one of this process's ancestors in its group (from its parent up) dies,
    or this process is reparented."""
    group, starters = os.getpgrp(), []
    for parent in psutil.Process().parents():
        with suppress(OSError):
            if parent.pid <= 1 or os.getpgid(parent.pid) != group:
                break
            starters.append(parent.pid)
    if not starters:
        return

    def watch() -> None:
        while os.getppid() == starters[0] and all(map(alive, starters)):
            time.sleep(1.0)
        then()

    threading.Thread(target=watch, daemon=True, name="seedvar watch starters").start()
