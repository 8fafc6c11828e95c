"""One driver per study: the command that trains a study's seeds holds its lease, a file lock
beside the seeds' work (outside DVC's outputs), which the OS drops when the driver dies. A
second driver of the same study stops at once with one line naming the first."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from seedvar.errors import SeedvarError
from seedvar.files import write_atomically
from seedvar.processes import started_at

DRIVER_TAG = "seedvar.driver"  # on every seed run: the driver that runs it (see `driver_id`)


class DriverRunning(SeedvarError):
    """Another driver works on the same study right now."""


def driver_id(pid: int | None = None) -> str:
    """`host:pid:start` of a process (this one by default): names it beyond its pid's reuse."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{started_at(pid) or '?'}"


def driver_gone(driver: str) -> bool:
    """Whether the driver named `driver` (a `driver_id`) is known to be gone: it ran on this
    host, and no process with its pid and start runs here now."""
    host, pid, _ = driver.rsplit(":", 2)
    return host == socket.gethostname() and driver_id(int(pid)) != driver


@contextmanager
def lease(folder: Path, study: str, command: str) -> Iterator[None]:
    """Hold the lease of study `study` (its hash) kept in `folder` while the block runs;
    DriverRunning if another process holds it. `command`: what the holder runs, written beside
    the lock for the message a second driver prints."""
    folder.mkdir(parents=True, exist_ok=True)
    holder = folder / f"driver-{study}.json"
    try:
        locked = FileLock(folder / f"driver-{study}.lock", blocking=False).acquire()
    except Timeout:
        raise DriverRunning(_held_by(holder)) from None
    with locked:
        who = {"host": socket.gethostname(), "pid": os.getpid(), "command": command}
        write_atomically(holder, json.dumps({**who, "since": time.strftime("%Y-%m-%d %H:%M:%S")}))
        try:
            yield
        finally:
            holder.unlink(missing_ok=True)


def _held_by(holder: Path) -> str:
    try:
        found = json.loads(holder.read_text())
        who = (
            f"`{found['command']}` (pid {found['pid']} on {found['host']}, since {found['since']})"
        )
    except (OSError, ValueError, KeyError):
        who = f"another process (it holds {holder.with_suffix('.lock')})"
    return (
        f"this study is being trained by {who}; wait for it to finish, or stop it, "
        "then run this command again"
    )
