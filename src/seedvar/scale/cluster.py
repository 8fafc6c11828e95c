"""Ray (an optional extra, imported only where needed): connecting to a cluster or starting Ray
here, what it holds, and what one seed asks of it."""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from seedvar.config import Config, RayConfig
from seedvar.errors import ConfigError, RayUnavailableError, first_line
from seedvar.processes import keep_recording
from seedvar.training.device import usable_gpus

INSTALL = "pip install -e '.[ray]'"
# Seeds that share one GPU at most by default (assumed; benchmarks/gpu.py measures seeds per
# GPU-hour at 1, 2, 4 and 8), and the GPU memory given to one BERT-base seed at batch 32
SEEDS_PER_GPU, SEED_GPU_GIB = 4, 10.0
START_TRIES = 3  # starts of a local Ray (see `_init`)


def import_ray() -> Any:
    """The `ray` module, or one line that says how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(
            f"this command runs seeds on Ray, which is not installed; {INSTALL} (ray 2.60)"
        ) from None
    return ray


@dataclass(frozen=True)
class ClusterInfo:
    """Alive nodes and their resources (`address` None: a local Ray started here)."""

    address: str | None
    nodes: list[dict[str, float]]  # per alive node: {"CPU": ..., "GPU": ...}
    dashboard_url: str | None

    @property
    def cpus(self) -> float:
        return sum(node.get("CPU", 0.0) for node in self.nodes)

    @property
    def gpus(self) -> float:
        return sum(node.get("GPU", 0.0) for node in self.nodes)

    @property
    def one_gpu_per_node(self) -> bool:
        """Whether a worker can train seed after seed (CUDA keeps its first task's GPU)."""
        return all(node.get("GPU", 0.0) <= 1 for node in self.nodes)

    def slots(self, resources: SeedResources) -> int:
        """How many seeds the cluster runs at once (on each node, as many as fit)."""
        asked = {"CPU": resources.cpus, "GPU": resources.gpus}
        return sum(
            min(math.floor(node.get(k, 0.0) / n + 1e-9) for k, n in asked.items() if n)
            for node in self.nodes
        )

    def describe(self) -> str:
        where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
        dashboard = f"; dashboard {self.dashboard_url}" if self.dashboard_url else ""
        size = f"{len(self.nodes)} node(s), {self.cpus:g} CPUs, {self.gpus:g} GPUs"
        return f"{where}: {size}{dashboard}"


@dataclass(frozen=True)
class SeedResources:
    """What one seed asks Ray for, or one process of `seeds` seeds trained stacked."""

    cpus: float
    gpus: float
    seeds: int = 1

    def describe(self) -> str:
        each = "per seed" if self.seeds == 1 else f"per process of {self.seeds} seeds"
        return f"{self.cpus:g} CPU and {self.gpus:g} GPU {each}"


def this_machine() -> ClusterInfo:
    """This machine as a local Ray would see it (this process's CPUs, torch's GPUs), unstarted."""
    node = {"CPU": float(len(os.sched_getaffinity(0))), "GPU": float(usable_gpus())}
    return ClusterInfo(None, [node], None)


def seed_resources(config: Config, cluster: ClusterInfo) -> SeedResources:
    """Resources per seed from the `ray` section (per process: a group of
    `train.seeds_per_process` seeds trained stacked); ConfigError if they do not suit the
    training settings, RayUnavailableError if no node can run one seed."""
    settings, accelerator = config.ray, config.train.accelerator
    gpus = settings.gpus_per_seed
    if gpus == "auto" and cluster.gpus > 0 and accelerator != "cpu":
        gpus = 1 / max(1, seeds_per_gpu(cluster) // config.train.seeds_per_process)
    elif gpus == "auto":
        gpus = 0.0
    if accelerator == "gpu" and gpus == 0:
        raise ConfigError(
            "train.accelerator is gpu but ray.gpus_per_seed is 0 (or the cluster has no GPU); "
            "set ray.gpus_per_seed, e.g. 1 or 0.5, on a cluster with GPUs"
        )
    if accelerator == "cpu" and gpus > 0:
        raise ConfigError(
            f"ray.gpus_per_seed is {gpus:g} but train.accelerator is cpu: the GPUs would sit "
            "idle; set ray.gpus_per_seed=0"
        )
    resources = SeedResources(settings.cpus_per_seed, float(gpus), config.train.seeds_per_process)
    if cluster.slots(resources) == 0:
        largest = max(cluster.nodes, key=lambda n: (n.get("GPU", 0), n.get("CPU", 0)), default={})
        raise RayUnavailableError(
            f"no node of {cluster.describe()} can run one seed with "
            f"{resources.describe()} (the largest node has {largest.get('CPU', 0):g} CPUs and "
            f"{largest.get('GPU', 0):g} GPUs); lower ray.cpus_per_seed or ray.gpus_per_seed, "
            "or add nodes"
        )
    return resources


def seeds_per_gpu(cluster: ClusterInfo) -> int:
    """Seeds per GPU under `gpus_per_seed: auto`: as many as this machine's GPU memory holds, at
    most SEEDS_PER_GPU; one on a cluster, whose GPUs the driver cannot see."""
    if cluster.address is not None:
        return 1
    import torch

    gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    return max(1, min(SEEDS_PER_GPU, math.floor(gib / SEED_GPU_GIB)))


def _init(ray: Any, address: str | None, options: dict[str, Any]) -> Any:
    """`ray.init`; a local Ray that timed out during startup (its raylet's 30 s to register, which
    a loaded 2-core machine can miss) started again, up to START_TRIES times."""
    start = partial(ray.init, address=address, logging_level=logging.WARNING, **options)
    for _ in range(START_TRIES - 1):
        try:
            return start()
        except Exception as error:
            if address != "local" or "during startup" not in str(error):
                raise
            ray.shutdown()
    return start()


@contextmanager
def ray_session(settings: RayConfig, record: Path | None = None) -> Iterator[ClusterInfo]:
    """Connect to the cluster at `ray.address` or RAY_ADDRESS, else start a Ray of this machine's
    own (`ray.init()` would join another running here); shut down on exit what started here.
    `record`: where a local Ray's processes are listed, for the next driver to end those a killed
    one left (`end_recorded`)."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    recording = threading.Event()
    dashboard = None
    if started_here:
        local = settings.address is None and "RAY_ADDRESS" not in os.environ
        # Ray's workers at nice 15 yield to any other work (a task's imports took 264 s, not 30,
        # beside another job on 2 cores); its GPUs: torch's usable ones, not all those listed
        here = {"_system_config": {"worker_niceness": 0}, "num_gpus": usable_gpus()}
        token_note = "ray._private.authentication.authentication_token_setup"  # at every start
        logging.getLogger(token_note).setLevel(logging.ERROR)
        try:
            context = _init(ray, "local" if local else settings.address, here if local else {})
        except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError...
            if local:
                raise RayUnavailableError(
                    f"Ray could not start on this machine ({first_line(error)}); see "
                    "/tmp/ray/session_latest/logs, or set ray.cpus_per_seed to the machine's "
                    "CPU count to train one seed at a time without Ray"
                ) from None
            raise RayUnavailableError(
                f"cannot connect to the Ray cluster at {settings.address or '$RAY_ADDRESS'} "
                f"({first_line(error)}); start it (`ray start --head` on the head node) or "
                "leave ray.address empty to start Ray on this machine"
            ) from None
        dashboard = getattr(context, "dashboard_url", None)
        if local and record is not None:
            keep_recording(record, recording)
    try:
        nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
        address = settings.address or os.environ.get("RAY_ADDRESS")  # ray.init's fallback
        yield ClusterInfo(address, nodes, f"http://{dashboard}" if dashboard else None)
    finally:
        if started_here:
            ray.shutdown()
        recording.set()
