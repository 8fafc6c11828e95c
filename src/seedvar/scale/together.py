"""The main job's seeds at once: `seedvar train --seed N --together`, what DVC's seed stages
run. DVC runs stages one after another, so the first seed stage that finds its seed unfinished
trains every unfinished seed of the study at once, as many as the machine holds (a `launch` on
a local Ray, or on the cluster at `ray.address`), and the stages after it find their seeds
finished and keep them. A seed trains alone, as `seedvar train` trains it, when it is the only
one left, when the machine holds one seed at a time, or when Ray is not installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from seedvar.config import Config
from seedvar.scale.cluster import INSTALL, seed_resources, this_machine
from seedvar.study.job import SeedJob


def study_to_train_together(study: Config, seed: int, echo: Callable[[str], None]) -> Config | None:
    """The study (with seed job `seed` among its seeds) to train at once, or None when that
    seed trains alone. `study` is the study's config, not one seed's: in a factorial design
    each seed job's pair of seeds comes from it."""
    study = study.model_copy(update={"seeds": list(dict.fromkeys([*study.seeds, seed]))})
    todo = [
        job
        for job in study.seeds
        if not SeedJob(Path(study.output_dir), job).finished_with(study.with_seed(job))
    ]
    if seed not in todo or len(todo) == 1:
        return None
    if importlib.util.find_spec("ray") is None:
        echo(f"Ray is not installed: seeds train one at a time ({INSTALL} trains them at once)")
        return None
    if study.ray.address is None:
        machine = this_machine()
        if machine.slots(seed_resources(study, machine)) < 2:
            return None
    return study
