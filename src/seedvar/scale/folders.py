"""The folders a cluster's nodes share with the driver. A seed's work, its progress and the
finished seed are written on the disk of the node that trains it, and the driver watches them
(stalls) and counts them (the launch's report) on its own disk: on a cluster of several machines
those must be one file system (NFS and the like, mounted at the same path). A node with a disk of
its own (the project cloned on it at the same path) would train seeds the driver never sees.

Before any seed trains, the driver writes a token (`Token`) into the keep and into output_dir,
and a Ray task on every node that can run a seed reads it where that node's seeds would write
(`check_nodes`); a node that does not see it stops the launch in one line. Each seed's task reads
the keep's token again as it starts (`unseen`), for a node that joined the cluster since. This
module imports nothing heavy: the check's Ray task imports it on every node."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seedvar.errors import ConfigError

CHECK_SECONDS = 300.0  # how long the driver waits for every node's answer (a loaded node's
# worker takes that long to start at worst; one that answers later is checked by its seeds)
TOKEN_PREFIX = ".seedvar-nodes-"
FIX = (
    "put the project on a file system that every node mounts at the same path (NFS, for "
    "example: docs/ray.md, step 1), or train on one machine (leave ray.address empty)"
)


@dataclass(frozen=True)
class Token:
    """What the driver wrote: `text` in a file `name` inside each of `folders`, as a seed's task
    sees them: the keep (absolute) and output_dir (relative: under `project_dir`, where a task
    works)."""

    text: str
    name: str
    project_dir: str
    folders: tuple[str, ...]

    def paths(self) -> list[Path]:
        return [Path(self.project_dir) / folder / self.name for folder in self.folders]

    @property
    def driver(self) -> str:
        """The host of the driver that wrote it."""
        return self.text.split(":")[0]


def unseen(token: Token) -> str | None:
    """Where this machine does not see the driver's folders: the first of the token's files it
    cannot read as the driver wrote it, with why; None where it sees them all."""
    if not Path(token.project_dir).is_dir():
        return f"the project folder {token.project_dir} (not found)"
    for path in token.paths():
        try:
            found = path.read_text()
        except FileNotFoundError:
            return f"{path} (not found)"
        except OSError as error:
            return f"{path} ({error.strerror or error})"
        if found != token.text:
            return f"{path} (another driver's)"
    return None


def refusal(nodes: list[str], problem: str, token: Token) -> ConfigError:
    """The one line for `nodes` that do not see the folders of `token` (`problem`: the first
    file the first of them does not see, as `unseen` says)."""
    which = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {', '.join(nodes)}"
    verb = "does" if len(nodes) == 1 else "do"
    return ConfigError(
        f"{which} {verb} not see this driver's folders: {problem}, written by the driver on "
        f"{token.driver}; its seeds would be published, and their progress written, on "
        f"its own disk, where the driver can neither count nor watch them; {FIX}"
    )


def node_label(node: dict[str, Any]) -> str:
    """`gpu-3 (10.0.0.7, Ray node 5f3e9a12)`: a node of `ray.nodes()`."""
    host = node.get("NodeManagerHostname") or "?"
    return f"{host} ({node.get('NodeManagerAddress', '?')}, Ray node {node['NodeID'][:8]})"


@contextmanager
def shared_with_nodes(
    ray: Any,
    cpus: float,
    gpus: float,
    project_dir: str,
    keep: Path,
    output_dir: str,
    echo: Callable[[str], None],
) -> Iterator[Token]:
    """Check, before any seed trains, that every node that can run a seed (asking `cpus` and
    `gpus`) sees the keep `keep` (absolute) and `output_dir` (relative: under `project_dir`) as
    this driver does (`check_nodes`); yields the keep's token for the seeds' tasks to check
    again as they start, removed when the block ends. The study's lease keeps other drivers
    out of these folders; the token's name is its own all the same."""
    text = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(16)}"
    name = f"{TOKEN_PREFIX}{secrets.token_hex(6)}"
    with _written(keep / name, text):
        with _written(Path(output_dir) / name, text):  # not left in a DVC output longer
            token = Token(text, name, project_dir, (str(keep), output_dir))
            check_nodes(ray, seed_nodes(ray, cpus, gpus), token, echo)
        yield Token(text, name, project_dir, (str(keep),))


@contextmanager
def _written(path: Path, text: str) -> Iterator[None]:
    """`text` in the file `path` while the block runs (its folder made where missing, and
    removed again with the file where it was made here)."""
    made = [p for p in path.parents if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        for folder in made:  # the deepest first
            try:
                folder.rmdir()
            except OSError:
                break


def seed_nodes(ray: Any, cpus: float, gpus: float) -> list[dict[str, Any]]:
    """The alive nodes of the cluster that can run a seed asking `cpus` CPUs and `gpus` GPUs."""
    fits = []
    for node in ray.nodes():
        have = node["Resources"] if node["Alive"] else {}
        if have and have.get("CPU", 0.0) >= cpus and have.get("GPU", 0.0) >= gpus:
            fits.append(node)
    return fits


def check_nodes(
    ray: Any, nodes: list[dict[str, Any]], token: Token, echo: Callable[[str], None]
) -> None:
    """ConfigError, in one line, where a node of `nodes` does not see the folders of `token`
    (a Ray task on each, asking for no resources). A node that does not answer within
    CHECK_SECONDS is named in a line of its own; its seeds check the keep as they start."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0, max_retries=0)(unseen)
    refs = {
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            name="seedvar: does this node see the driver's folders?",
        ).remote(token): node
        for node in nodes
    }
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=CHECK_SECONDS)
    blind: list[str] = []
    problem = ""
    for ref in ready:
        try:
            missing = ray.get(ref)
        except ray.exceptions.RayError as error:  # the node went away meanwhile
            echo(f"node {node_label(refs[ref])} could not be checked ({type(error).__name__})")
            continue
        if missing is not None:
            blind.append(node_label(refs[ref]))
            problem = problem or missing
    for ref in late:
        ray.cancel(ref, force=True)
        echo(
            f"node {node_label(refs[ref])} did not answer within {CHECK_SECONDS:.0f} s whether "
            "it sees this driver's folders; its seeds check that as they start"
        )
    if blind:
        raise refusal(sorted(blind), problem, token)
