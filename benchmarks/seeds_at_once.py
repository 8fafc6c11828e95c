"""The main job, `dvc repro`, training seeds at once against one after another, and what that
projects for the paper's study.

1. The same 4 seeds of the `cpu` profile (reduced data), each way through `dvc repro` in a
   fresh clone of this repository (its committed code and pipeline):
   - at once: the default, as many seeds as the machine holds (here 2, 1 CPU and 1 torch
     thread each, on a local Ray started by the train stage);
   - one after another, `ray.cpus_per_seed=2`: one seed holds the machine, 2 torch threads
     (the strongest way to train seeds one at a time here);
   - one after another with 1 torch thread (OMP_NUM_THREADS=1, once): the same arithmetic as a
     seed at once, so its predictions must be identical, example by example (a float sum
     depends on the thread count, so 2 threads may differ in the last bits).
   The two timed ways alternate for `--rounds` rounds (at once, one after another, ...), each
   reports its median; the time is the train stage's (from its start to
   the aggregate stage's), and the whole `dvc repro` beside it.
2. The projected wall time of the paper's 100 seeds on N GPUs: ceil(100 / (N k)) waves of one
   seed time each, with k seeds sharing a GPU, plus the launch's fixed cost. The seed time comes
   from the GPU check's results (benchmarks/results/gpu-<GPU>.json) when they exist, else from
   `--seed-hours`.

Usage:  python benchmarks/seeds_at_once.py [--rounds 2]
        python benchmarks/seeds_at_once.py --project-only   # the projection again (new GPU results)
        python benchmarks/seeds_at_once.py --smoke DIR      # 2 smoke seeds, once, `dvc repro train`
Writes: benchmarks/results/seeds-at-once.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import smoke
import yaml

from seedvar.training.device import cpu_description

REPO = Path(__file__).resolve().parents[1]
REDUCED = {
    "max_train_examples": 640,  # 20 steps at batch 32
    "max_val_examples": 200,
    "max_eval_examples": 500,  # per evaluation set (HANS stays balanced)
}
PAPER_SEEDS = 100
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 100)
AT_ONCE, ALONE, ALONE_ONE_THREAD = "at once", "one after another", "one after another, 1 thread"


def clone(
    work: Path, name: str, seeds: int, cpus_per_seed: int, profile: str, data: dict[str, int]
) -> Path:
    """A fresh clone of this repository, its study `profile` with the `data` limits, with
    `cpus_per_seed`."""
    project = work / name.replace(" ", "-").replace(",", "")
    subprocess.run(["git", "clone", "-q", str(REPO), str(project)], check=True)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params.update(profile=profile, seeds=list(range(seeds)))
    params["data"].update(data)
    params["ray"]["cpus_per_seed"] = cpus_per_seed
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return project


def repro(project: Path, target: str, threads: int | None = None) -> dict[str, float]:
    """`dvc repro target` in `project` (prepared first, not timed; target "" for the whole
    pipeline): the train stage's seconds (to the next stage's start or the command's end) and
    the whole command's."""
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    subprocess.run(
        ["dvc", "repro", "prepare"], cwd=project, env=env, check=True, capture_output=True
    )
    started = time.perf_counter()
    stage_starts: dict[str, float] = {}
    process = subprocess.Popen(
        ["dvc", "repro", *filter(None, [target])],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    for line in process.stdout or []:
        lines.append(line)
        if line.startswith("Running stage"):
            stage_starts[line.split("'")[1]] = time.perf_counter()
    if process.wait() != 0:
        raise SystemExit(f"dvc repro failed in {project}:\n{''.join(lines[-40:])}")
    ended = time.perf_counter()
    seeds = stage_starts.get("aggregate", ended) - stage_starts["train"]
    return {"seed_stages_s": seeds, "repro_s": ended - started}


def compare_predictions(a: Path, b: Path, seeds: int) -> dict[str, object]:
    """Whether every seed predicted the same on every set, example by example; else the share
    of identical labels and the largest logit difference."""
    same, labels, pairs, largest = True, 0, 0, 0.0
    for seed in range(seeds):
        folder = a / "runs" / f"seed-{seed}" / "predictions"
        for path in sorted(folder.iterdir()):
            ours = pd.read_parquet(path)
            theirs = pd.read_parquet(b / "runs" / f"seed-{seed}" / "predictions" / path.name)
            same = same and ours.equals(theirs)
            labels += int((ours["predicted"] == theirs["predicted"]).sum())
            pairs += len(ours)
            logits = [column for column in ours if column.startswith("logit_")]
            largest = max(largest, float((ours[logits] - theirs[logits]).abs().max().max()))
    share = labels / pairs
    return {"identical": same, "same_label_share": share, "largest_logit_difference": largest}


def measure(
    seeds: int, rounds: int, profile: str, data: dict[str, int], target: str
) -> dict[str, object]:
    """The two timed ways, alternating, then one after another at 1 thread once (each a study
    of `profile` with the `data` limits, `dvc repro target`)."""
    timings: dict[str, list[dict[str, float]]] = {AT_ONCE: [], ALONE: []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for round_ in range(rounds):
            for way, cpus in ((AT_ONCE, 1), (ALONE, 2)):
                project = clone(work, f"{way} {round_}", seeds, cpus, profile, data)
                timings[way].append(repro(project, target))
                print(way, timings[way][-1], flush=True)
                if round_ < rounds - 1:
                    shutil.rmtree(project)
        one_thread = clone(work, ALONE_ONE_THREAD, seeds, 2, profile, data)
        single = repro(one_thread, target, threads=1)
        last = rounds - 1
        at_once, alone = work / f"at-once-{last}", work / f"one-after-another-{last}"
        predictions = {
            "at once vs one after another, 1 thread": compare_predictions(
                at_once, one_thread, seeds
            ),
            "at once vs one after another, 2 threads": compare_predictions(at_once, alone, seeds),
        }
    median = {
        way: statistics.median(run["seed_stages_s"] for run in runs)
        for way, runs in timings.items()
    }
    return {
        "runs": {**timings, ALONE_ONE_THREAD: [single]},
        "median_seed_stages_s": median,
        "speedup": median[ALONE] / median[AT_ONCE],
        "speedup_vs_one_thread": single["seed_stages_s"] / median[AT_ONCE],
        "predictions": predictions,
    }


def launch_overhead(results: dict) -> float:
    """Seconds the at-once seed stages took beyond their seeds' share of the machine: the
    seed stages at once less one thread's seed stages spread over 2 slots (Ray's start, the
    workers' start and imports, the later stages' reuse of their seeds)."""
    at_once = results["median_seed_stages_s"][AT_ONCE]
    single = results["runs"][ALONE_ONE_THREAD][0]["seed_stages_s"]
    return max(0.0, at_once - single / 2)


def projection(
    seed_hours: float, gains: dict[int, float], source: str, overhead_s: float
) -> dict[str, object]:
    """Wall time of the paper's 100 seeds on N GPUs with k seeds per GPU: ceil(100 / (N k))
    waves, each as long as k seeds trained at once on one GPU (k seed times / the gain), plus
    the launch's fixed cost."""
    table = []
    for k, gain in sorted(gains.items()):
        wave_hours = seed_hours * k / gain
        for gpus in GPU_COUNTS:
            waves = math.ceil(PAPER_SEEDS / (gpus * k))
            hours = waves * wave_hours + overhead_s / 3600
            table.append({"gpus": gpus, "seeds_per_gpu": k, "waves": waves, "hours": hours})
    return {
        "seed_hours": seed_hours,
        "seed_hours_source": source,
        "gains": gains,
        "launch_overhead_s": overhead_s,
        "table": table,
    }


def project(results: dict, seed_hours: float | None) -> dict[str, object]:
    """The projection from the GPU check's measured seeds per GPU-hour (benchmarks/gpu.py, its
    JSON in benchmarks/results/gpu-<GPU>.json) when there is one, with the gains of several
    seeds per GPU, else from `seed_hours` (default: an assumed half hour)."""
    found = sorted((REPO / "benchmarks" / "results").glob("gpu-*.json"))
    overhead = launch_overhead(results)
    if seed_hours is None and found:
        sharing = json.loads(found[0].read_text())["sharing"]
        one = sharing["1"]["examples_per_s_total"]
        gains = {int(k): value["examples_per_s_total"] / one for k, value in sharing.items()}
        hours = 1 / sharing["1"]["seeds_per_gpu_hour"]
        return projection(hours, gains, f"measured: {found[0].name}", overhead)
    source = "--seed-hours" if seed_hours else "assumed 0.5 h (not measured: no GPU here)"
    return projection(seed_hours or 0.5, {1: 1.0}, source, overhead)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--project-only", action="store_true", help="only the projection, from the last results"
    )
    parser.add_argument(
        "--seed-hours",
        type=float,
        default=None,
        help="one paper seed on one GPU, hours (default: benchmarks/results/gpu.json)",
    )
    smoke.add_option(parser)
    args = parser.parse_args()
    out = REPO / "benchmarks" / "results" / "seeds-at-once.json"
    seeds, rounds, profile, data, target = args.seeds, args.rounds, "cpu", REDUCED, ""
    if args.smoke:  # the stages up to train only: the seeds' part of the pipeline
        out, seeds, rounds, profile, data = args.smoke / out.name, 2, 1, "smoke", smoke.DATA
        target = "train"
    if args.project_only:
        if not out.is_file():
            raise SystemExit(f"no {out.name} yet: run python benchmarks/seeds_at_once.py first")
        measured = json.loads(out.read_text())
        measured["projection"] = project(measured, args.seed_hours)
        out.write_text(json.dumps(measured, indent=2) + "\n")
        print(json.dumps(measured["projection"], indent=2))
        return
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    )
    results: dict[str, object] = {
        "machine": f"{len(os.sched_getaffinity(0))} CPUs",
        "cpu": cpu_description(),
        "commit": commit.stdout.strip(),
        "load_average_before": os.getloadavg(),
        "seeds": seeds,
        "recipe": {"profile": profile, **data},
        "dvc_repro_target": target or "(the whole pipeline)",
    }
    results.update(measure(seeds, rounds, profile, data, target))
    results["load_average_after"] = os.getloadavg()
    results["projection"] = project(results, args.seed_hours)
    print(json.dumps(results, indent=2))
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
