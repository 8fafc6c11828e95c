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
from types import FrameType

from seedvar.processes import watch_starters

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

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
    watch_starters(lambda: os.kill(os.getpid(), signal.SIGTERM))
