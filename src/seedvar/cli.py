"""seedvar: seed-variance studies of fine-tuned models (do seeds that score alike generalize
alike?). Each command works on the study of params.yaml; `seedvar config` shows it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from seedvar import __version__
from seedvar.config import Config, load_config, profile_names
from seedvar.data.sets import check_headers
from seedvar.declared import shown_columns
from seedvar.errors import ConfigError, SeedvarError
from seedvar.interrupts import catch_interrupts, stop_with_starters
from seedvar.preflight import preflight, require_tracked

DEFAULT_PARAMS = Path("params.yaml")
Command = Callable[[argparse.Namespace], int]


def _path_option(
    parser: argparse.ArgumentParser, flag: str, what: str, default: str | None = None
) -> None:
    """A path option; without `default`, None unless given."""
    shown = f"{what} (default: {default})" if default else what
    parser.add_argument(flag, type=Path, default=Path(default) if default else None, help=shown)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seedvar", description=__doc__)
    parser.add_argument("--version", action="version", version=f"seedvar {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, run: Command, summary: str) -> argparse.ArgumentParser:
        """A subcommand run by `run`, with the options that choose its configuration."""
        sub = commands.add_parser(name, help=summary, description=summary)
        sub.set_defaults(run=run)
        _path_option(sub, "--params", "params file (without one: defaults)", str(DEFAULT_PARAMS))
        sub.add_argument(
            "--profile",
            help=f"settings bundle ({', '.join(profile_names())}); overrides `profile` in the "
            "params file (which defaults to paper)",
        )
        sub.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a setting, e.g. train.epochs=1 (repeat for several)",
        )
        return sub

    show = command(
        "config", _show_config, "print the resolved configuration a command would run with (YAML)"
    )
    show.add_argument(
        "--no-params",
        action="store_true",
        help="ignore the params file: defaults < profile < --set",
    )
    show.add_argument(
        "--get", metavar="KEY", help="print only this setting, as JSON (e.g. seeds, train.epochs)"
    )

    prepare = command("prepare", _prepare, "load and tokenize a study's sets once")
    _path_option(prepare, "--output", "where the prepared sets go", "prepared")

    train = command("train", _train, "fine-tune and evaluate one seed")
    train.add_argument("--seed", type=int, help="the seed (sets train.seed)")
    finished = train.add_mutually_exclusive_group()
    finished.add_argument("--force", action="store_true", help="retrain a finished seed")
    finished.add_argument(
        "--reuse",
        action="store_true",
        help="keep a seed already finished with this recipe; retrain one of another recipe",
    )
    _path_option(train, "--prepared", "read the sets from this `seedvar prepare` folder")

    evaluate = command(
        "evaluate", _evaluate, "evaluate saved weights on the study's evaluation sets"
    )
    evaluate.add_argument("model_dir", type=Path, help="a model folder written by seedvar train")
    where = "where predictions and metrics go (default: MODEL_DIR/../evaluation)"
    _path_option(evaluate, "--output", where)
    evaluate.add_argument("--force", action="store_true", help="overwrite an earlier evaluation")

    aggregate = command(
        "aggregate", _aggregate, "gather the study's seeds into tables and statistics"
    )
    _path_option(aggregate, "--results", "where the aggregated results go", "results")

    decide = command(
        "verdict",
        _verdict,
        "the verdict on a per-run table of accuracies alone (a published one, or a study "
        "whose predictions are gone): binomial noise, bias-free columns from per-label columns",
    )
    decide.add_argument("table", type=Path, help="a CSV, one row per run, the study's columns")
    _path_option(decide, "--json", "also write the verdict to this JSON file")

    report = command("report", _report, "plots and report.html from the aggregated results")
    _path_option(report, "--results", "the folder of aggregated results", "results")
    _path_option(report, "--output", "where the plots and the report go", "report")

    sweep = command("sweep", _sweep, "Optuna study: k seeds per configuration")
    _path_option(sweep, "--output", "where trials.csv, plots and report.md go", "results/sweep")
    sweep.add_argument("--trials", type=int, help="sets sweep.n_trials")
    sweep.add_argument(
        "--ray",
        action="store_true",
        help="run trials at once, each trial's seeds as Ray tasks (settings: ray.*)",
    )

    launch = command(
        "launch",
        _launch,
        "train every unfinished seed of the study, as many at once as the machine (or the Ray "
        "cluster at ray.address) holds, and publish them all into output_dir: what `dvc repro` "
        "runs",
    )
    _path_option(launch, "--prepared", "read the sets from this `seedvar prepare` folder")
    _path_option(
        launch, "--report", "also write what the launch did, seed by seed, to this JSON file"
    )

    side = commands.add_parser(
        "compare",
        help="configurations of one study side by side: does the seeds' spread differ?",
        description="each configuration's verdict and seed std with its interval, and per "
        "held-out column a Brown-Forsythe test of equal spread across configurations",
    )
    side.set_defaults(run=_compare)
    side.add_argument(
        "studies", nargs="+", metavar="NAME=RESULTS", help="a name and its aggregated results"
    )
    _path_option(side, "--output", "where compare.md, .json, .csv and spread.png go", "compare")
    side.add_argument(
        "--column",
        dest="columns",
        action="append",
        help="a seeds-table column to compare (repeat; default: the verdict's held-out ones)",
    )

    carry = command(
        "adopt",
        _adopt,
        "keep finished seeds made on another machine (folders as runs/seed-N, weights optional) "
        "as this study's, so that `seedvar launch` and `dvc repro` publish them, not train them",
    )
    carry.add_argument("folders", type=Path, nargs="+", help="finished seeds' folders")
    _path_option(carry, "--prepared", "check their sets against this `seedvar prepare` folder")
    carry.add_argument(
        "--sweep",
        action="store_true",
        help="keep them as the seeds of the sweep's trial of this configuration, which "
        "`seedvar sweep` then reuses",
    )
    return parser


def _config(args: argparse.Namespace, *extra: str) -> Config:
    """The command's config; a --params file that does not exist is an error (only the
    default params.yaml may be absent: then the defaults apply)."""
    if args.params != DEFAULT_PARAMS and not args.params.exists():
        raise ConfigError(f"--params {args.params}: no such file; give an existing params file")
    return load_config(args.params, [*args.overrides, *extra], args.profile)


def _print_summary(config: Config, metrics: dict[str, float]) -> None:
    for column in shown_columns(config.task, config.diagnostics):
        if column in metrics:
            print(f"  {column:<26} {metrics[column]:.4f}")


def _show_config(args: argparse.Namespace) -> int:
    config = load_config(None, args.overrides, args.profile) if args.no_params else _config(args)
    if args.get is not None:  # one setting, for scripts (the Makefile's seeds)
        value: Any = config.model_dump(mode="json")
        for part in args.get.split("."):
            if not isinstance(value, dict) or part not in value:
                raise ConfigError(
                    f"--get {args.get}: no such setting; `seedvar config` lists them all"
                )
            value = value[part]
        print(json.dumps(value, separators=(",", ":")))
        return 0
    check_headers(config)  # a declared column the local files lack: here, not after a load
    print(yaml.safe_dump(config.model_dump(), sort_keys=False), end="")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    config = _config(args)
    require_tracked(config)
    preflight(config)
    from seedvar.data.prepared import build_inputs, save_inputs

    save_inputs(build_inputs(config), config, args.output)
    print(f"prepared sets written to {args.output}")
    return 0


def _train(args: argparse.Namespace) -> int:
    study = _config(args)
    seed = study.train.seed if args.seed is None else args.seed
    config = study.with_seed(seed)  # in a factorial design, the job's pair of seeds
    preflight(config, data=args.prepared is None)
    from seedvar.scale.launch import launch
    from seedvar.seeds.finished import FinishedSeed
    from seedvar.seeds.job import IfFinished

    stop_with_starters()
    if_finished: IfFinished = "replace" if args.force else "reuse" if args.reuse else "refuse"
    command = f"seedvar train --seed {seed}"
    try:
        report = launch(study, args.prepared, _echo, command, [seed], "here", if_finished)
    except KeyboardInterrupt:
        return _interrupted()
    for result in report.failed.values():
        raise SeedvarError(result.error or "the seed failed")
    finished = FinishedSeed(Path(config.output_dir), seed)
    if report.already:
        print(f"seed {seed} finished before: {finished.folder}")
    else:
        print(
            f"seed {seed} finished in {report.seconds:.0f} s: {finished.folder} "
            f"(MLflow run {finished.run_id()})"
        )
    _print_summary(config, finished.metrics() or {})
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    output = args.output or args.model_dir.parent / "evaluation"
    config = _config(args)
    preflight(config, model=False)  # the weights come from MODEL_DIR
    from seedvar.seeds.evaluate import evaluate_saved

    metrics = evaluate_saved(config, args.model_dir, output, force=args.force)
    print(f"evaluation written to {output}")
    _print_summary(config, metrics)
    return 0


def _aggregate(args: argparse.Namespace) -> int:
    config = _config(args)
    require_tracked(config)  # its reference
    from seedvar.results.record import write_results

    write_results(config, Path(config.output_dir), args.results)
    seeds = f"{len(config.seeds)} seed" + ("s" if len(config.seeds) > 1 else "")
    print(f"{seeds} aggregated into {args.results}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    named = dict(study.partition("=")[::2] for study in args.studies)
    if bad := next((s for s in args.studies if not all(s.partition("=")[::2])), None):
        raise ConfigError(f"{bad!r}: give each configuration as NAME=RESULTS_FOLDER")
    from seedvar.report.configurations import write_comparison

    answer = write_comparison({n: Path(p) for n, p in named.items()}, args.output, args.columns)
    print(answer)
    print(f"written to {args.output}: compare.md, compare.json, compare.csv, spread.png")
    return 0


def _verdict(args: argparse.Namespace) -> int:
    config = _config(args)
    check_headers(config)
    from seedvar.data.io import read_table
    from seedvar.data.sets import load_evaluation_sets
    from seedvar.report.wording import reason_text
    from seedvar.results.aggregate import write_json
    from seedvar.results.evidence import from_rates
    from seedvar.results.record import verdict_record
    from seedvar.stats.verdict import verdict

    if not args.table.is_file():
        raise ConfigError(f"{args.table}: no such file; give a CSV table, one row per run")
    table = read_table(args.table)
    evidence = from_rates(config, table, load_evaluation_sets(config)[0])
    decision = verdict(
        evidence.table,
        evidence.noise,
        evidence.design,
        None,
        config.plan.alpha,
        evidence.heuristics,
    )
    if args.json:
        write_json(args.json, verdict_record(decision, evidence))
    print(f"{len(table)} runs of {args.table}: {reason_text(decision.reason)}")
    return 0


def _report(args: argparse.Namespace) -> int:
    config = _config(args)
    from seedvar.report.study import report_study
    from seedvar.tracking import runs_table_url, ui_command

    written, run_id = report_study(config, args.results, args.output)
    print(
        f"report written to {args.output / 'report.html'} ({len(written)} files); "
        f"logged on MLflow study run {run_id}"
    )
    print(f"MLflow runs table: {runs_table_url(config)}")
    if command := ui_command(config):
        print(f"  (start the UI first: {command})")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    config = _config(args, *([f"sweep.n_trials={args.trials}"] if args.trials else []))
    preflight(config)
    from seedvar.report.sweep import write_sweep_outputs
    from seedvar.sweep.trial import run_sweep

    try:
        study = run_sweep(config, ray=args.ray, echo=_echo)
    except KeyboardInterrupt:  # the trial is failed (Optuna retries it), its runs KILLED
        print("seedvar: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    written = write_sweep_outputs(config, study, args.output)
    print(
        f"sweep {study.study_name}: {len(study.trials)} trials in {config.sweep.storage}; "
        f"{len(written)} files in {args.output}"
    )
    return 0


def _adopt(args: argparse.Namespace) -> int:
    config = _config(args)
    from seedvar.project import keep_of, prepared_data
    from seedvar.scale.launch import lease, task_config
    from seedvar.seeds.adopt import adopt_folder

    if args.sweep:
        from seedvar.sweep.search import trial_config

        config = trial_config(task_config(config), {})
    data = prepared_data(args.prepared)
    with lease(keep_of(Path(config.output_dir)), config.study_hash(), "seedvar adopt"):
        for folder in args.folders:
            seed, kept = adopt_folder(config, folder, data)
            print(f"seed {seed} kept from {folder} in {kept}")
    user = "`seedvar sweep` reuses" if args.sweep else "`seedvar launch` (`dvc repro`) publishes"
    print(f"{len(args.folders)} seeds kept: {user} them without training them")
    return 0


_echo = partial(print, flush=True)


def _launch(args: argparse.Namespace) -> int:
    config = _config(args)
    preflight(config, data=args.prepared is None)
    from seedvar.scale.launch import launch

    stop_with_starters()
    try:
        report = launch(config, prepared=args.prepared, echo=_echo, command=user_command())
    except KeyboardInterrupt:
        return _interrupted()
    if args.report:
        args.report.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    if len(report.already) == len(config.seeds):
        print(f"all {len(config.seeds)} seeds are finished in {config.output_dir}: nothing to do")
    done = len(report.finished) + len(report.already)
    summary = f"{done} of {len(config.seeds)} seeds finished in {config.output_dir}"
    if report.seconds:
        summary += f" ({len(report.finished)} in this launch, {report.seconds:.0f} s"
        retried = sorted(report.retried)
        summary += f"; retried: {', '.join(map(str, retried))})" if retried else ")"
    print(summary)
    if report.ok:
        return 0
    print(f"{len(report.failed)} seeds failed:", file=sys.stderr)
    for line in report.failure_lines():
        print(f"  {line}", file=sys.stderr)
    print(
        f"seedvar: error: {len(report.failed) + len(report.not_run)} of {len(config.seeds)} "
        f"seeds did not finish (listed above); fix the cause and run `{user_command()}` again: "
        "finished seeds are kept, the others resume",
        file=sys.stderr,
    )
    return 2


def _interrupted() -> int:
    print(
        f"seedvar: interrupted; run `{user_command()}` again: finished seeds are kept, "
        "the others resume",
        file=sys.stderr,
    )
    return 130


def user_command() -> str:
    """The command the user ran, as far as the environment tells: `make study PROFILE=...`
    under make, `dvc exp run` or `dvc repro` under DVC, else `seedvar launch`."""
    if os.environ.get("MAKELEVEL"):
        assigned = [word for word in os.environ.get("MAKEFLAGS", "").split() if "=" in word]
        return " ".join(["make study", *assigned])
    if os.environ.get("DVC_STAGE"):
        return "dvc exp run" if os.environ.get("DVC_EXP_NAME") else "dvc repro"
    return " ".join(["seedvar", *sys.argv[1:]]) if sys.argv[1:2] == ["launch"] else "seedvar launch"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `seedvar` console script: a user's mistake is one line, exit 2."""
    args = build_parser().parse_args(argv)
    catch_interrupts()
    try:
        return args.run(args)
    except SeedvarError as error:
        print(f"seedvar: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
