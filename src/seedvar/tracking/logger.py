"""The Lightning logger that sends a seed's training curves to the MLflow run seedvar opened."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lightning.pytorch.loggers import MLFlowLogger

from seedvar.tracking.retry import retried


class RunLogger(MLFlowLogger):
    """MLFlowLogger on a run seedvar opened (and ends, after evaluation), its metrics `retried`.
    `guard` runs before each write (it may raise to stop a process that lost the run); steps up
    to `after_step` are not logged again (a resumed attempt retraces those since its checkpoint)."""

    def __init__(
        self,
        *args: Any,
        guard: Callable[[], None] = lambda: None,
        after_step: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._guard, self._after_step = guard, after_step

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self._guard()
        if self._after_step is not None and step is not None and step <= self._after_step:
            return
        retried(super().log_metrics)(metrics, step)

    def finalize(self, status: str = "success") -> None:
        """Leave the run open: evaluation and publishing still follow training."""
