"""Ctrl-C that is never lost.

Python raises KeyboardInterrupt wherever the main thread is when SIGINT arrives. If that is a
weakref callback or a `__del__` run by the garbage collector (SQLAlchemy's session cleanup,
under MLflow, is one), Python prints "Exception ignored" and the interrupt is gone: a sweep
would train on. seedvar's handler also remembers the interrupt, and the training loop and
prediction raise it again at their next batch (`raise_if_lost`).
"""

from __future__ import annotations

import signal
from types import FrameType

_received = False


def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """SIGINT's handler: remember the interrupt, then raise it as Python's own handler does."""
    global _received
    _received = True
    raise KeyboardInterrupt


def catch_ctrl_c() -> None:
    """Handle SIGINT with `on_ctrl_c` (from the main thread)."""
    signal.signal(signal.SIGINT, on_ctrl_c)


def raise_if_lost() -> None:
    """KeyboardInterrupt if Ctrl-C was pressed: once interrupted, the process stays so."""
    if _received:
        raise KeyboardInterrupt
