"""Writing files so that no reader (and no other writer) ever sees half of one."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

TEMPORARY = ".partial-"  # marks what is being written: name + TEMPORARY + random


def temporary(path: Path) -> Path:
    """A fresh temporary name beside `path`, never shared by two writers (not even by two
    attempts at a seed that wrote into the same folder around a takeover)."""
    return path.with_name(f"{path.name}{TEMPORARY}{uuid.uuid4().hex[:8]}")


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` under a temporary name, then rename it into place."""
    partial = temporary(path)
    partial.write_text(text)
    os.replace(partial, path)


def remove_temporaries(folder: Path) -> None:
    """Temporary files and folders left in `folder` by writers that died mid-write."""
    for path in sorted(folder.rglob(f"*{TEMPORARY}*"), reverse=True):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
