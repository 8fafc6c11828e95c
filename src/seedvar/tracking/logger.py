"""The Lightning loggers that send a seed's training curves to the MLflow run seedvar opened
(RunLogger), and each of several seeds' trained in one process to its own (SeedsLogger)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lightning.pytorch.loggers import Logger, MLFlowLogger

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


class SeedsLogger(Logger):
    """The loggers of several seeds trained in one process, each under the suffix that marks
    its seed's metrics (`/seed-3`): a metric so marked goes to that seed's logger without the
    suffix; one whose name has marked variants (the seeds' mean) to none; any other (the
    learning rate, the epoch) to every seed's."""

    def __init__(self, loggers: Mapping[str, Logger]) -> None:
        super().__init__()
        self.loggers = dict(loggers)
        self.per_seed: set[str] = set()  # the names of metrics logged for each seed

    @property
    def name(self) -> str:
        return "seeds"

    @property
    def version(self) -> str:
        return "0"

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        own: dict[str, dict[str, float]] = {suffix: {} for suffix in self.loggers}
        shared = {}
        for name, value in metrics.items():
            suffix = next((suffix for suffix in self.loggers if name.endswith(suffix)), None)
            if suffix is None:
                shared[name] = value
                continue
            self.per_seed.add(name.removesuffix(suffix))
            own[suffix][name.removesuffix(suffix)] = value
        shared = {name: value for name, value in shared.items() if name not in self.per_seed}
        for suffix, logger in self.loggers.items():
            if own[suffix] or shared:
                logger.log_metrics({**shared, **own[suffix]}, step)

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        for logger in self.loggers.values():
            logger.log_hyperparams(params, *args, **kwargs)

    def save(self) -> None:
        for logger in self.loggers.values():
            logger.save()

    def finalize(self, status: str) -> None:
        for logger in self.loggers.values():
            logger.finalize(status)
