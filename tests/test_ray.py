"""Seeds and sweeps on a real Ray cluster of several nodes on this machine (ray.cluster_utils),
no mocks: a study filled by `seedvar launch` that `dvc repro` then does not train again, a node
removed while its seed trains, a task frozen (SIGSTOP) until its replacement has taken over,
a corrupt data file, and sweeps (PostgreSQL storage, a killed driver, pruning).

The cluster (a head without CPUs and three 1-CPU nodes) starts once for the module; every
command under test is a real `seedvar` process that connects to it by address."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import optuna
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.helpers import (
    QUICK,
    STUDY,
    dvc_project,
    one_line_error,
    run_command,
    run_ok,
    seed_name,
    seed_runs,
)

pytestmark = pytest.mark.slow
ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="pip install -e '.[ray]'")

SEEDS = [0, 1, 2]
# long enough to be interrupted mid-training (50 steps, a checkpoint every 3)
RECIPE = {
    "data": {"max_train_examples": 400, "max_eval_examples": 300},
    "train": {"epochs": 2, "checkpoint_every_n_steps": 3},
}
SETS = ("mnli_matched", "mnli_mismatched", "hans")
SPACE = (
    "sweep.space={learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}, "
    "augment_examples: {low: 0, high: 300, step: 100}}"
)
SWEEP = ["sweep.seeds_per_trial=2", "sweep.n_trials=3", "data.max_eval_examples=300", SPACE]


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    """A Ray cluster on this machine: a head that runs no tasks and three 1-CPU nodes."""
    head = {"num_cpus": 0, "include_dashboard": False}
    started = ray_cluster_utils.Cluster(initialize_head=True, head_node_args=head)
    for _ in range(3):
        started.add_node(num_cpus=1)
    started.wait_for_nodes()
    yield started
    started.shutdown()


def seedvar(*args: str) -> list[str]:
    return [sys.executable, "-m", "seedvar.cli", *args]


def flags(*settings: str) -> list[str]:
    return [arg for item in settings for arg in ("--set", item)]


def recipe_flags() -> list[str]:
    settings = [
        f"{part}.{key}={value}" for part, keys in RECIPE.items() for key, value in keys.items()
    ]
    return ["--profile", "smoke", *flags(*settings)]


def on(cluster, *settings: str) -> list[str]:  # noqa: ANN001
    return flags(f"ray.address='{cluster.address}'", *settings)


def launch_report(path: Path) -> dict:
    """What `seedvar launch --report PATH` wrote: finished, already, failed, not_run, retried."""
    return json.loads(path.read_text())


def wait_for(condition, process: subprocess.Popen, timeout: float = 300) -> None:  # noqa: ANN001
    """Until `condition()`, asked twice a second (it may read checkpoints: the test's own CPU)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.communicate(timeout=QUICK)[0]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def attempt_of(folder: Path) -> dict:
    try:
        return json.loads((folder / "attempt.json").read_text())
    except (OSError, ValueError):
        return {}


def checkpointed(runs: Path, at_least: int) -> Path | None:
    """The work folder of a seed whose training checkpoint has reached step `at_least`."""
    import torch

    for checkpoint in runs.glob("seed-*.partial.*/checkpoints/resume.ckpt"):
        try:
            saved = torch.load(checkpoint, map_location="cpu", mmap=True, weights_only=False)
            step = saved["global_step"]
        except (OSError, RuntimeError, EOFError):
            continue
        if step >= at_least and attempt_of(checkpoint.parents[1]):
            return checkpoint.parents[1]
    return None


def assert_each_seed_once(project: Path, seeds: list[int]) -> None:
    """One published folder and one FINISHED MLflow run per seed; nothing left running."""
    runs = project / "runs"
    assert sorted(p.name for p in runs.glob("seed-*") if p.is_dir()) == [f"seed-{s}" for s in seeds]
    found = seed_runs(project)
    finished = Counter(seed_name(r) for r in found if r.info.status == "FINISHED")
    assert finished == Counter(f"seed-{s}" for s in seeds)
    assert not [r for r in found if r.info.status == "RUNNING"]
    for seed in seeds:
        run_id = json.loads((runs / f"seed-{seed}" / "run.json").read_text())["run_id"]
        (run,) = [r for r in found if r.info.run_id == run_id]
        assert run.info.status == "FINISHED"


def assert_same_predictions(reference: Path, project: Path, seeds: list[int]) -> None:
    for seed in seeds:
        for name in SETS:
            path = Path("runs") / f"seed-{seed}" / "predictions" / f"{name}.parquet"
            pd.testing.assert_frame_equal(
                pd.read_parquet(reference / path), pd.read_parquet(project / path)
            )


@pytest.fixture(scope="module")
def reference(
    cluster, dvc_environment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict]]:
    """A git + DVC project (the smoke study, seeds 0-2) filled by one `seedvar launch` on the
    cluster: its seeds are the uninterrupted reference of the tests that interrupt them."""
    project = dvc_project(
        tmp_path_factory.mktemp("project"), profile="smoke", seeds=SEEDS, **RECIPE
    )
    report = project.parent / "launch.json"
    run_ok(*seedvar("launch", *on(cluster), "--report", str(report)), cwd=project)
    yield project, launch_report(report)


def test_no_address_starts_a_ray_of_its_own_beside_a_running_cluster(cluster, tmp_path: Path):
    """The cluster (4 nodes) is the newest Ray on this machine, which `ray.init()` would join."""
    script = (
        "from seedvar.config import load_config\n"
        "from seedvar.scale.cluster import ray_session\n"
        "with ray_session(load_config(None).ray) as info:\n"
        "    print(len(info.nodes), info.address)\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=QUICK,
        check=True,
    )
    assert done.stdout.split()[-2:] == ["1", "None"]


def test_a_local_ray_starts_quietly_on_a_machine_whose_every_core_is_busy(tmp_path: Path):
    """Every core spinning (a study's seeds, another job): the local Ray still starts (a start
    that times out is tried again), and says nothing about its token authentication."""
    script = (
        "from seedvar.config import load_config\n"
        "from seedvar.scale.cluster import ray_session\n"
        "with ray_session(load_config(None).ray) as info:\n"
        "    print(len(info.nodes), info.cpus)\n"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    spin = [sys.executable, "-c", "while True: pass"]
    busy = [subprocess.Popen(spin) for _ in range(len(os.sched_getaffinity(0)))]
    try:
        done = run_command(
            [sys.executable, "-c", script], cwd=tmp_path, env=environment, timeout=STUDY
        )
    finally:
        for process in busy:
            process.kill()
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["1", f"{float(len(os.sched_getaffinity(0)))}"]
    assert "Token authentication" not in done.stderr


def test_launch_trains_each_seed_once_and_dvc_repro_then_trains_nothing(cluster, reference):
    project, report = reference
    assert report["finished"] == SEEDS and report["already"] == []
    assert report["failed"] == {} and report["retried"] == {}
    assert_each_seed_once(project, SEEDS)
    client = MlflowClient(f"sqlite:///{project}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    (study,) = client.search_runs([experiment], "tags.`seedvar.role` = 'study'")
    children = client.search_runs(
        [experiment], f"tags.`mlflow.parentRunId` = '{study.info.run_id}'"
    )
    assert sorted(seed_name(run) for run in children) == ["seed-0", "seed-1", "seed-2"]

    again = project.parent / "again.json"
    run_ok(*seedvar("launch", *on(cluster), "--report", str(again)), cwd=project)
    assert launch_report(again)["already"] == SEEDS and launch_report(again)["finished"] == []

    files = {p: p.read_bytes() for p in project.glob("runs/seed-*/**/*") if p.is_file()}
    runs_before = {run.info.run_id for run in seed_runs(project)}
    reproduced = run_ok("dvc", "repro", cwd=project)
    assert "all 3 seeds are finished in runs" in reproduced  # the stage publishes, trains none
    assert {run.info.run_id for run in seed_runs(project)} == runs_before  # no new seed run
    assert {p: p.read_bytes() for p in files} == files  # the same files (DVC caches them anew)
    assert pd.read_csv(project / "results" / "seeds.csv")["seed"].tolist() == SEEDS
    assert (project / "report" / "report.md").is_file()


def launch_until_checkpointed(
    spawn,
    settings: list[str],
    report: Path,  # noqa: ANN001
) -> tuple[subprocess.Popen, Path]:
    """`seedvar launch` of the interruptible recipe, once one of its seeds has checkpointed
    step 9: the process and that seed's work folder."""
    command = seedvar("launch", *recipe_flags(), *settings, "--report", str(report))
    launch = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found: list[Path] = []

    def training() -> bool:
        folder = checkpointed(Path(".seedvar/runs"), at_least=9)
        found[:] = [folder] if folder else []
        return bool(found)

    wait_for(training, launch)
    return launch, found[0]


def test_a_node_removed_while_its_seed_trains_is_run_again_by_ray_and_counts_once(
    cluster, reference, study_dir: Path, spawn
):
    report = study_dir / "launch.json"
    launch, folder = launch_until_checkpointed(spawn, on(cluster, f"seeds={SEEDS}"), report)
    lost = attempt_of(folder)
    node_id = lost["ray_node"]
    (victim,) = [node for node in cluster.worker_nodes if node.node_id == node_id]
    cluster.remove_node(victim, allow_graceful=False)  # the node dies with its seed's process
    output, _ = launch.communicate(timeout=STUDY)
    cluster.add_node(num_cpus=1)  # back to three nodes for the next tests
    cluster.wait_for_nodes()

    print(output)  # shown with -rP, and on failure
    assert launch.returncode == 0, output
    seed = int(folder.name.split(".")[0].removeprefix("seed-"))
    assert f"seed {seed}: its worker died (attempt {lost['attempt']}" in output  # said once
    assert launch_report(report)["retried"] == {}  # Ray's own retry (max_retries), not ours
    assert launch_report(report)["finished"] == SEEDS
    assert_each_seed_once(study_dir, SEEDS)
    (run,) = seed_runs(study_dir, seed)
    assert run.data.tags.get("seedvar.resumed") == "true"  # continued from its checkpoint
    assert_same_predictions(reference[0], study_dir, SEEDS)


def test_a_killed_worker_is_run_again_by_ray_and_the_launch_says_so_in_one_line(
    cluster, study_dir: Path, spawn
):
    """Ray reruns the task of a worker killed mid-training; seedvar's own line says which
    attempt and process died, the retries left and the step it resumes from."""
    report = study_dir / "launch.json"
    launch, folder = launch_until_checkpointed(spawn, on(cluster, "seeds=[0]"), report)
    killed = attempt_of(folder)
    os.kill(killed["pid"], signal.SIGKILL)  # the worker process dies; its node lives on
    output, _ = launch.communicate(timeout=STUDY)
    print(output)  # shown with -rP, and on failure
    assert launch.returncode == 0, output
    said = [line for line in output.splitlines() if "its worker died" in line]
    assert len(said) == 1, output
    where = f"attempt {killed['attempt']}, process {killed['pid']} on {killed['host']}"
    assert said[0].startswith(f"seed 0: its worker died ({where}, Ray node "), said
    retried = r"; Ray retries it \(2 retries left\), resuming from its checkpoint at step (\d+)$"
    resumed = re.search(retried, said[0])
    assert resumed and int(resumed[1]) >= 9, said
    assert launch_report(report)["retried"] == {}  # Ray's own retry, not the driver's
    assert launch_report(report)["finished"] == [0]
    assert_each_seed_once(study_dir, [0])


def test_a_frozen_task_is_replaced_and_the_late_one_does_no_harm(
    cluster, reference, study_dir: Path, spawn
):
    seeds = [0, 1]  # a free node for the replacement
    report = study_dir / "launch.json"
    # 30 s: on two loaded cores the seed beside the frozen one has gone 10 s without a batch
    settings = on(cluster, f"seeds={seeds}", "ray.stall_seconds=30")
    launch, folder = launch_until_checkpointed(spawn, settings, report)
    frozen = attempt_of(folder)
    os.kill(frozen["pid"], signal.SIGSTOP)  # Ray does not notice: the process is still there
    seed = folder.name.split(".")[0]

    def replaced() -> bool:
        return any(
            attempt_of(f).get("attempt") not in (None, frozen["attempt"])
            for f in Path(".seedvar/runs").glob(f"{seed}.partial.*")
        )

    try:
        wait_for(replaced, launch)  # the replacement has taken the work over
    finally:  # the late one runs again, unless Ray's forced cancel has ended it already
        with contextlib.suppress(ProcessLookupError):
            os.kill(frozen["pid"], signal.SIGCONT)
    output, _ = launch.communicate(timeout=STUDY)
    print(output)  # shown with -rP, and on failure
    assert launch.returncode == 0, output
    stalled = folder.name.split(".")[0].removeprefix("seed-")
    assert launch_report(report)["retried"] == {stalled: ["stalled"]}
    deadline = time.monotonic() + 60
    while _alive(frozen["pid"]):  # it ended (Ray's cancel, or its fence), leaving no trace
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert_each_seed_once(study_dir, seeds)
    assert_same_predictions(reference[0], study_dir, seeds)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "Z"


def test_a_corrupt_data_file_fails_fast_with_its_error_and_no_retries(cluster, study_dir: Path):
    """Broken after its first record, which the launch's check of the header reads: only the
    seeds, reading it whole, find it."""
    first = {"idx": 0, "premise": "a", "hypothesis": "b", "label": 0}
    first |= {"heuristic": "lexical_overlap", "subcase": "ln_passive", "template": "temp20"}
    Path("hans.jsonl").write_text(json.dumps(first) + '\n{"idx": 1, "pre\n')
    settings = on(cluster, "diagnostics.hans.source=hans.jsonl")
    done = run_command(
        seedvar("launch", "--profile", "smoke", *settings, "--report", "launch.json"),
        timeout=STUDY,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    report = launch_report(Path("launch.json"))
    assert report["finished"] == [] and report["retried"] == {}
    assert sorted([*map(int, report["failed"]), *report["not_run"]]) == [0, 1, 2]
    for failure in report["failed"].values():  # its first error line, not retried
        assert failure["error_type"] == "DataError"
        assert "hans.jsonl: cannot be read as JSONL" in failure["error"]
    assert not Path("runs").exists() or not list(Path("runs").glob("seed-*"))


def test_a_gpu_study_on_a_cluster_is_checked_on_its_nodes_not_on_the_driver(study_dir: Path):
    """This driver has no CUDA. `prepare` on a cluster (ray.address) leaves the check to the
    nodes that train; a node that offers a GPU to Ray but cannot run CUDA (this one: a CPU build
    of torch) refuses the launch, in one line from its own Ray task, before any seed trains."""
    head = {"num_cpus": 1, "num_gpus": 1, "include_dashboard": False}
    gpu_cluster = ray_cluster_utils.Cluster(initialize_head=True, head_node_args=head)
    try:
        address = f"ray.address='{gpu_cluster.address}'"
        settings = flags(address, "train.accelerator=gpu", "ray.gpus_per_seed=1", "seeds=[0]")
        prepared = run_command(seedvar("prepare", "--profile", "smoke", *settings), timeout=STUDY)
        assert prepared.returncode == 0, prepared.stderr  # the driver's CUDA is not asked
        done = run_command(seedvar("launch", "--profile", "smoke", *settings), timeout=STUDY)
        one_line_error(done, "trains on a GPU (train.accelerator: gpu) but CUDA is unusable")
        assert "is a CPU build" in done.stderr  # the node's torch, as its task found it
        assert not Path("runs").exists() or not list(Path("runs").glob("seed-*"))
    finally:
        gpu_cluster.shutdown()
    local = run_command(
        seedvar("prepare", "--profile", "smoke", *flags("train.accelerator=gpu")), timeout=QUICK
    )
    one_line_error(local, "CUDA is unusable here")  # a machine that trains: refused at once


def test_a_sweep_runs_trials_at_once_and_survives_its_driver_being_killed(
    cluster, study_dir: Path, postgres_url: str, spawn
):
    settings = on(cluster, *SWEEP, f"sweep.storage={postgres_url}", "sweep.pruner=none")
    command = seedvar("sweep", "--ray", "--profile", "smoke", *settings)
    first = spawn(command, stdout=subprocess.PIPE, text=True)
    work = Path(".seedvar/sweeps/seedvar-sweep")
    wait_for(lambda: bool(list(work.glob("*/seed-*.partial.*"))), first)
    os.killpg(first.pid, signal.SIGKILL)  # the driver dies; Ray stops its tasks
    first.wait(timeout=QUICK)
    resumed = run_command(command, timeout=STUDY)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    study = optuna.load_study(study_name="seedvar-sweep", storage=postgres_url)
    assert [t.number for t in study.trials] == [0, 1, 2]  # none lost, none counted twice
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    assert study.trials[0].user_attrs["default"] is True
    table = pd.read_csv("results/sweep/trials.csv")
    metrics = json.loads(
        next(Path("sweeps").glob("seedvar-sweep/*/seed-0/metrics.json")).read_text()
    )
    columns = [c for c in metrics if not c.startswith("majority share")] + ["hans headline mean"]
    summary = {f"{s}/{c}" for s in ("mean", "std") for c in columns}
    params = {"param/learning_rate", "param/augment_examples"}
    assert set(table.columns) == {"trial", "state", "default", *params, *summary}

    client = MlflowClient(f"sqlite:///{study_dir}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    trials = client.search_runs(
        [experiment], "tags.`seedvar.sweep` = 'seedvar-sweep' and tags.`seedvar.role` = 'trial'"
    )
    assert sorted(r.info.run_name for r in trials) == ["trial 0", "trial 1", "trial 2"]
    # the trial whose driver died was taken up again, in its own MLflow run
    assert any(trial.data.tags.get("seedvar.resumed") == "true" for trial in trials)
    spans = []
    for trial in trials:
        assert trial.info.status == "FINISHED"
        seeds = client.search_runs(
            [experiment], f"tags.`mlflow.parentRunId` = '{trial.info.run_id}'"
        )
        assert sorted(seed_name(s) for s in seeds if s.info.status == "FINISHED") == [
            "seed-0",
            "seed-1",
        ]
        assert {s.data.tags["seedvar.sweep"] for s in seeds} == {"seedvar-sweep"}
        spans += [(s.info.start_time, s.info.end_time, trial.info.run_name) for s in seeds]
    overlapping = any(a[2] != b[2] and a[0] < b[1] and b[0] < a[1] for a in spans for b in spans)
    assert overlapping  # seeds of different trials trained at the same time


def test_pruning_on_ray_stops_the_trial_and_its_other_seed(cluster, study_dir: Path):
    storage = "sqlite:///sweeps/optuna.db"
    Path("sweeps").mkdir()
    study = optuna.create_study(storage=storage, study_name="pruned", direction="maximize")
    distributions = {
        "learning_rate": optuna.distributions.FloatDistribution(1e-4, 3e-3, log=True),
        "augment_examples": optuna.distributions.IntDistribution(0, 300, step=100),
    }
    for _ in range(2):  # two finished trials that any real trial falls far below
        study.add_trial(
            optuna.trial.create_trial(
                params={"learning_rate": 1e-3, "augment_examples": 0},
                distributions=distributions,
                value=0.99,
                intermediate_values={0: 0.99, 1: 0.99},
                user_attrs={
                    "mean/MNLI dev acc.": 0.99,
                    "std/MNLI dev acc.": 0.01,
                    "std/hans headline mean": 0.1,
                },
            )
        )
    settings = [*SWEEP, "sweep.study_name=pruned", "data.max_train_examples=800"]
    settings.append("train.epochs=4")  # pruned after the first: its other seed is mid-way
    done = run_command(
        seedvar("sweep", "--ray", "--profile", "smoke", *on(cluster, *settings)), timeout=STUDY
    )
    assert done.returncode == 0, done.stdout + done.stderr
    study = optuna.load_study(study_name="pruned", storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "PRUNED"]
    client = MlflowClient(f"sqlite:///{study_dir}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("seedvar").experiment_id
    (trial,) = client.search_runs(
        [experiment], "tags.`seedvar.sweep` = 'pruned' and tags.`seedvar.role` = 'trial'"
    )
    assert trial.info.status == "KILLED" and trial.data.tags["seedvar.pruned"] == "true"
    seeds = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{trial.info.run_id}'")
    assert sorted(seed_name(s) for s in seeds) == ["seed-0", "seed-1"]
    for seed in seeds:  # the first by the pruner, the other because its trial was pruned
        assert seed.info.status == "KILLED" and seed.data.tags["seedvar.pruned"] == "true"
