"""Writes that outlast a busy store: a tracking write that meets a lock (SQLite past its busy
timeout; a PostgreSQL lock timeout, serialization conflict or deadlock) or a dropped connection
is tried again, with backoff, for up to WRITE_RETRY_SECONDS; only then does the seed see it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from mlflow.tracking import MlflowClient

from seedvar.errors import transient_cause

WRITE_RETRY_SECONDS = 300.0  # how long one write keeps trying
FIRST_WAIT, LONGEST_WAIT = 0.1, 5.0  # seconds between tries: doubling from the first
log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


def retried(write: Callable[P, R]) -> Callable[P, R]:
    """`write`, tried again while it fails with a passing error (`errors.transient`) and
    WRITE_RETRY_SECONDS have not passed; then it raises that error."""

    @wraps(write)
    def again(*args: P.args, **kwargs: P.kwargs) -> R:
        deadline, wait = time.monotonic() + WRITE_RETRY_SECONDS, FIRST_WAIT
        while True:
            try:
                return write(*args, **kwargs)
            except Exception as error:
                cause = transient_cause(error)
                if cause is None or time.monotonic() + wait > deadline:
                    raise
                log.warning("tracking store busy (%s): writing again", cause)
                time.sleep(wait)
                wait = min(2 * wait, LONGEST_WAIT)

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
