"""A Ray cluster whose nodes do not all share the driver's disk, on this machine: a node started
in a mount namespace of its own, where the project's path holds that node's own copy of the
project (a checkout cloned on each machine at the same path, as on a cluster without shared
storage). Its seeds would be published on its own disk, out of the driver's sight: the launch
stops before any seed trains, naming that node, the folder it does not see and the fix.

The cluster (a head without CPUs, a node on this machine's file system and the node with a disk
of its own) starts once for the module."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.helpers import QUICK, REPO, STUDY, one_line_error, run_command, seedvar

pytestmark = pytest.mark.slow
ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="pip install -e '.[ray]'")

# a mount namespace of its own: as root, or as anyone where user namespaces are allowed
NAMESPACES = (
    ["unshare", "--mount", "--propagation", "private"],
    ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"],
)
OWN_DISK = "own_disk"  # the custom resource that tells that node apart in Ray's node table


@dataclass(frozen=True)
class SplitCluster:
    """The cluster's address, the driver's project folder, what the node with a disk of its own
    sees at that path (its own copy), and the two nodes that train (Ray node ids)."""

    address: str
    project: Path
    own_disk: Path
    shared_node: str
    own_disk_node: str


def _namespace(own_disk: Path, project: Path) -> list[str] | None:
    """The `unshare` command line that can mount `own_disk` over `project` here, or None."""
    for command in NAMESPACES:
        try:
            done = subprocess.run(
                [*command, "mount", "--bind", str(own_disk), str(project)],
                capture_output=True,
                timeout=QUICK,
            )
        except OSError:
            return None
        if done.returncode == 0:
            return command
    return None


def _stop(process: subprocess.Popen) -> None:
    """Stop a node started by `ray start --block` and every process it started, by their ids."""
    started = [process.pid]
    with contextlib.suppress(psutil.NoSuchProcess):
        started += [child.pid for child in psutil.Process(process.pid).children(recursive=True)]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)  # Ray drains the node and ends its processes
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=60)
    for pid in started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(timeout=QUICK)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SplitCluster]:
    base = tmp_path_factory.mktemp("nodes")
    project, own_disk = base / "project", base / "own-disk"
    project.mkdir()
    (project / "data").symlink_to(REPO / "data")
    shutil.copytree(project, own_disk, symlinks=True)  # the project cloned on the other machine
    namespace = _namespace(own_disk, project)
    if namespace is None:
        pytest.skip("no mount namespace of its own can be made here (unshare)")
    head = {"num_cpus": 0, "include_dashboard": False}
    started = ray_cluster_utils.Cluster(initialize_head=True, head_node_args=head)
    node: subprocess.Popen | None = None
    try:
        started.add_node(num_cpus=1)
        started.wait_for_nodes()
        ray = str(Path(sys.executable).parent / "ray")
        start = [ray, "start", f"--address={started.address}", "--num-cpus=1", "--block"]
        start += [f'--resources={{"{OWN_DISK}": 1}}', "--object-store-memory=100000000"]
        start += ["--disable-usage-stats"]
        script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'  # then the node, in there
        node = subprocess.Popen(
            [*namespace, "sh", "-c", script, "sh", str(own_disk), str(project), *start],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        nodes = _nodes(started, node, 3)
        yield SplitCluster(
            started.address,
            project,
            own_disk,
            shared_node=next(n["NodeID"] for n in nodes if not n["own"] and n["cpus"]),
            own_disk_node=next(n["NodeID"] for n in nodes if n["own"]),
        )
    finally:
        if node is not None:
            _stop(node)
        started.shutdown()


def _nodes(started: object, node: subprocess.Popen, count: int) -> list[dict]:
    """Ray's alive nodes once there are `count`: id, whether it has a disk of its own, CPUs."""
    deadline = time.monotonic() + STUDY
    while time.monotonic() < deadline:
        assert node.poll() is None, "the node with a disk of its own did not start"
        table = started.global_state.node_table()
        alive = [entry for entry in table if entry["Alive"]]
        if len(alive) == count:
            return [
                {
                    "NodeID": entry["NodeID"],
                    "own": OWN_DISK in entry["Resources"],
                    "cpus": entry["Resources"].get("CPU", 0),
                }
                for entry in alive
            ]
        time.sleep(0.5)
    pytest.fail(f"the cluster did not reach {count} nodes")


def launch(cluster: SplitCluster, *settings: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI",)}
    environment.pop("RAY_ADDRESS", None)
    flags = [f"ray.address='{cluster.address}'", "seeds=[0, 1]", *settings]
    command = seedvar("launch", "--profile", "smoke", *[a for s in flags for a in ("--set", s)])
    return run_command(command, cwd=cluster.project, env=environment, timeout=STUDY)


def seeds_in(folder: Path) -> list[str]:
    """Seeds published, kept or in progress under a project folder (either disk's)."""
    found = [*folder.glob("runs/seed-*"), *folder.glob(".seedvar/runs/seed-*")]
    return sorted(path.name for path in found)


def test_a_node_with_a_disk_of_its_own_stops_the_launch_before_any_seed_trains(
    cluster: SplitCluster,
) -> None:
    """Without the check, that node trains a seed and publishes it on its own disk, and the
    launch reports "2 of 2 seeds finished" with one of them out of the driver's sight."""
    done = launch(cluster)
    keep = cluster.project / ".seedvar" / "runs"
    one_line_error(done, "does not see this driver's folders")
    line = done.stderr.strip().splitlines()[-1]
    assert f"Ray node {cluster.own_disk_node[:8]}" in line  # that node, and only that one
    assert cluster.shared_node[:8] not in line
    assert f"{keep}/.seedvar-nodes-" in line and "(not found)" in line  # the folder it misses
    assert "mounts at the same path (NFS" in line and "leave ray.address empty" in line
    assert seeds_in(cluster.project) == [] and seeds_in(cluster.own_disk) == []  # none trained
    assert not list(keep.glob(".seedvar-nodes-*"))  # the driver's token, removed
    assert not (cluster.project / "runs").exists()  # made for the check, and removed again
    assert not (cluster.project / "mlruns").exists()  # nor did any seed open an MLflow run
