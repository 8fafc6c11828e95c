"""A real PostgreSQL server for tests, from Debian's packages, started and stopped here."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(
            "the PostgreSQL server is not installed; apt-get install postgresql (CI does)"
        )
    return found[-1]


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as the postgres user when we are root."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway cluster on a free loopback port; yield an SQLAlchemy URL."""
    root = Path(tempfile.mkdtemp(prefix="seedvar-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", _free_port()

    def run(command: list[str]) -> None:  # each of these takes a few seconds at most
        subprocess.run(
            _as_postgres(command), check=True, capture_output=True, text=True, timeout=120
        )

    run([_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"])
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run([_bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"])
    try:
        run([_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "seedvar"])
        yield f"postgresql://postgres@127.0.0.1:{port}/seedvar"
    finally:
        run([_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
