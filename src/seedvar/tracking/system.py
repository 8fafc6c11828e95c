"""A seed's system metrics: MLflow's samplers of the machine (CPU and memory, disk, network) and
of the seed's own GPU, logged into the seed's run every `tracking.system_metrics_seconds` from a
thread of their own. Two things MLflow's own `SystemMetricsMonitor` (3.17) gets wrong for seeds
that train side by side are done here instead:

- its writes are not retried: the first one that meets a busy store (SQLite's lock held past its
  busy timeout) ends its thread, and the seed records no more system metrics. Here each write
  is `retried` like every other tracking write; one that outlasts the retries stops the system
  metrics alone, in one line, and the seed trains on.
- it records every GPU NVML counts (NVML ignores CUDA_VISIBLE_DEVICES), so that each of 8 seeds
  on an 8-GPU node would log all 8 GPUs as its own. Here only the GPU the seed trains on (torch's
  first CUDA device, found in NVML by its UUID) is logged, as `gpu_0_*`. Seeds that share one GPU
  (`ray.gpus_per_seed` below 1) all log that GPU: its use is theirs together."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mlflow.entities import Metric
from mlflow.system_metrics.metrics import gpu_monitor
from mlflow.system_metrics.metrics.base_metrics_monitor import BaseMetricsMonitor
from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

from seedvar.errors import first_line
from seedvar.tracking.retry import RetryingClient, retried, writer

PREFIX = "system/"  # MLflow's, so that its UI shows them as system metrics


def seed_gpus() -> list[str]:
    """The NVML UUIDs (`GPU-...`) of the GPU a seed in this process trains on: torch's first
    CUDA device (Lightning's `devices=1`; Ray sets CUDA_VISIBLE_DEVICES to the task's GPU)."""
    import torch

    if not torch.cuda.is_available():
        return []
    return [f"GPU-{torch.cuda.get_device_properties(0).uuid}"]


class OwnGPUMonitor(gpu_monitor.GPUMonitor):
    """MLflow's GPU sampler over the GPUs of `uuids` alone (RuntimeError where NVML finds none
    of them, as MLflow's own raises where it cannot start)."""

    def __init__(self, uuids: list[str]) -> None:
        super().__init__()
        nvml = gpu_monitor.pynvml
        by_uuid = {_text(nvml.nvmlDeviceGetUUID(h)).lower(): h for h in self.gpu_handles}
        self.gpu_handles = [by_uuid[u.lower()] for u in uuids if u.lower() in by_uuid]
        self.num_gpus = len(self.gpu_handles)
        if not self.gpu_handles:
            raise RuntimeError(f"NVML does not list the seed's GPU ({', '.join(uuids)})")


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def samplers(gpus: list[str]) -> list[BaseMetricsMonitor]:
    """MLflow's samplers of this machine, and of the GPUs of `gpus` where NVML answers."""
    found: list[BaseMetricsMonitor] = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
    if gpus:
        try:
            found.append(OwnGPUMonitor(gpus))
        except Exception as error:  # no nvidia-ml-py, no NVML: no GPU metrics, as in MLflow
            print(f"seedvar: no GPU system metrics ({first_line(error)})", file=sys.stderr)
    return found


class SystemMetrics:
    """Samples every `seconds` into the run `run_id` of the store at `uri`, from a thread of its
    own; `holds`: whether this attempt still holds the run (checked before each write, as every
    write of a seed is)."""

    def __init__(
        self,
        uri: str,
        run_id: str,
        seconds: float,
        gpus: list[str],
        holds: Callable[[], bool] = lambda: True,
    ) -> None:
        self.client, self.run_id = RetryingClient(uri), run_id
        self.seconds, self.holds = seconds, holds
        self.samplers = samplers(gpus)
        self.step = self._next_step()  # a resumed seed continues its steps
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="system metrics")

    def _next_step(self) -> int:
        run = retried(self.client.get_run)(self.run_id)
        steps = [m.step for m in run.data._metric_objs if m.key.startswith(PREFIX)]
        return max(steps) + 1 if steps else 0

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """Stop sampling (a write under way ends first)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _sample(self) -> None:
        try:
            while True:
                for sampler in self.samplers:
                    sampler.collect_metrics()
                if self._stop.wait(self.seconds) or not self.holds():
                    return
                self.publish()
        except Exception as error:  # a write that outlasted its retries: the seed goes on
            who = f"{writer()}: " if writer() else ""
            print(
                f"seedvar: warning: {who}system metrics stopped ({type(error).__name__}: "
                f"{first_line(error)}); training goes on",
                file=sys.stderr,
            )

    def publish(self) -> None:
        """Log what was sampled since the last time, as one step."""
        values: dict[str, Any] = {}
        for sampler in self.samplers:
            values |= sampler.aggregate_metrics()
            sampler.clear_metrics()
        now = int(time.time() * 1000)
        metrics = [Metric(PREFIX + key, value, now, self.step) for key, value in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)  # retried
        self.step += 1


@contextmanager
def system_metrics(
    uri: str,
    run_id: str,
    seconds: float,
    on_gpu: bool,
    holds: Callable[[], bool] = lambda: True,
) -> Iterator[SystemMetrics]:
    """Sample the machine (and, `on_gpu`, the seed's own GPU) into the run `run_id` of the store
    at `uri` while the block runs."""
    sampling = SystemMetrics(uri, run_id, seconds, seed_gpus() if on_gpu else [], holds)
    sampling.start()
    try:
        yield sampling
    finally:
        sampling.finish()
