"""Writing files so that no reader (and no other writer) ever sees half of one."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMPORARY = ".partial-"  # marks what is being written: name + TEMPORARY + random


def temporary(path: Path) -> Path:
    """A fresh temporary name beside `path`, never shared by two writers (not even by two
    attempts at a seed that wrote into the same folder around a takeover)."""
    return path.with_name(f"{path.name}{TEMPORARY}{uuid.uuid4().hex[:8]}")


def link_or_copy(source: str, target: str) -> None:
    """A hard link to `source` at `target`, or a copy where links cannot go (another disk)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` under a temporary name, then rename it into place (a failed
    write, a full disk, leaves `path` as it was and no temporary behind)."""
    partial = temporary(path)
    try:
        partial.write_text(text)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


@contextmanager
def staged_into(target: Path) -> Iterator[Path]:
    """A temporary folder beside `target` to write into; when the block ends without an error
    its entries replace `target`'s of the same names (each renamed into place, so no reader
    sees half a file; entries it did not write stay), else it is removed and `target` is as
    it was."""
    partial = temporary(target)
    partial.mkdir(parents=True)
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(partial.iterdir()):
        destination = target / entry.name
        old = temporary(destination)
        if destination.is_dir():
            os.replace(destination, old)
        os.replace(entry, destination)
        shutil.rmtree(old, ignore_errors=True)
    partial.rmdir()


def remove_temporaries(folder: Path) -> None:
    """Temporary files and folders left in `folder` by writers that died mid-write."""
    for path in sorted(folder.rglob(f"*{TEMPORARY}*"), reverse=True):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
