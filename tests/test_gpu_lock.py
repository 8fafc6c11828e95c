"""The GPU lock brings what MLflow needs to record GPU system metrics (nvidia-ml-py)."""

from __future__ import annotations

import re

from tests.helpers import REPO

PIN = re.compile(r"^nvidia-ml-py==(\d+)\.[\d.]+ \\\n((?: +--hash=sha256:[0-9a-f]{64}.*\n)+)", re.M)


def test_the_gpu_lock_pins_nvidia_ml_py_with_hashes() -> None:
    pinned = PIN.search((REPO / "requirements" / "gpu.txt").read_text())
    assert pinned, "requirements/gpu.txt does not pin nvidia-ml-py with hashes (make lock)"
    assert int(pinned.group(1)) >= 13  # bindings that know the drivers of CUDA 13's torch
    assert pinned.group(2).count("--hash=sha256:") >= 1
