"""MLflow tracking: the store (store.py), runs and their lifecycle (runs.py), the Lightning
logger (logger.py, imported from there: it loads Lightning). Callers use `from seedvar import
tracking` and the names below."""
# ruff: noqa: F401 (the names are this package's interface)

from seedvar.tracking.runs import (
    DESCRIPTION_TAG,
    FAILED,
    FINISHED,
    KILLED,
    PARENT_TAG,
    ROLE_TAG,
    RunStopped,
    TrackedRun,
    ended_by_outcome,
    log_study_results,
    open_run,
    provenance,
    seed_run_name,
    start_run,
    study_label,
    study_run_id,
)
from seedvar.tracking.store import (
    Store,
    check_reachable,
    open_store,
    runs_table_url,
    sqlite_file,
    tracking_uri,
    ui_command,
)
