"""The process table (Linux /proc): a process's starters and descendants, and the processes a
command left behind when it was killed, so that the next command can end them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

RECORD_SECONDS = 5.0


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent, group, ...)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    found = stat(pid)
    return found is not None and found[0] != "Z"


def ancestors_in_group() -> list[int]:
    """This process's parent and its ancestors, as long as they are in this process's group."""
    group, found, pid = os.getpgrp(), [], os.getppid()
    while pid > 1 and (fields := stat(pid)) is not None and int(fields[2]) == group:
        found.append(pid)
        pid = int(fields[1])
    return found


def descendants(root: int) -> dict[int, str]:
    """Every living descendant of `root`, with its start time (which tells a process from a
    later one that got its pid)."""
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            started[int(entry.name)] = fields[19]
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = started[pid]
        todo += children.get(pid, [])
    return found


def end_recorded(record: Path) -> int:
    """SIGKILL what `record` lists that still runs (a killed command's Ray); how many."""
    try:
        listed = json.loads(record.read_text())
    except (OSError, ValueError):
        return 0
    ended = 0
    for pid, started in listed.items():
        fields = stat(int(pid))
        if fields is not None and fields[19] == started and fields[0] != "Z":
            with suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
                ended += 1
    record.unlink(missing_ok=True)
    return ended


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
    """Call `then()` as soon as any of `ancestors_in_group()` dies (or this process is
    reparented)."""
    starters = ancestors_in_group()
    if not starters:
        return

    def watch() -> None:
        while os.getppid() == starters[0] and all(map(alive, starters)):
            time.sleep(1.0)
        then()

    threading.Thread(target=watch, daemon=True, name="seedvar watch starters").start()
