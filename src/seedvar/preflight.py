"""What a command checks before it imports the heavy libraries (torch, Lightning,
transformers): a user's mistake is told in a second, not after a quarter of a minute."""

from __future__ import annotations

from pathlib import Path

from seedvar.config import Config
from seedvar.data.sets import check_headers
from seedvar.data.sources import REMOTE
from seedvar.errors import DataError
from seedvar.hub import require_hub


def preflight(config: Config, data: bool = True, model: bool = True) -> None:
    """DataError for a data file that does not exist or whose header lacks a declared column;
    ModelError when the study needs the hub and it cannot be reached (only the data's or the
    model's checks, if asked)."""
    if data:
        require_files(config)
        check_headers(config)
    require_hub(config, data=data, model=model)


def require_files(config: Config) -> None:
    """DataError naming every data setting whose file does not exist."""
    missing = [
        f"{source}: file not found ({key})"
        for key, source in config.sources().items()
        if not source.startswith(REMOTE) and not Path(source).is_file()
    ]
    if missing:
        raise DataError(
            f"{'; '.join(missing)}; check the source in params.yaml or --set, and run from "
            "the project's folder (where data/offline/ is)"
        )
