"""A study declared as data: the task (its labels, text fields and sets) and any number of
diagnostic sets (their labels, how the task's predictions map onto them, their groups); the
paper's, MNLI -> HANS, in profiles/defaults.yaml. The classes say only what a declaration may
be; `declaration_problems` finds the mistakes that involve more than one field."""

from __future__ import annotations

import difflib
import string
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

Fields = dict[str, list[str]]  # canonical field -> the source columns tried for it, in order
SET_NAMES = ("train", "validation")  # the study's own sets, beside the declared ones
SEED_COLUMN = "seed"  # the seeds table's own column, beside the declared accuracy columns
# the placeholders of a group's `column` and `key` templates ({label}: with `by_label`)
PLACEHOLDERS = ("set", "group", "value", "name", "name_lower", "parent", "label")


# a per-set size limit; in a recipe only when set, so that recipes without one keep their hash
LIMIT = Field(default=None, gt=0, json_schema_extra={"recipe": "if set"})


class Section(BaseModel):
    """A section of a study's configuration: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class InDistribution(Section):
    """One in-distribution evaluation set of the task: one accuracy column."""

    source: str  # a file (Parquet, JSONL, CSV, TSV), an http(s) URL, or hub:DATASET[:CONFIG]:SPLIT
    column: str | None = None  # its seeds-table column; default "<name> accuracy"
    key: str | None = None  # its MLflow key; default "<name>/accuracy"
    headline: StrictBool = False  # compared with the diagnostic sets in the verdict
    fields: Fields | None = None  # merged over the task's
    max_examples: StrictInt | None = LIMIT  # default: data.max_eval_examples


class Augmentation(Section):
    """Extra training pairs from another set (an augmentation study), none by default."""

    source: str
    labels: list[str]  # its own label names, in the order of its integer labels
    to_task: dict[str, str]  # its label -> a task label
    fields: Fields | None = None  # default: the task's
    stratify: str | None = None  # a column to draw the pairs evenly over
    disjoint_from: str | None = None  # a diagnostic set that must not share a pair with it
    # groups never drawn (a column -> its values, e.g. {heuristic: [constituent]}): what a
    # study of how far the shown rule carries evaluates on
    held_out: dict[str, list[str]] = Field({}, json_schema_extra={"recipe": "if set"})


class Task(Section):
    """What the models are fine-tuned on: labels, text fields, sets."""

    name: str  # a layer that names another task replaces the task and diagnostics below it
    labels: list[str] = Field(min_length=2)  # in the order of the sources' integer labels
    text: list[str] = Field(min_length=1, max_length=2)  # a pair of fields, or one sentence
    fields: Fields
    drop_labels: list[str] = []  # label values that mark pairs without a label (GLUE's "-")
    train: str  # a source
    train_size: StrictInt | None = None  # its pairs, where known: a hub study's cost estimate
    validation: str  # the per-epoch validation set: an evaluation set's name
    evaluation: dict[str, InDistribution] = Field(min_length=1)
    augmentation: Augmentation | None = None


class Group(Section):
    """A grouping column of a diagnostic set: one accuracy column per value.

    Nested (`within` another group: HANS's subcase within heuristic) or multi-valued (`split`:
    several values joined by a separator, or empty where the example is in none)."""

    within: str | None = None
    split: str | None = None
    values: list[str] | None = None  # the values there may be (a check of the data)
    names: dict[str, str] = {}  # a value -> how columns name it
    by_label: dict[str, str] | None = None  # one column per value and gold label (its name)
    column: str | None = None  # column name: {set} {group} {value} {name} {parent} {label}
    key: str | None = None  # MLflow key, the same placeholders (and {name_lower})


class Overall(Section):
    column: str | None = None  # default "<set> overall"
    key: str | None = None  # default "<set>/overall"


class Diagnostic(Section):
    """A diagnostic (challenge) set: its labels, their map from the task's, its groups."""

    source: str
    labels: list[str] = Field(min_length=1)  # in the order of its integer labels
    collapse: dict[str, list[str]] = {}  # its label <- the task labels predicted as it
    fields: Fields | None = None  # merged over the task's
    max_examples: StrictInt | None = LIMIT  # default: data.max_eval_examples
    overall: Overall = Overall()
    groups: dict[str, Group] = {}
    headline: list[str] = Field(min_length=1)  # the columns the verdict tests
    highlight: list[str] = []  # columns shown beside the headline, not tested
    stratify: str | None = None  # the group to subsample evenly over (max_examples)
    # groups its examples were generated in, finest first: the evaluation noise resamples the
    # first one the set has values of as units (HANS: templates), else single examples
    clusters: list[str] = Field(default=[], json_schema_extra={"recipe": "no"})  # analysis only
    # the group the set was designed in (HANS: subcases of 1,000 each): every resample of the
    # evaluation noise keeps its sizes, since they were fixed, not drawn
    strata: str | None = Field(default=None, json_schema_extra={"recipe": "no"})


class Reference(Section):
    """A published table of per-run results to set the study beside (one row per run)."""

    runs: str
    name: str  # how the report names it, e.g. "paper (100 runs)"


def declaration_problems(
    task: Task, diagnostics: dict[str, Diagnostic], augment_examples: int
) -> list[str]:
    """Every mistake that involves more than one field, one line each (empty: none)."""
    found = []
    if len(set(task.labels)) < len(task.labels):
        found.append(f"task.labels: {task.labels} names a label twice; list each once")
    for field in (*task.text, "label"):
        if field not in task.fields:
            found.append(f"task.fields: no source columns for {field!r}; add {field}: [COLUMN]")
    if task.validation not in task.evaluation:
        found.append(
            f"task.validation: {task.validation!r} is not an evaluation set of the task; use "
            f"one of {', '.join(task.evaluation)}"
        )
    if not any(declared.headline for declared in task.evaluation.values()):
        found.append("task.evaluation: no set is a headline; mark one `headline: true`")
    found += _text_problems(task)
    found += _augmentation_problems(task, diagnostics, augment_examples)
    for name in task.evaluation:
        if name in SET_NAMES:
            found.append(
                f"task.evaluation.{name}: {name!r} is a set seedvar names itself "
                f"({', '.join(SET_NAMES)}); name the set otherwise, e.g. {name}_set"
            )
    for name, diagnostic in diagnostics.items():
        if name in (*task.evaluation, *SET_NAMES):
            taken = "an evaluation set of the task" if name in task.evaluation else "seedvar's"
            found.append(
                f"diagnostics.{name}: the name is taken ({taken}); name the set otherwise, "
                f"e.g. {name}_diagnostic"
            )
        try:
            task_to_diagnostic(task, diagnostic, name)
        except ValueError as error:
            found.append(str(error))
        found += _group_problems(name, diagnostic, reserved_names(task))
    return found


def task_to_diagnostic(task: Task, diagnostic: Diagnostic, name: str) -> list[int]:
    """For each task label (by index), the diagnostic label it is scored as (by index): the
    diagnostic's `collapse`, else the label of the same name. ValueError names a mistake."""
    where = f"diagnostics.{name}.collapse"
    taken: dict[str, str] = {}
    for label, task_labels in diagnostic.collapse.items():
        if label not in diagnostic.labels:
            raise ValueError(
                f"{where}: {label!r} is not a label of {name} ({', '.join(diagnostic.labels)})"
                + did_you_mean(label, diagnostic.labels)
            )
        for task_label in task_labels:
            if task_label not in task.labels:
                hint = did_you_mean(task_label, task.labels)
                raise ValueError(
                    f"{where}.{label}: {task_label!r} is not a label of the task "
                    f"{task.name} ({', '.join(task.labels)}){hint}"
                )
            if task_label in taken:
                raise ValueError(f"{where}: {task_label!r} is collapsed into two labels")
            taken[task_label] = label
    mapped = []
    spare = [own for own in diagnostic.labels if own not in (*task.labels, *diagnostic.collapse)]
    for task_label in task.labels:
        label = taken.get(task_label, task_label)
        misspelled = close_match(task_label, spare)
        if label not in diagnostic.labels and misspelled:
            raise ValueError(
                f"diagnostics.{name}.labels: {misspelled!r} is not a label of the task "
                f"{task.name} ({', '.join(task.labels)}); did you mean {task_label!r}?"
            )
        if label not in diagnostic.labels:
            raise ValueError(
                f"{where}: the task's label {task_label!r} has no label of {name} "
                f"({', '.join(diagnostic.labels)}); collapse it into one, or drop the set "
                f"(diagnostics.{name}: null)"
            )
        mapped.append(diagnostic.labels.index(label))
    unreached = [label for i, label in enumerate(diagnostic.labels) if i not in mapped]
    if unreached:
        raise ValueError(
            f"{where}: no label of the task {task.name} maps to {', '.join(unreached)}, so its "
            f"examples could never be scored right; collapse task labels into it"
        )
    return mapped


def _augmentation_problems(
    task: Task, diagnostics: dict[str, Diagnostic], augment_examples: int
) -> list[str]:
    augmentation = task.augmentation
    if augmentation is None:
        lacking = "data.augment_examples: the task declares no task.augmentation to draw them from"
        return [lacking] if augment_examples else []
    found = []
    for label, task_label in augmentation.to_task.items():
        if label not in augmentation.labels:
            hint = did_you_mean(label, augmentation.labels)
        elif task_label not in task.labels:
            hint = did_you_mean(task_label, task.labels)
        else:
            continue
        found.append(
            f"task.augmentation.to_task: {label}: {task_label} maps a label of "
            f"{augmentation.labels} onto one of {task.labels}; fix the names{hint}"
        )
    missing = [label for label in augmentation.labels if label not in augmentation.to_task]
    if missing:
        found.append(f"task.augmentation.to_task: no task label for {', '.join(missing)}")
    disjoint_from = augmentation.disjoint_from  # a disabled augmentation draws no pair
    if augment_examples and disjoint_from and disjoint_from not in diagnostics:
        found.append(
            f"task.augmentation.disjoint_from: {augmentation.disjoint_from!r} is not a "
            "diagnostic set of the study"
        )
    return found


def close_match(name: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name closest to a misspelled `name`, None where none is `cutoff` close."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """The hint "; did you mean 'NAME'?" for the known name closest to `name` ("": none)."""
    close = close_match(name, known, cutoff)
    return f"; did you mean {close!r}?" if close else ""


def own_columns(task: Task) -> set[str]:
    """The columns seedvar itself writes beside a set's text into its examples and
    per-example predictions: id, label, gold, predicted, one logit per task label."""
    return {"id", "label", "gold", "predicted", *(f"logit_{label}" for label in task.labels)}


def reserved_names(task: Task) -> set[str]:
    """The column names of a set's examples and per-example predictions that are not a
    group's (seedvar's own and the task's text fields): a group of a declared set must not
    take one, or it would overwrite that column."""
    return own_columns(task) | set(task.text)


def _text_problems(task: Task) -> list[str]:
    """A text field named twice, or like a column seedvar writes itself."""
    found = []
    if len(set(task.text)) < len(task.text):
        found.append(f"task.text: {task.text} names a field twice; list each once")
    own = own_columns(task)
    for field in task.text:
        if field in own:
            found.append(
                f"task.text: {field!r} is a column seedvar writes itself "
                f"({', '.join(sorted(own))}); name the field otherwise, e.g. {field}_text, and "
                f"map it in task.fields"
            )
    return found


def _group_problems(name: str, diagnostic: Diagnostic, reserved: set[str]) -> list[str]:
    found = []
    for group, declared in diagnostic.groups.items():
        where = f"diagnostics.{name}.groups.{group}"
        if group in reserved:
            taken = ", ".join(sorted(reserved))
            found.append(
                f"{where}: {group!r} is a column seedvar writes itself ({taken}); name the "
                f"group otherwise, e.g. by_{group}"
            )
        if declared.within is not None and declared.within not in diagnostic.groups:
            found.append(f"{where}.within: {declared.within!r} is not a group of {name}")
        if declared.within is not None and declared.split is not None:
            found.append(f"{where}: a group is nested (within) or multi-valued (split), not both")
        unknown = sorted(set(declared.by_label or {}) - set(diagnostic.labels))
        if unknown:
            found.append(
                f"{where}.by_label: {', '.join(unknown)} not a label of {name} "
                f"({', '.join(diagnostic.labels)}){did_you_mean(unknown[0], diagnostic.labels)}"
            )
        found += _template_problems(where, declared)
    if diagnostic.stratify is not None and diagnostic.stratify not in diagnostic.groups:
        found.append(f"diagnostics.{name}.stratify: {diagnostic.stratify!r} is not a group")
    for cluster in diagnostic.clusters:
        if cluster not in diagnostic.groups:
            found.append(f"diagnostics.{name}.clusters: {cluster!r} is not a group of {name}")
    if diagnostic.strata is not None and diagnostic.strata not in diagnostic.groups:
        found.append(f"diagnostics.{name}.strata: {diagnostic.strata!r} is not a group of {name}")
    return found


def _template_problems(where: str, group: Group) -> list[str]:
    """A placeholder of the group's column or key template that a column does not fill."""
    known = PLACEHOLDERS if group.by_label else PLACEHOLDERS[:-1]
    found = []
    for setting in ("column", "key"):
        template = getattr(group, setting) or ""
        try:
            used = [field for _, field, _, _ in string.Formatter().parse(template) if field]
        except ValueError as error:
            found.append(f"{where}.{setting}: {template!r} is not a template ({error})")
            continue
        for field in (field for field in used if field not in known):
            hint = "; {label} needs by_label" if field == "label" else did_you_mean(field, known)
            found.append(
                f"{where}.{setting}: {{{field}}} is not a placeholder of a group's columns "
                f"({', '.join(known)}){hint}"
            )
    return found


def in_distribution_name(name: str, declared: InDistribution) -> str:
    """The seeds-table column of an in-distribution set."""
    return declared.column or f"{name} accuracy"


def primary_set(task: Task) -> str:
    """The in-distribution set the verdict and the plots set the diagnostics against: the
    first headline set."""
    return next(name for name, declared in task.evaluation.items() if declared.headline)


def primary_column(task: Task) -> str:
    name = primary_set(task)
    return in_distribution_name(name, task.evaluation[name])


def design_columns(
    task: Task, diagnostics: dict[str, Diagnostic]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the verdict compares: the in-distribution headline columns (its references) and
    every diagnostic set's headline columns (the tested ones)."""
    reference = tuple(in_distribution_name(n, d) for n, d in task.evaluation.items() if d.headline)
    return reference, tuple(c for d in diagnostics.values() for c in d.headline)


def headline_mean_column(set_name: str) -> str:
    """The mean of a diagnostic set's headline columns (a sweep's spread objective)."""
    return f"{set_name} headline mean"


def shown_columns(task: Task, diagnostics: dict[str, Diagnostic]) -> list[str]:
    """The columns a study's headline shows: the in-distribution headline sets', then each
    diagnostic set's headline and highlighted columns."""
    shown = [in_distribution_name(n, d) for n, d in task.evaluation.items() if d.headline]
    for diagnostic in diagnostics.values():
        shown += [*diagnostic.headline, *diagnostic.highlight]
    return shown
