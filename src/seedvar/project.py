"""Where a study's project is (the folder its relative paths mean, also inside DVC), where
its seeds are kept (the keep), and what its prepared inputs were made from (read without the
heavy data libraries, so that a finished seed is found without them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

KEEPS = ".seedvar"  # the keeps, beside output_dir: work in progress, finished seeds, the lease
MANIFEST = "manifest.json"  # in a folder of prepared inputs: what they were made from


def prepared_data(prepared: Path | None) -> dict[str, str] | None:
    """The content fingerprints of the sets in a folder of prepared inputs (None: no folder)."""
    if prepared is None or not (prepared / MANIFEST).is_file():
        return None
    return json.loads((prepared / MANIFEST).read_text())["fingerprints"]


def project_root() -> Path:
    """The project folder: DVC_ROOT where DVC runs the command (it names the workspace also
    for `dvc exp run --temp` and queued experiments, which run in a temporary copy that DVC
    deletes), else the working directory."""
    return Path(os.environ.get("DVC_ROOT") or Path.cwd()).resolve()


def keep_of(output_dir: Path) -> Path:
    """The keep of output_dir's seeds (the folder that keeps them safe from a DVC checkout):
    `.seedvar/runs` for output_dir `runs` (relative paths: under the project root),
    `X/.seedvar/NAME` for an absolute output_dir `X/NAME`."""
    if output_dir.is_absolute():
        return output_dir.parent / KEEPS / output_dir.name
    return project_root() / KEEPS / output_dir
