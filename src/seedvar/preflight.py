"""What a command checks before it imports the heavy libraries (torch, Lightning,
transformers): a user's mistake is told in a second, not after a quarter of a minute."""

from __future__ import annotations

import os
from pathlib import Path

from seedvar.config import Config, remote
from seedvar.data.sets import check_headers
from seedvar.errors import DataError
from seedvar.hub import require_hub


def preflight(config: Config, data: bool = True, model: bool = True, device: bool = True) -> None:
    """DataError for a data file that does not exist or whose header lacks a declared column;
    ModelError when the study needs the hub and it cannot be reached; DeviceError where the study
    must train on a GPU and CUDA is unusable here, where a machine that trains runs it; on a
    Ray cluster (ray.address) its nodes answer when the launch starts, not this driver (only
    the data's, the model's or the device's checks, if asked)."""
    if data:
        require_files(config)
        check_headers(config)
    require_hub(config, data=data, model=model)
    if device and config.train.accelerator == "gpu" and config.ray.address is None:
        from seedvar.training.device import require_gpu  # torch: only where a GPU is asked for

        require_gpu(config)


def require_files(config: Config) -> None:
    """DataError naming every data setting whose file does not exist."""
    missing = [
        f"{source}: file not found ({key})"
        for key, source in config.sources().items()
        if not remote(source) and not Path(source).is_file()
    ]
    if missing:
        raise DataError(
            f"{'; '.join(missing)}; check the source in params.yaml or --set, and run from "
            "the project's folder (where data/offline/ is)"
        )


def require_tracked(config: Config) -> None:
    """Where DVC runs the command, DataError naming every declared file outside data/: the
    stages that read one depend on data/ as a whole, and DVC does not look elsewhere (nor into
    a folder linked into data/; a linked file it follows)."""
    if not os.environ.get("DVC_STAGE"):
        return
    outside = [
        f"{key}: {path}"
        for key, path in config.local_files().items()
        if not Path(path).parent.resolve().is_relative_to(Path("data").resolve())
    ]
    if outside:
        raise DataError(
            f"{'; '.join(outside)}: not inside the project's data/ folder, so DVC would not see "
            "the file change; move it into data/ (e.g. data/mine/) and point the setting there"
        )
