"""Optuna storage for sweeps: an SQLite file or any SQLAlchemy URL (PostgreSQL to share one
sweep between machines)."""

from __future__ import annotations

import warnings
from pathlib import Path

from optuna.exceptions import ExperimentalWarning
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

from seedvar.errors import ConfigError, first_line


def rdb_storage(url: str, heartbeat_seconds: int | None, max_retries: int) -> RDBStorage:
    """Storage whose running trials send heartbeats; a trial silent for twice the interval is
    failed and re-enqueued (at most `max_retries` times). Unreachable databases fail fast.
    `heartbeat_seconds` None: no heartbeats (trials not run by `Study.optimize`)."""
    engine_kwargs = {}
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    elif url.startswith("postgresql"):
        engine_kwargs = {"connect_args": {"connect_timeout": 5}}
    try:
        with warnings.catch_warnings():  # heartbeats have been "experimental" since Optuna 2.9
            warnings.simplefilter("ignore", ExperimentalWarning)
            if heartbeat_seconds is None:
                return RDBStorage(url, engine_kwargs=engine_kwargs)
            return RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=heartbeat_seconds,
                grace_period=2 * heartbeat_seconds,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retries),
            )
    except Exception as error:  # SQLAlchemy raises many types for a bad or unreachable URL
        reason = first_line(error)
        raise ConfigError(
            f"cannot open the study storage {url} ({reason}); check the URL and that the "
            "database server is running"
        ) from None
