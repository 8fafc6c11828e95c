"""Distributed seeds on a real PostgreSQL server: workers, a killed worker, exactly-once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
SEEDS = [0, 1, 2, 3, 4, 5]
RECIPE = [
    "--profile",
    "smoke",
    "--set",
    f"seeds={SEEDS}",
    "--set",
    "data.max_train_examples=800",
    "--set",
    "train.epochs=2",
    "--set",
    "data.max_eval_examples=300",
]


def seedvar(*args: str) -> list[str]:
    return [sys.executable, "-m", "seedvar.cli", *args]


def test_three_workers_one_killed_every_seed_finishes_once(postgres_url: str, study_dir: Path):
    done = subprocess.run(
        seedvar("submit", "--storage", postgres_url, "--study", "w", *RECIPE),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    started = time.monotonic()
    workers = [
        subprocess.Popen(
            seedvar("worker", "--storage", postgres_url, "--study", "w", "--heartbeat", "2"),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(3)
    ]
    study = optuna.load_study(study_name="w", storage=postgres_url)
    victim = workers[0]
    while True:  # kill the first worker while it trains a seed
        assert time.monotonic() - started < 300 and victim.poll() is None
        running = [
            t
            for t in study.get_trials(deepcopy=False)
            if t.state.name == "RUNNING"
            and t.user_attrs.get("worker", "").endswith(f":{victim.pid}")
        ]
        if running and Path(f"runs/seed-{running[0].params['seed']}.partial").exists():
            killed_seed = running[0].params["seed"]
            break
        time.sleep(0.2)
    os.killpg(victim.pid, signal.SIGKILL)
    for worker in workers[1:]:
        assert worker.wait(timeout=300) == 0
    wall = time.monotonic() - started

    trials = study.get_trials(deepcopy=False)
    completed = Counter(t.params["seed"] for t in trials if t.state.name == "COMPLETE")
    assert completed == Counter(SEEDS)  # every seed exactly once
    (dead,) = [t for t in trials if t.state.name == "FAIL"]
    assert dead.params["seed"] == killed_seed
    retry = [t for t in trials if t.system_attrs.get("failed_trial") == dead.number]
    assert len(retry) == 1 and retry[0].state.name == "COMPLETE"
    assert all(Path(f"runs/seed-{seed}/metrics.json").is_file() for seed in SEEDS)

    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    finished = client.search_runs(
        [experiment], "tags.`seedvar.role` = 'seed' and attributes.status = 'FINISHED'"
    )
    assert Counter(run.info.run_name for run in finished) == Counter(f"seed-{s}" for s in SEEDS)

    aggregate = subprocess.run(seedvar("aggregate", *RECIPE), capture_output=True, text=True)
    assert aggregate.returncode == 0, aggregate.stderr
    assert pd.read_csv("results/seeds.csv")["seed"].tolist() == SEEDS
    print(f"6 seeds, 3 workers (1 killed, seed {killed_seed} retried) in {wall:.0f} s")


def test_a_second_submit_enqueues_nothing_twice(postgres_url: str, study_dir: Path):
    for _ in range(2):
        done = subprocess.run(
            seedvar("submit", "--storage", postgres_url, "--study", "twice", *RECIPE),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    study = optuna.load_study(study_name="twice", storage=postgres_url)
    assert len(study.trials) == len(SEEDS)
    other = subprocess.run(
        seedvar(
            "submit",
            "--storage",
            postgres_url,
            "--study",
            "twice",
            *RECIPE,
            "--set",
            "train.learning_rate=0.5",
        ),
        capture_output=True,
        text=True,
    )
    assert other.returncode == 2 and "already holds another recipe" in other.stderr


def test_devices_start_one_worker_per_entry(postgres_url: str, study_dir: Path):
    recipe = [
        "--profile",
        "smoke",
        "--set",
        "seeds=[0,1,2,3]",
        "--set",
        "data.max_train_examples=100",
        "--set",
        "data.max_eval_examples=100",
    ]
    submit = seedvar("submit", "--storage", postgres_url, "--study", "gpus", *recipe)
    assert subprocess.run(submit, capture_output=True).returncode == 0
    worker = seedvar("worker", "--storage", postgres_url, "--study", "gpus", "--devices", "0,0,1")
    assert subprocess.run(worker, capture_output=True).returncode == 0
    trials = optuna.load_study(study_name="gpus", storage=postgres_url).get_trials()
    done = [t for t in trials if t.state.name == "COMPLETE"]
    assert sorted(t.params["seed"] for t in done) == [0, 1, 2, 3]
    assert {t.user_attrs["gpus"] for t in done} <= {"0", "1"}
    assert len({t.user_attrs["worker"] for t in done}) >= 2  # the seeds were shared out
