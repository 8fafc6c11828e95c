"""Interrupts never lost: Ctrl-C, SIGTERM, SIGHUP (a `kill`, a closed terminal, a scheduler's
stop: cleaned up after as Ctrl-C), and the death of the command that started this one. A
KeyboardInterrupt raised in a weakref callback or a `__del__` (SQLAlchemy's session cleanup,
under MLflow) is printed as "Exception ignored" and gone: so the handler also remembers it, and
training and prediction raise it again at their next batch (`raise_if_lost`)."""

from __future__ import annotations

import os
import signal
from types import FrameType

from seedvar.processes import watch_starters

_received = False


def on_interrupt(signum: int, frame: FrameType | None) -> None:
    """The handler: remember the interrupt, then raise it as Python's own SIGINT handler does."""
    global _received
    _received = True
    raise KeyboardInterrupt


def catch_interrupts() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP with `on_interrupt` (from the main thread)."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, on_interrupt)


def raise_if_lost() -> None:
    """KeyboardInterrupt if an interrupt arrived: once interrupted, the process stays so."""
    if _received:
        raise KeyboardInterrupt


def stop_with_starters() -> None:
    """Interrupt this process (SIGTERM) as soon as an ancestor in its process group dies (`make
    study` -> `dvc exp run` -> this driver: killing any, even with SIGKILL, stops the driver,
    which cleans up). One started from a shell with job control outlives it (another group)."""
    watch_starters(lambda: os.kill(os.getpid(), signal.SIGTERM))
