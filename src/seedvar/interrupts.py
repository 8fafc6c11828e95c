"""Interrupts that are never lost: Ctrl-C, SIGTERM, SIGHUP, and the death of the command that
started this one.

Python raises KeyboardInterrupt wherever the main thread is when SIGINT arrives. If that is a
weakref callback or a `__del__` run by the garbage collector (SQLAlchemy's session cleanup,
under MLflow, is one), Python prints "Exception ignored" and the interrupt is gone: a sweep
would train on. seedvar's handler also remembers the interrupt, and the training loop and
prediction raise it again at their next batch (`raise_if_lost`). SIGTERM and SIGHUP (a `kill`,
a closed terminal, a scheduler's stop) take the same path as Ctrl-C, so that every command
cleans up after them as after Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WATCH_SECONDS = 1.0

_received = False


def on_interrupt(signum: int, frame: FrameType | None) -> None:
    """The handler: remember the interrupt, then raise it as Python's own SIGINT handler does."""
    global _received
    _received = True
    raise KeyboardInterrupt


def catch_interrupts() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP with `on_interrupt` (from the main thread)."""
    for number in INTERRUPTS:
        signal.signal(number, on_interrupt)


def raise_if_lost() -> None:
    """KeyboardInterrupt if an interrupt arrived: once interrupted, the process stays so."""
    if _received:
        raise KeyboardInterrupt


def stop_with_starters() -> None:
    """Interrupt this process (SIGTERM) as soon as a process that started it dies: any ancestor
    in its process group (`make study` -> `dvc exp run` -> this driver: killing any of them,
    even with SIGKILL, which nobody can handle, stops the driver, which cleans up). A command
    started from a shell or a batch script with job control outlives that shell, as it should
    (`nohup`): the shell is in another process group."""
    starters = _ancestors_in_group()
    if not starters:
        return

    def watch() -> None:
        while os.getppid() == starters[0] and all(map(_alive, starters)):
            time.sleep(WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="seedvar watch starters").start()


def _ancestors_in_group() -> list[int]:
    """The parent and its ancestors, as long as they are in this process's group (/proc)."""
    group, found, pid = os.getpgrp(), [], os.getppid()
    while pid > 1 and (stat := _stat(pid)) is not None and int(stat[2]) == group:
        found.append(pid)
        pid = int(stat[1])
    return found


def _stat(pid: int) -> list[str] | None:
    """State, parent and process group of a process (/proc/PID/stat), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[:3]


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"
