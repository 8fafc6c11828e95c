"""One driver per study: the command that trains a study's seeds holds its lease, a lock file
beside the seeds' work (outside DVC's outputs), which the OS drops when the driver dies. A
second driver of the same study stops at once with one line naming the first."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from seedvar.errors import SeedvarError
from seedvar.processes import stat

DRIVER_TAG = "seedvar.driver"  # on every seed run: the driver that runs it (see `driver_id`)


class DriverRunning(SeedvarError):
    """Another driver works on the same study right now."""


def driver_id(pid: int | None = None) -> str:
    """`host:pid:start` of a process (this one by default): names it beyond its pid's reuse."""
    pid = pid or os.getpid()
    fields = stat(pid)
    return f"{socket.gethostname()}:{pid}:{fields[19] if fields else '?'}"


def driver_gone(driver: str) -> bool:
    """Whether the driver named `driver` (a `driver_id`) is known to be gone: it ran on this
    host, and no process with its pid and start runs here now."""
    host, pid, _ = driver.rsplit(":", 2)
    return host == socket.gethostname() and driver_id(int(pid)) != driver


@contextmanager
def lease(folder: Path, study: str, command: str) -> Iterator[None]:
    """Hold the lease of study `study` (its hash) kept in `folder` while the block runs;
    DriverRunning if another process holds it. `command`: what the holder runs, for the
    message a second driver prints."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"driver-{study}.lock"
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise DriverRunning(_held_by(handle.read(), path)) from None
        handle.seek(0)
        handle.truncate()
        holder = {"host": socket.gethostname(), "pid": os.getpid(), "command": command}
        holder["since"] = time.strftime("%Y-%m-%d %H:%M:%S")
        handle.write(json.dumps(holder))
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)


def _held_by(text: str, path: Path) -> str:
    try:
        holder = json.loads(text)
        who = (
            f"`{holder['command']}` (pid {holder['pid']} on {holder['host']}, "
            f"since {holder['since']})"
        )
    except (ValueError, KeyError):
        who = f"another process (it holds {path})"
    return (
        f"this study is being trained by {who}; wait for it to finish, or stop it, "
        "then run this command again"
    )
