"""Seeds on Ray against seeds one after another, and what that projects for the paper's study.

1. The same 4 seeds of the `cpu` profile (reduced data), prepared once (`seedvar prepare`):
   - one after another: 4 `seedvar train` processes in a row (as DVC's seed stages run), each
     with 1 torch thread (`--two-threads` adds a row with 2);
   - on Ray: one `seedvar launch` on a local cluster of 2 nodes of 1 CPU each (ray.cluster_utils,
     both on this machine), 1 CPU per seed;
   and checks that both give the same predictions, example by example.
2. The projected wall time of the paper's 100 seeds on N GPUs: ceil(100 / (N k)) waves of one
   seed time each, with k seeds sharing a GPU, plus the launch's fixed cost measured in 1. The
   seed time comes from benchmarks/gpu.sh's results (benchmarks/results/gpu.json) when they
   exist, else from `--seed-hours`.

Usage:  pip install -e '.[ray]' && python benchmarks/ray_scaling.py [--seeds 4] [--two-threads]
        python benchmarks/ray_scaling.py --project-only   # the projection again (new gpu.json)
Writes: benchmarks/results/ray-scaling.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from seedvar.training.device import cpu_description

REPO = Path(__file__).resolve().parents[1]
REDUCED = [
    "data.max_train_examples=640",  # 20 steps at batch 32
    "data.max_val_examples=200",
    "data.max_eval_examples=500",  # per evaluation set (HANS stays balanced)
]
SETS = ("mnli_matched", "mnli_mismatched", "hans")
PAPER_SEEDS = 100
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64, 100)


def seedvar(*args: str) -> list[str]:
    return [sys.executable, "-m", "seedvar.cli", *args]


def recipe(seeds: list[int], output_dir: str) -> list[str]:
    settings = [*REDUCED, f"seeds={seeds}", f"output_dir={output_dir}"]
    return ["--profile", "cpu", *[arg for s in settings for arg in ("--set", s)]]


def run(command: list[str], cwd: Path, threads: int | None = None) -> float:
    """Seconds `command` took; it must succeed."""
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)  # torch's default thread count
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds


def one_after_another(seeds: list[int], work: Path, threads: int) -> dict[str, object]:
    output_dir = f"sequential-{threads}"
    per_seed = [
        run(
            seedvar(
                "train", "--seed", str(s), "--prepared", "prepared", *recipe(seeds, output_dir)
            ),
            work,
            threads,
        )
        for s in seeds
    ]
    return {
        "output_dir": output_dir,
        "threads": threads,
        "wall_s": sum(per_seed),
        "per_seed_s": per_seed,
    }


def on_ray(seeds: list[int], work: Path, nodes: int) -> dict[str, object]:
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    for _ in range(nodes):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    cluster_s = time.perf_counter() - started
    try:
        on_cluster = ["--set", f"ray.address='{cluster.address}'", "--set", "ray.cpus_per_seed=1"]
        command = seedvar("launch", "--prepared", "prepared", *recipe(seeds, "on-ray"), *on_cluster)
        wall = run(command, work)
    finally:
        cluster.shutdown()
    return {
        "output_dir": "on-ray",
        "nodes": nodes,
        "cpus_per_seed": 1,
        "cluster_start_s": cluster_s,
        "wall_s": wall,
    }


def seed_seconds(work: Path, output_dir: str, seeds: list[int]) -> list[float]:
    """Each seed's time in its MLflow run (start to end: loading, training, evaluation)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work}/mlruns/mlflow.db")
    seconds = []
    for seed in seeds:
        run_id = json.loads((work / output_dir / f"seed-{seed}" / "run.json").read_text())["run_id"]
        info = client.get_run(run_id).info
        seconds.append((info.end_time - info.start_time) / 1000)
    return seconds


def threads_logged(work: Path, output_dir: str, seed: int) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work}/mlruns/mlflow.db")
    run_id = json.loads((work / output_dir / f"seed-{seed}" / "run.json").read_text())["run_id"]
    return client.get_run(run_id).data.params["device"]


def same_predictions(work: Path, a: str, b: str, seeds: list[int]) -> bool:
    return all(
        pd.read_parquet(work / a / f"seed-{s}" / "predictions" / f"{n}.parquet").equals(
            pd.read_parquet(work / b / f"seed-{s}" / "predictions" / f"{n}.parquet")
        )
        for s in seeds
        for n in SETS
    )


def launch_overhead(results: dict) -> float:
    """Seconds of a Ray launch not spent in the seeds' runs: the command's start, the workers'
    start and imports (the wall time less the seeds' run time spread over the nodes)."""
    ray_run = results["ray"]
    return ray_run["wall_s"] - sum(ray_run["per_seed_run_s"]) / ray_run["nodes"]


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
    """The projection from gpu.json's measured seed time (and gains from several seeds per
    GPU) when there is one, else from `seed_hours` (default: an assumed half hour)."""
    gpu = REPO / "benchmarks" / "results" / "gpu.json"
    overhead = launch_overhead(results)
    if seed_hours is None and gpu.is_file():
        measured = json.loads(gpu.read_text())
        gains = {1: 1.0}
        for key, value in measured.items():
            if key.endswith("_seeds_at_once"):
                gains[int(key.split("_")[0])] = value["gain_vs_one"]
        hours = measured["eager"]["hours_per_seed"]
        return projection(hours, gains, f"measured: {gpu.name}", overhead)
    source = "--seed-hours" if seed_hours else "assumed 0.5 h (not measured: no GPU here)"
    return projection(seed_hours or 0.5, {1: 1.0}, source, overhead)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument(
        "--two-threads", action="store_true", help="also one after another, 2 threads"
    )
    parser.add_argument(
        "--project-only", action="store_true", help="only the projection, from the last results"
    )
    parser.add_argument(
        "--seed-hours",
        type=float,
        default=None,
        help="one paper seed on one GPU, hours (default: benchmarks/results/gpu.json)",
    )
    args = parser.parse_args()
    out = REPO / "benchmarks" / "results" / "ray-scaling.json"
    if args.project_only:
        results = json.loads(out.read_text())
        results["projection"] = project(results, args.seed_hours)
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps(results["projection"], indent=2))
        return
    seeds = list(range(args.seeds))
    results: dict[str, object] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "cpu": cpu_description(),
        "load_average_before": os.getloadavg(),
        "seeds": seeds,
        "recipe": ["--profile cpu", *REDUCED],
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "data").symlink_to(REPO / "data")
        results["prepare_s"] = run(seedvar("prepare", *recipe(seeds, "prepared")), work)
        runs = [one_after_another(seeds, work, threads=1)]
        if args.two_threads:
            runs.append(one_after_another(seeds, work, threads=2))
        ray_run = on_ray(seeds, work, args.nodes)
        for entry in [*runs, ray_run]:
            entry["per_seed_run_s"] = seed_seconds(work, entry["output_dir"], seeds)
            entry["device_logged"] = threads_logged(work, entry["output_dir"], seeds[0])
        results["one_after_another"] = runs[0]
        if args.two_threads:
            results["one_after_another_2_threads"] = runs[1]
        results["ray"] = ray_run
        results["speedup"] = runs[0]["wall_s"] / ray_run["wall_s"]
        results["identical_predictions"] = same_predictions(work, "sequential-1", "on-ray", seeds)
    results["load_average_after"] = os.getloadavg()
    results["projection"] = project(results, args.seed_hours)
    print(json.dumps(results, indent=2))
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
