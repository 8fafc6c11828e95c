"""Writes that outlast a busy store: a tracking write that meets a lock (SQLite past its busy
timeout; a PostgreSQL lock timeout, serialization conflict or deadlock) or a dropped connection
is tried again, with backoff, for up to WRITE_RETRY_SECONDS; only then does the seed see it.
While writes wait, the process says so once, in one line (`busy`)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

from mlflow.tracking import MlflowClient

from seedvar import progress
from seedvar.errors import transient_cause

WRITE_RETRY_SECONDS = 300.0  # how long one write keeps trying
FIRST_WAIT, LONGEST_WAIT = 0.1, 5.0  # seconds between tries: doubling from the first
log = logging.getLogger(__name__)  # each try again, at DEBUG
P = ParamSpec("P")
R = TypeVar("R")

_writer = ""  # whose writes these are ("seed 3"), named in the line (`writing_for`)
_waiting = 0  # this process's writes waiting for the store now
_lock = threading.Lock()


@contextmanager
def writing_for(name: str) -> Iterator[None]:
    """Name the writes of this process `name` (`seed 3`) while the block runs."""
    global _writer
    before, _writer = _writer, name
    try:
        yield
    finally:
        _writer = before


def writer() -> str:
    """Whose writes this process makes now (`seed 3`), or "" (see `writing_for`)."""
    return _writer


def busy(cause: str) -> None:
    """A write of this process meets a busy store: one line on stderr, unless another write
    waits already (one line for a spell of waiting, however many writes it holds up)."""
    global _waiting
    with _lock:
        _waiting += 1
        first = _waiting == 1
    if not first:
        return
    seconds = f"up to {WRITE_RETRY_SECONDS:.0f} s"
    if _writer:
        line = (
            f"{_writer} waits for the tracking store, which is busy ({cause}): its writes are "
            f"tried again for {seconds}; the seed is not restarted"
        )
    else:
        line = (
            f"waiting for the tracking store, which is busy ({cause}): writes are tried again "
            f"for {seconds}"
        )
    print(f"seedvar: {line}", file=sys.stderr)


def _done_waiting() -> None:
    global _waiting
    with _lock:
        _waiting -= 1


def retried(write: Callable[P, R]) -> Callable[P, R]:
    """`write`, tried again while it fails with a passing error (`errors.transient`) and
    WRITE_RETRY_SECONDS have not passed; then it raises that error."""

    @wraps(write)
    def again(*args: P.args, **kwargs: P.kwargs) -> R:
        deadline, wait, waiting = time.monotonic() + WRITE_RETRY_SECONDS, FIRST_WAIT, False
        try:
            while True:
                try:
                    return write(*args, **kwargs)
                except Exception as error:
                    cause = transient_cause(error)
                    if cause is None or time.monotonic() + wait > deadline:
                        raise
                    log.debug("tracking store busy (%s): writing again", cause)
                    if not waiting:
                        busy(cause)
                        waiting = True
                    progress.waiting()
                    time.sleep(wait)
                    wait = min(2 * wait, LONGEST_WAIT)
        finally:
            if waiting:
                _done_waiting()

    return again


def _not_retried(record: logging.LogRecord) -> bool:
    """Leaves out MLflow's trace of a store error that passes (`mlflow.store.db.utils` logs one
    for each): seedvar's writes are tried again and say so in one line."""
    error = record.exc_info[1] if record.exc_info else None
    return error is None or transient_cause(error) is None


_store_log = logging.getLogger("mlflow.store.db.utils")
_store_log.addFilter(_not_retried)
_store_log.setLevel(logging.WARNING)  # not "Creating initial MLflow database tables..."


class RetryingClient(MlflowClient):
    """An MlflowClient whose writes to the store (runs, tags, params, metrics, inputs, models)
    are `retried`; reads and artifact uploads are MLflow's own."""

    create_experiment = retried(MlflowClient.create_experiment)
    set_experiment_tag = retried(MlflowClient.set_experiment_tag)
    create_run = retried(MlflowClient.create_run)
    update_run = retried(MlflowClient.update_run)
    set_terminated = retried(MlflowClient.set_terminated)
    log_batch = retried(MlflowClient.log_batch)
    log_inputs = retried(MlflowClient.log_inputs)
    log_outputs = retried(MlflowClient.log_outputs)
    create_logged_model = retried(MlflowClient.create_logged_model)
    finalize_logged_model = retried(MlflowClient.finalize_logged_model)
