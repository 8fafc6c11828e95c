"""`seedvar` command line: thin wrappers around the library functions."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from seedvar.config import Config, load_config
from seedvar.errors import SeedvarError
from seedvar.metrics import HANS_OVERALL, HEURISTIC_COLUMNS, MNLI_MATCHED, MNLI_MISMATCHED

SUMMARY_COLUMNS = (
    MNLI_MATCHED,
    MNLI_MISMATCHED,
    *HEURISTIC_COLUMNS,
    HANS_OVERALL,
    "ln_subject/object_swap",
)


def _config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--params",
        type=Path,
        default=Path("params.yaml"),
        help="params file (default: params.yaml; missing means defaults)",
    )
    parser.add_argument(
        "--profile",
        choices=("paper", "cpu", "smoke"),
        help="settings bundle: paper (default), cpu (offline MiniLM), smoke (tiny)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. train.epochs=1",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seedvar", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    prepare = commands.add_parser("prepare", help="load and tokenize a study's sets once")
    prepare.add_argument(
        "--output",
        type=Path,
        default=Path("prepared"),
        help="where the prepared sets go (default: prepared)",
    )
    _config_arguments(prepare)

    train = commands.add_parser("train", help="fine-tune and evaluate one seed")
    train.add_argument("--seed", type=int, help="the seed (sets train.seed)")
    train.add_argument("--force", action="store_true", help="retrain a finished seed")
    train.add_argument(
        "--prepared", type=Path, help="read the sets from this `seedvar prepare` folder"
    )
    _config_arguments(train)

    aggregate = commands.add_parser("aggregate", help="gather the study's seeds into results/")
    aggregate.add_argument("--results", type=Path, default=Path("results"))
    _config_arguments(aggregate)

    sweep = commands.add_parser("sweep", help="Optuna study: k seeds per configuration")
    sweep.add_argument(
        "--output",
        type=Path,
        default=Path("results/sweep"),
        help="where trials.csv, plots and report.md go (default: results/sweep)",
    )
    sweep.add_argument("--trials", type=int, help="sets sweep.n_trials")
    _config_arguments(sweep)

    submit = commands.add_parser("submit", help="put a study's seeds in a shared study database")
    submit.add_argument("--storage", required=True, help="SQLAlchemy URL, e.g. postgresql://...")
    submit.add_argument("--study", required=True, help="the study's name in that database")
    _config_arguments(submit)

    worker = commands.add_parser("worker", help="train seeds of a shared study until none is left")
    worker.add_argument("--storage", required=True, help="SQLAlchemy URL, e.g. postgresql://...")
    worker.add_argument("--study", required=True, help="the study's name in that database")
    worker.add_argument("--devices", help="GPUs to use, one worker each, e.g. 0,1,2,3")
    worker.add_argument(
        "--heartbeat",
        type=int,
        default=30,
        help="seconds between heartbeats; a seed silent for twice that is retried",
    )

    report = commands.add_parser("report", help="plots and report.html from results/")
    report.add_argument("--results", type=Path, default=Path("results"))
    report.add_argument("--output", type=Path, default=Path("report"))
    _config_arguments(report)

    evaluate = commands.add_parser("evaluate", help="evaluate saved weights on MNLI and HANS")
    evaluate.add_argument("model_dir", type=Path, help="a model folder written by seedvar train")
    evaluate.add_argument(
        "--output",
        type=Path,
        help="where predictions and metrics go (default: MODEL_DIR/../evaluation)",
    )
    evaluate.add_argument("--force", action="store_true", help="overwrite an earlier evaluation")
    _config_arguments(evaluate)
    return parser


def _config(args: argparse.Namespace, extra: list[str]) -> Config:
    return load_config(args.params, [*args.overrides, *extra], args.profile)


def _print_summary(metrics: dict[str, float]) -> None:
    for column in SUMMARY_COLUMNS:
        if column in metrics:
            print(f"  {column:<26} {metrics[column]:.4f}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `seedvar` console script."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "prepare":
            from seedvar.data.prepared import build_inputs, save_inputs

            config = _config(args, [])
            save_inputs(build_inputs(config), config, args.output)
            print(f"prepared sets written to {args.output}")
        elif args.command == "train":
            from seedvar.train import run_seed

            config = _config(args, [f"train.seed={args.seed}"] if args.seed is not None else [])
            result = run_seed(config, force=args.force, prepared=args.prepared)
            print(
                f"seed {config.train.seed} finished in {result.wall_seconds:.0f} s: "
                f"{result.seed_dir} (MLflow run {result.run_id})"
            )
            _print_summary(result.metrics)
        elif args.command == "evaluate":
            from seedvar.evaluate import evaluate_saved

            config = _config(args, [])
            output = args.output or args.model_dir.parent / "evaluation"
            metrics = evaluate_saved(config, args.model_dir, output, force=args.force)
            print(f"evaluation written to {output}")
            _print_summary(metrics)
        elif args.command == "aggregate":
            from seedvar.aggregate import aggregate

            config = _config(args, [])
            headline = aggregate(config, Path(config.output_dir), args.results)
            print(f"{len(config.seeds)} seeds aggregated into {args.results}")
            print(json.dumps(headline, indent=2))
        elif args.command == "sweep":
            from seedvar.sweep import run_sweep
            from seedvar.sweep_report import write_sweep_outputs

            config = _config(args, [f"sweep.n_trials={args.trials}"] if args.trials else [])
            study = run_sweep(config)
            written = write_sweep_outputs(study, args.output)
            print(
                f"sweep {study.study_name}: {len(study.trials)} trials in {config.sweep.storage}; "
                f"{len(written)} files in {args.output}"
            )
        elif args.command == "submit":
            from seedvar.workers import submit

            count = submit(_config(args, []), args.storage, args.study)
            print(f"study {args.study}: {count} seeds in {args.storage}")
        elif args.command == "worker":
            from seedvar.workers import work, work_on_devices

            if args.devices:
                devices = args.devices.split(",")
                return work_on_devices(args.storage, args.study, devices, args.heartbeat)
            seeds = work(args.storage, args.study, args.heartbeat)
            print(f"worker done: trained seeds {seeds}; study {args.study} is complete")
        elif args.command == "report":
            from seedvar import tracking
            from seedvar.aggregate import flat_headline
            from seedvar.report import write_report

            config = _config(args, [])
            written = write_report(config, args.results, args.output)
            run_id = tracking.log_study_results(
                config, flat_headline(args.results), [args.results, args.output]
            )
            print(
                f"report written to {args.output / 'report.html'} ({len(written)} files); "
                f"logged on MLflow study run {run_id}"
            )
    except SeedvarError as error:
        print(f"seedvar: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
