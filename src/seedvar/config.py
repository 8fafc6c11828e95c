"""Typed configuration: defaults < profile < params.yaml < --set overrides, validated up front.

The defaults and the profiles are data (src/seedvar/profiles/*.yaml) that DVC stages depend
on; the classes here say only what each setting may be.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AllowInfNan,
    BaseModel,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonDict

from seedvar.declared import Diagnostic, Reference, Section, Task, close_match, declaration_problems
from seedvar.errors import ConfigError

PROFILES_DIR = Path(__file__).parent / "profiles"
DEFAULTS = PROFILES_DIR / "defaults.yaml"


Finite = Annotated[float, AllowInfNan(False)]  # .inf and .nan are typos, not settings

# A field's place in the recipe (what decides a seed's result), marked on the field itself:
OUTSIDE_RECIPE: JsonDict = {"recipe": "no"}  # where a study runs, is cached and logged
PER_SEED: JsonDict = {"recipe": "seed"}  # part of one seed's recipe, not of the study's
IF_SET: JsonDict = {"recipe": "if set"}  # in the recipe once set (recipes of before it lack it)


class ModelConfig(Section):
    name: str
    max_length: StrictInt = Field(ge=8, le=512)


class DataConfig(Section):
    augment_examples: StrictInt = Field(ge=0)  # pairs of task.augmentation added to training
    max_train_examples: StrictInt | None = Field(gt=0)
    max_val_examples: StrictInt | None = Field(gt=0)
    max_eval_examples: StrictInt | None = Field(gt=0)
    cache_dir: str = Field(json_schema_extra=OUTSIDE_RECIPE)


class TrainConfig(Section):
    seed: StrictInt = Field(ge=0, json_schema_extra=PER_SEED)
    init_seed: StrictInt | None = Field(ge=0, json_schema_extra=PER_SEED)
    data_seed: StrictInt | None = Field(ge=0, json_schema_extra=PER_SEED)
    learning_rate: Finite = Field(gt=0)
    batch_size: StrictInt = Field(gt=0)
    epochs: StrictInt = Field(gt=0)
    group_by_length: StrictBool
    max_steps: StrictInt | None = Field(gt=0)
    warmup_ratio: Finite = Field(ge=0, lt=1)
    weight_decay: Finite = Field(ge=0)
    gradient_clip: Finite = Field(gt=0)
    precision: Literal["auto", "32-true", "bf16-mixed", "16-mixed"]
    accelerator: Literal["auto", "cpu", "gpu"]
    eval_batch_size: StrictInt = Field(gt=0)
    eval_precision: Literal["auto", "32", "bf16", "16"]
    compile: StrictBool
    log_every_n_steps: StrictInt = Field(gt=0, json_schema_extra=OUTSIDE_RECIPE)
    # validation every this many training steps (null: each epoch); a sweep's pruner reads it.
    # In the recipe: each validation pass draws a loader seed from the global random stream
    val_every_n_steps: StrictInt | None = Field(None, gt=0, json_schema_extra=IF_SET)
    # a resumable checkpoint every this many minutes of training (and every n steps, if set)
    checkpoint_every_minutes: Finite | None = Field(15.0, gt=0, json_schema_extra=OUTSIDE_RECIPE)
    checkpoint_every_n_steps: StrictInt | None = Field(None, gt=0, json_schema_extra=OUTSIDE_RECIPE)
    # the dtype a finished seed's weights are kept in (evaluated before, in full precision)
    weights_dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", json_schema_extra=OUTSIDE_RECIPE
    )
    # diagnostic examples per set evaluated during training (seeds/trajectory.py); 0: none
    # (the default of configs saved before trajectories). Outside the recipe: evaluating on
    # the way changes no weight (tested)
    trajectory_examples: StrictInt = Field(0, ge=0, json_schema_extra=OUTSIDE_RECIPE)
    trajectory_every_n_steps: StrictInt | None = Field(None, gt=0, json_schema_extra=OUTSIDE_RECIPE)
    # seeds trained stacked in one process (training/stacked.py), each as it trains alone (to
    # float rounding): outside the recipe, like where a seed trains
    seeds_per_process: StrictInt = Field(1, ge=1, json_schema_extra=OUTSIDE_RECIPE)

    @field_validator("eval_precision", mode="before")
    @classmethod
    def _precision_as_text(cls, value: Any) -> Any:
        """`--set train.eval_precision=32` reads 32 as a number; it means "32"."""
        return str(value) if type(value) is int else value

    @property
    def effective_init_seed(self) -> int:
        """Seed for the classifier head and dropout (defaults to `seed`)."""
        return self.seed if self.init_seed is None else self.init_seed

    @property
    def effective_data_seed(self) -> int:
        """Seed for the training-data order (defaults to `seed`)."""
        return self.seed if self.data_seed is None else self.data_seed


class TrackingConfig(Section):
    uri: str | None
    experiment: str
    log_weights: StrictBool
    system_metrics_seconds: StrictInt = Field(gt=0)


class SearchRange(Section):
    """One hyperparameter's range: low/high (ints give integers; `log`, `step`), or choices."""

    low: int | float | None = None  # an int stays an int (integer settings)
    high: int | float | None = None
    log: bool = False
    step: int | float | None = None
    choices: list[Any] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _range_or_choices(self) -> SearchRange:
        if self.choices is not None:
            return self
        if self.low is None or self.high is None or self.low > self.high:
            raise ValueError("give either choices, or low <= high")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs low > 0")
        return self


class SweepConfig(Section):
    study_name: str
    storage: str
    n_trials: StrictInt = Field(gt=0)
    seeds_per_trial: StrictInt = Field(gt=0)
    mode: Literal["accuracy", "accuracy_and_spread"]
    pruner: Literal["median", "none"]
    sampler: Literal["tpe", "grid"] = "tpe"  # absent from configs recorded before the grid
    heartbeat_seconds: StrictInt = Field(gt=0)
    max_retries: StrictInt = Field(ge=0)
    space: dict[str, SearchRange]

    @model_validator(mode="after")
    def _a_spread(self) -> SweepConfig:
        if self.mode == "accuracy_and_spread" and self.seeds_per_trial < 2:
            raise ValueError(
                "seeds_per_trial: give 2 or more in the accuracy_and_spread mode: a trial's "
                "spread across seeds needs two seeds"
            )
        return self

    @field_validator("space")
    @classmethod
    def _known_keys(cls, space: dict[str, SearchRange]) -> dict[str, SearchRange]:
        for key in space:
            setting_path(key)
        return space

    @model_validator(mode="after")
    def _a_grid(self) -> SweepConfig:
        if self.sampler == "grid":
            ranges = [key for key, spec in self.space.items() if spec.choices is None]
            if ranges:
                raise ValueError(
                    f"the grid sampler runs every combination of choices; give {ranges[0]} "
                    "choices, not low/high"
                )
            size = math.prod(len(spec.choices or ()) for spec in self.space.values())
            if self.n_trials > size:
                raise ValueError(
                    f"n_trials {self.n_trials} is more than the grid's {size} configurations; "
                    f"set it to {size} (--trials {size})"
                )
        return self


class RayConfig(Section):
    """How `seedvar launch` and `seedvar sweep --ray` run seeds as Ray tasks."""

    address: str | None
    project_dir: str | None
    cpus_per_seed: Finite = Field(gt=0)
    gpus_per_seed: Any
    max_retries: StrictInt = Field(ge=0)
    stall_seconds: Finite = Field(gt=0)

    @field_validator("cpus_per_seed")
    @classmethod
    def _whole_above_one(cls, value: float) -> float:
        if value > 1 and value != int(value):
            raise ValueError("above 1, give a whole number of CPUs (Ray's rule), e.g. 2")
        return value

    @field_validator("gpus_per_seed")
    @classmethod
    def _auto_or_share(cls, value: Any) -> str | float:
        if value == "auto":
            return value
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not 0 <= value <= 1:
            raise ValueError(
                "give auto (one GPU per seed when the cluster has GPUs, else none) or a share "
                "of one GPU from 0 to 1, e.g. 0.5 for two seeds per GPU"
            )
        return float(value)


class PlanConfig(Section):
    """The analysis plan, declared before the seeds train (each seed records it): the seed
    counts at which the verdict is read, its family-wise alpha and how the looks spend it, the
    tested columns whose rule training showed (held in), and the negative control's seeds.csv."""

    looks: list[Annotated[StrictInt, Field(gt=1)]] | None = None  # null: one, at the seeds listed
    alpha: Finite = Field(default=0.05, gt=0, lt=0.5)
    spending: Literal["obrien-fleming"] = "obrien-fleming"
    held_in: list[str] = []
    control: str | None = None  # the same recipe and seeds with the manipulation off


class FactorialConfig(Section):
    """A factorial seed design: every pair of an init seed and a data-order seed, one seed job
    each (job k: init_seeds[k // len(data_seeds)], data_seeds[k % len(data_seeds)]). Both null:
    joint seeds, each setting init and data order (the paper's design)."""

    init_seeds: list[StrictInt] | None = None
    data_seeds: list[StrictInt] | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> FactorialConfig:
        if (self.init_seeds is None) != (self.data_seeds is None):
            raise ValueError("give both init_seeds and data_seeds (a factorial design), or neither")
        for seeds in (self.init_seeds, self.data_seeds):
            if seeds is not None and (len(seeds) < 2 or len(set(seeds)) < len(seeds)):
                raise ValueError(
                    "list at least 2 distinct init seeds and 2 distinct data-order seeds"
                )
        return self

    @property
    def shape(self) -> tuple[int, int]:
        """(init seeds, data-order seeds); (0, 0) when joint."""
        return len(self.init_seeds or []), len(self.data_seeds or [])

    @property
    def cells(self) -> list[tuple[int, int]]:
        """(init seed, data-order seed) of each seed job, in job order; empty when joint."""
        if self.init_seeds is None or self.data_seeds is None:
            return []
        return [(i, d) for i in self.init_seeds for d in self.data_seeds]


SWEPT_SECTIONS: dict[str, type[Section]] = {
    "model": ModelConfig,
    "data": DataConfig,
    "train": TrainConfig,
}


def setting_path(key: str) -> str:
    """A search-space key (a field of model, data or train) -> its dotted config path."""
    for section, model in SWEPT_SECTIONS.items():
        if key in model.model_fields:
            return f"{section}.{key}"
    raise ValueError(
        f"unknown hyperparameter {key!r}; use a setting of model, data or train, "
        "e.g. learning_rate, epochs, augment_examples"
    )


class Config(Section):
    profile: str
    seeds: list[Annotated[StrictInt, Field(ge=0)]] = Field(json_schema_extra=OUTSIDE_RECIPE)
    # default: joint (a seed's own config, and those saved before factorial designs)
    factorial: FactorialConfig = Field(FactorialConfig(), json_schema_extra=OUTSIDE_RECIPE)
    model: ModelConfig
    task: Task
    diagnostics: dict[str, Diagnostic]
    reference: Reference | None = Field(default=None, json_schema_extra=OUTSIDE_RECIPE)
    plan: PlanConfig = Field(PlanConfig(), json_schema_extra=OUTSIDE_RECIPE)
    data: DataConfig
    train: TrainConfig
    tracking: TrackingConfig = Field(json_schema_extra=OUTSIDE_RECIPE)
    sweep: SweepConfig = Field(json_schema_extra=OUTSIDE_RECIPE)
    ray: RayConfig = Field(json_schema_extra=OUTSIDE_RECIPE)
    output_dir: str = Field(json_schema_extra=OUTSIDE_RECIPE)

    @field_validator("diagnostics")
    @classmethod
    def _some_diagnostic(cls, diagnostics: dict[str, Diagnostic]) -> dict[str, Diagnostic]:
        if not diagnostics:
            raise ValueError(
                "no diagnostic set is left, and a study needs one: keep one, or declare your "
                "own in params.yaml (docs/declaring.md)"
            )
        return diagnostics

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        if not seeds:
            raise ValueError("the seed list is empty; give at least one seed, e.g. [0, 1, 2]")
        repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
        if repeated:
            raise ValueError(f"seed(s) {repeated} appear more than once; list each seed once")
        return seeds

    @model_validator(mode="after")
    def _declared_consistently(self) -> Config:
        found = declaration_problems(self.task, self.diagnostics, self.data.augment_examples)
        if found:
            raise ValueError("; ".join(found))
        return self

    @model_validator(mode="after")
    def _seeds_are_the_cells(self) -> Config:
        cells = self.factorial.cells
        if not cells:
            return self
        if self.seeds != list(range(len(cells))):
            n_init, n_data = self.factorial.shape
            raise ValueError(
                f"a {n_init} x {n_data} factorial design has {len(cells)} seed jobs: set seeds to "
                f"[0, 1, ..., {len(cells) - 1}] (job k trains the k-th pair)"
            )
        if self.train.init_seed is not None or self.train.data_seed is not None:
            raise ValueError(
                "train.init_seed or train.data_seed is set beside a factorial design; "
                "the design sets both per job: remove them"
            )
        return self

    def sources(self) -> dict[str, str]:
        """Every source the study reads (a file, a URL, hub:...), by its setting."""
        task = self.task
        found = {"task.train": task.train}
        found |= {f"task.evaluation.{n}.source": s.source for n, s in task.evaluation.items()}
        found |= {f"diagnostics.{n}.source": d.source for n, d in self.diagnostics.items()}
        if task.augmentation and self.data.augment_examples:
            found["task.augmentation.source"] = task.augmentation.source
        return found

    def local_files(self) -> dict[str, str]:
        """Every file of this machine the study reads, by its setting: its sources that are
        neither a URL nor a hub set, and the published reference's runs."""
        found = {key: source for key, source in self.sources().items() if not remote(source)}
        if self.reference is not None:
            found["reference.runs"] = self.reference.runs
        return found

    def recipe(self, per_seed: bool = True) -> dict[str, Any]:
        """Dotted settings that decide a seed's result (every hash, one-recipe check and
        logged recipe derives from this); `per_seed=False`: the study's, without the seed."""
        return _recipe_of(self, per_seed)

    def hash(self) -> str:
        """Short hash of one seed's recipe."""
        return short_hash(self.recipe())

    def plan_hash(self) -> str:
        """Short hash of the analysis plan (each seed records it when it trains)."""
        return short_hash(self.plan.model_dump())

    def study_hash(self) -> str:
        """Short hash of the study's recipe: the seed's, but for the seed itself."""
        return short_hash(self.recipe(per_seed=False))

    def with_precisions_of(self, trained: Config) -> Config:
        """This config with its "auto" precisions as `trained` (a seed's recorded config,
        made concrete on the machine that trained it) chose them."""
        chosen = {
            key: getattr(trained.train, key)
            for key in ("precision", "eval_precision")
            if getattr(self.train, key) == "auto"
        }
        return self.model_copy(update={"train": self.train.model_copy(update=chosen)})

    def with_seed(self, seed: int, output_dir: str | None = None) -> Config:
        """This recipe for seed `seed` (optionally writing to another output_dir); in a
        factorial design, seed job `seed`'s pair of init and data-order seeds."""
        seeds: dict[str, int] = {"seed": seed}
        update: dict[str, Any] = {}
        if self.factorial.cells:  # the job's pair, set on the seed; the seed's own config
            if not 0 <= seed < len(self.factorial.cells):  # is joint
                n_init, n_data = self.factorial.shape
                raise ConfigError(
                    f"seed job {seed} is not in the {n_init} x {n_data} factorial design; "
                    f"give a seed from 0 to {len(self.factorial.cells) - 1}"
                )
            seeds["init_seed"], seeds["data_seed"] = self.factorial.cells[seed]
            update["factorial"] = FactorialConfig()
        update["train"] = self.train.model_copy(update=seeds)
        if output_dir is not None:
            update["output_dir"] = output_dir
        return self.model_copy(update=update)

    def save(self, path: Path) -> None:
        """Write the resolved config as YAML."""
        path.write_text(yaml.safe_dump(self.model_dump(), sort_keys=False))

    def flat(self) -> dict[str, Any]:
        """Dotted keys to values (all but the sweep and ray sections), for logging as
        parameters."""
        return _flatten(self.model_dump(exclude={"sweep", "ray"}))


def remote(source: str) -> bool:
    """Whether a source is read from the network (an http(s) URL or hub:...), not a file."""
    return source.startswith(("hub:", "http://", "https://"))


def _recipe_of(section: BaseModel, per_seed: bool, prefix: str = "") -> dict[str, Any]:
    recipe: dict[str, Any] = {}
    for name, field in type(section).model_fields.items():
        value = getattr(section, name)
        if _left_out(field, value, per_seed):
            continue
        if isinstance(value, BaseModel):
            recipe.update(_recipe_of(value, per_seed, f"{prefix}{name}."))
        elif isinstance(value, dict):  # named declarations: diagnostics, evaluation sets
            recipe[f"{prefix}{name}"] = {k: _plain(v) for k, v in value.items()}
        else:
            recipe[f"{prefix}{name}"] = value
    return recipe


def _plain(value: Any) -> Any:
    """A declaration as a mapping, without its fields left out of the recipe."""
    if not isinstance(value, BaseModel):
        return value
    fields = type(value).model_fields.items()
    return value.model_dump(exclude={n for n, f in fields if _left_out(f, getattr(value, n))})


def _left_out(field: FieldInfo, value: Any, per_seed: bool = True) -> bool:
    """Whether a setting is left out of the recipe, by the place marked on its field: "no",
    "seed" unless `per_seed`, "if set" while unset (a recipe of before it). Unmarked: in it."""
    place = (field.json_schema_extra or {}).get("recipe")  # type: ignore[union-attr]
    if place == "if set":
        return value in (None, {})
    return place == "no" or (place == "seed" and not per_seed)


def short_hash(tree: dict[str, Any]) -> str:
    """A 12-hex-digit hash of a JSON-serialisable tree (key order does not matter)."""
    return hashlib.sha256(json.dumps(tree, sort_keys=True).encode()).hexdigest()[:12]


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_override(text: str) -> dict[str, Any]:
    """`train.learning_rate=3.0e-5` -> {"train": {"learning_rate": 3e-05}} (value parsed as YAML).

    Not OmegaConf's `from_dotlist`: it reads values unlike the PyYAML that reads params files
    (`[1e-5]`: floats, not strings) and raises its own errors (`${` in a value)."""
    key, sep, raw_value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. --set train.epochs=1")
    try:
        value: Any = yaml.safe_load(raw_value) if raw_value.strip() else None
    except yaml.YAMLError as error:
        raise ConfigError(
            f"--set {text!r}: the value is not valid YAML ({_yaml_problem(error)}); "
            "fix it, or quote it to mean text"
        ) from None
    for part in reversed(key.strip().split(".")):  # nested from the leaf up
        value = {part: value}
    return value


def read_params(path: Path) -> dict[str, Any]:
    """The mapping in a params.yaml file; empty when the file does not exist."""
    if not path.exists():
        return {}
    if not path.is_file():
        raise ConfigError(f"{path}: is a directory, not a params file; give a YAML file")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file; give a YAML params file") from None
    except yaml.YAMLError as error:
        raise ConfigError(
            f"{path}: not valid YAML ({_yaml_problem(error)}); fix its syntax"
        ) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    return loaded


def _yaml_problem(error: yaml.YAMLError) -> str:
    """One line: what is wrong and where (line and column)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or type(error).__name__
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem


def load_config(
    params_path: Path | None = Path("params.yaml"),
    overrides: list[str] | None = None,
    profile: str | None = None,
) -> Config:
    """Resolve: defaults < profile < params file < overrides; errors name every problem.

    In the params file, null means "as the profile says" (params.yaml lists the keys people
    vary with null, so that `dvc exp run -S key=value` finds them)."""
    from_file = _without_nulls(read_params(params_path)) if params_path else {}
    from_overrides: dict[str, Any] = {}
    for override in overrides or []:
        from_overrides = _deep_merge(from_overrides, parse_override(override))
    keys = {override.partition("=")[0].strip() for override in overrides or []}
    chosen = profile or from_overrides.get("profile") or from_file.get("profile") or "paper"
    if chosen not in profile_names():
        names = ", ".join(profile_names())
        raise ConfigError(f"unknown profile {chosen!r}; choose one of {names}")
    profile_layers = profile_chain(chosen)
    layers = [read_params(DEFAULTS), *profile_layers, from_file, from_overrides]
    raw = layered(layers)
    raw["sweep"]["space"] = search_space(layers, whole_in_overrides="sweep.space" in keys)
    raw["profile"] = chosen
    origins = {"--set": from_overrides, str(params_path): from_file}
    origins[f"profile {chosen}"] = layered(profile_layers)
    return validate(raw, origins=origins)


def profile_chain(name: str, below: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A profile's layers: those of the profile it `extends` (if any), then its own."""
    profile = read_params(PROFILES_DIR / f"{name}.yaml")
    base = profile.pop("extends", None)
    if base is None:
        return [profile]
    if base not in profile_names() or base in (name, *below):
        names = ", ".join(p for p in profile_names() if p not in (name, *below))
        raise ConfigError(f"profile {name} extends {base!r}; name another profile: {names}")
    return [*profile_chain(base, (*below, name)), profile]


def layered(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """The layers merged in order, mapping by mapping. A layer whose task names another task
    replaces the task and the published reference below it (the diagnostic sets stay: the
    layer may change how its labels map onto them); a diagnostic set given as null is
    dropped."""
    raw: dict[str, Any] = {}
    for layer in layers:
        task = layer.get("task")
        named = task.get("name") if isinstance(task, dict) else None
        if named is not None and named != (raw.get("task") or {}).get("name"):
            raw = {k: v for k, v in raw.items() if k not in ("task", "reference")}
        raw = _deep_merge(raw, layer)
    if isinstance(raw.get("diagnostics"), dict):
        raw["diagnostics"] = {k: v for k, v in raw["diagnostics"].items() if v is not None}
    return raw


def search_space(layers: list[dict[str, Any]], whole_in_overrides: bool) -> dict[str, Any]:
    """The sweep's search space: a `space:` in a profile or params file, or `--set
    sweep.space=...`, replaces the one below it whole; `--set sweep.space.KEY=...` replaces
    that key only. `layers`: defaults, profile, params file, overrides."""
    space: dict[str, Any] = {}
    *files, overrides = layers
    for layer in files:
        given = layer.get("sweep", {}).get("space")
        space = copy.deepcopy(given) if given is not None else space
    given = overrides.get("sweep", {}).get("space")
    if given is not None:
        space = copy.deepcopy(given) if whole_in_overrides else {**space, **given}
    return space


def profile_names() -> list[str]:
    """The profiles there are: one YAML file each in src/seedvar/profiles/."""
    return sorted(path.stem for path in PROFILES_DIR.glob("*.yaml") if path != DEFAULTS)


def _without_nulls(tree: dict[str, Any]) -> dict[str, Any]:
    """A nested mapping without its null values."""
    return {
        key: _without_nulls(value) if isinstance(value, dict) else value
        for key, value in tree.items()
        if value is not None
    }


def validate(
    raw: dict[str, Any], source: str = "config", origins: dict[str, dict[str, Any]] | None = None
) -> Config:
    """Build a Config from a nested mapping, turning validation errors into one ConfigError
    that names, per problem, where the value came from (`origins`: name -> mapping)."""
    try:
        return Config.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_describe(error, origins or {source: raw})) from None


def _describe(error: ValidationError, origins: dict[str, dict[str, Any]]) -> str:
    lines = []
    for problem in error.errors():
        if not problem["loc"]:  # a problem of the declaration as a whole: its lines say where
            lines.append(problem["msg"].removeprefix("Value error, "))
            continue
        key = ".".join(str(part) for part in problem["loc"])
        where = next((name for name, tree in origins.items() if _holds(tree, problem["loc"])), "")
        where = f" (in {where})" if where else ""
        if problem["type"] == "extra_forbidden":
            section = _section_of(problem["loc"][:-1])
            valid = list(section.model_fields) if section else []
            close = close_match(str(problem["loc"][-1]), valid)
            guess = f"did you mean {close!r}? " if close else ""
            lines.append(f"unknown key {key!r}{where} ({guess}valid keys here: {', '.join(valid)})")
        elif isinstance(problem.get("input"), dict):  # a section's own rule: its message says
            lines.append(f"{key}: {problem['msg'].removeprefix('Value error, ')}{where}")
        else:
            lines.append(f"{key}: {problem['msg']} (got {problem.get('input')!r}){where}")
    return "invalid configuration: " + "; ".join(lines)


def _holds(tree: Any, location: tuple[Any, ...]) -> bool:
    """Whether nested mappings and lists hold a value at `location`."""
    for part in location:
        in_list = isinstance(tree, list) and isinstance(part, int) and part < len(tree)
        if not (in_list or isinstance(tree, dict) and part in tree):
            return False
        tree = tree[part]
    return True


def _section_of(location: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = Config
    for part in location:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model
