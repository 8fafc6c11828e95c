"""The GPU path, tested on a CPU: the device and precision chosen, GPUs shared and their worker
processes, the checkpoint policy, an unreadable checkpoint, no host sync per training step, the
kept weights' dtype, the lock kind, and the GPU check itself in its CPU mode (with only the
packages a lent GPU machine has). Where a GPU's answer is needed, torch.cuda's is replaced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from safetensors.torch import load_file
from torch.overrides import TorchFunctionMode

from seedvar.config import load_config
from seedvar.errors import DeviceError
from seedvar.pretrained import TINY_RANDOM, load_model, load_tokenizer
from seedvar.scale.cluster import ClusterInfo, seed_resources, this_machine
from seedvar.scale.scheduler import Scheduler
from seedvar.seeds.finished import RUN_STATE
from seedvar.seeds.job import CHECKPOINT, SeedJob
from seedvar.training import device
from seedvar.training.datamodule import NLIDataModule
from seedvar.training.fit import fit, trainer_for
from seedvar.training.module import NLIClassifier
from seedvar.training.resume import ResumeCheckpoint, readable
from tests.helpers import QUICK, REPO, run_command

SMOKE = load_config(None, profile="smoke")


def a_gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], count: int = 1) -> None:
    """torch.cuda answering as on a machine with `count` usable GPUs of `capability`."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *_, **__: True)  # emulation


def test_gpus_are_counted_only_where_cuda_runs(monkeypatch: pytest.MonkeyPatch):
    # a driver older than torch's CUDA: NVML counts the GPUs, CUDA cannot use them
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert this_machine().gpus == 0
    resources = seed_resources(SMOKE, this_machine())
    assert resources.gpus == 0  # so no seed is planned on a GPU that would train on the CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert this_machine().gpus == 2


def test_a_gpu_profile_stops_with_the_driver_and_torch_cuda_versions(
    monkeypatch: pytest.MonkeyPatch,
):
    paper = load_config(None, profile="paper")
    assert paper.train.accelerator == "gpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(device, "nvidia_driver", lambda: "535.104.05")
    with pytest.raises(DeviceError) as stopped:
        device.require_gpu(paper)
    message = str(stopped.value)
    assert "535.104.05" in message and "CUDA 13.0" in message and "580 or newer" in message
    assert "\n" not in message
    device.require_gpu(paper.model_copy(update={"train": SMOKE.train}))  # auto: no stop


ARCHES = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]  # a CUDA 13 build


@pytest.mark.parametrize(
    ("capability", "refused"), [((7, 0), True), ((6, 0), True), ((8, 9), False), ((12, 1), False)]
)
def test_a_gpu_torch_has_no_kernels_for_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], refused: bool
):
    """A V100 (7.0) or P100 (6.0) passes is_available() under a CUDA 13 build and then fails
    every seed with "no kernel image": refused before any work, naming why and the fix."""
    a_gpu(monkeypatch, capability)
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ARCHES)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "a GPU")
    paper = load_config(None, profile="paper")
    if not refused:
        device.require_gpu(paper)  # an 8.9 runs sm_86's binary; 12.1 runs sm_120's
        return
    with pytest.raises(DeviceError) as stopped:
        device.require_gpu(paper)
    message = str(stopped.value)
    assert f"compute capability {capability[0]}.{capability[1]}" in message
    assert "sm_75, sm_80" in message and "install a torch built for an older CUDA" in message
    assert "\n" not in message


def test_a_checkpoint_resumes_where_fewer_gpus_are_visible(monkeypatch: pytest.MonkeyPatch):
    """Saved by a process that saw 8 GPUs, resumed by one that sees 1 (a seed per GPU): each
    visible GPU's RNG state restored, none asked of a GPU that is not there."""
    a_gpu(monkeypatch, (9, 0), count=1)
    restored: list[int] = []

    def set_state(state: torch.Tensor, device_index: int = 0) -> None:
        if device_index >= 1:
            raise IndexError(f"no GPU {device_index}")  # as torch says for a device not there
        restored.append(device_index)

    monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
    monkeypatch.setattr(torch.cuda.random, "set_rng_state", set_state)
    saved = {
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": [torch.zeros(16, dtype=torch.uint8)] * 8,
    }
    ResumeCheckpoint(Path("unused.ckpt"), 15.0, None).load_state_dict(saved)
    assert restored == [0]


def test_a_gpu_study_stops_before_any_work_on_this_cpu(study_dir: Path):
    """The offline study told to train on a GPU (as the paper profile is, which needs the hub
    too): every command that would work stops in one line, and nothing is written."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a usable GPU")
    gpu = ["--profile", "smoke", "--set", "train.accelerator=gpu"]
    for command in (["prepare", "--output", "prepared"], ["launch"], ["train", "--seed", "0"]):
        done = run_command([sys.executable, "-m", "seedvar.cli", *command, *gpu], timeout=QUICK)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "CUDA is unusable here" in done.stderr
        assert f"torch {torch.__version__} is a CPU build" in done.stderr
    assert sorted(p.name for p in study_dir.iterdir()) == ["data"]  # nothing written


def test_emulated_bf16_gets_16_mixed(monkeypatch: pytest.MonkeyPatch):
    a_gpu(monkeypatch, (7, 5))  # a T4: is_bf16_supported() says yes, by emulation
    assert device.resolve_precision(SMOKE) == "16-mixed"
    assert device.resolve_eval_precision(SMOKE) == "16"
    a_gpu(monkeypatch, (9, 0))  # an H100/H200
    assert device.resolve_precision(SMOKE) == "bf16-mixed"


def test_seeds_share_a_gpu_as_its_memory_allows(monkeypatch: pytest.MonkeyPatch):
    a_gpu(monkeypatch, (9, 0))
    local = ClusterInfo(None, [{"CPU": 16.0, "GPU": 1.0}], None)
    for gib, share in ((141, 0.25), (24, 0.5), (16, 1.0)):
        memory = SimpleNamespace(total_memory=gib * 2**30)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *_, m=memory: m)
        assert seed_resources(SMOKE, local).gpus == share
    cluster = ClusterInfo("head:6379", [{"CPU": 16.0, "GPU": 8.0}], None)
    assert seed_resources(SMOKE, cluster).gpus == 1.0  # its GPUs are not seen from here


def test_worker_processes_are_reused_unless_they_could_change_gpus():
    ray = pytest.importorskip("ray")
    settings, echo = SMOKE.ray, print
    options = [
        Scheduler(ray, settings, resources, echo, one_gpu).remote._default_options["max_calls"]
        for resources, one_gpu in (
            (seed_resources(SMOKE, ClusterInfo(None, [{"CPU": 2.0}], None)), False),
            (SimpleNamespace(gpus=0.25, cpus=1.0, threads=1), True),
            (SimpleNamespace(gpus=0.25, cpus=1.0, threads=1), False),
        )
    ]
    assert options == [0, 0, 1]  # 0: no limit; 1: a fresh process per seed


def test_checkpoints_are_due_by_minutes_of_training(monkeypatch: pytest.MonkeyPatch):
    now = [1000.0]
    monkeypatch.setattr("seedvar.training.resume.time.monotonic", lambda: now[0])
    by_time = ResumeCheckpoint(Path("unused"), every_minutes=15)
    assert not by_time.due(500)  # a step count no longer decides
    now[0] += 15 * 60
    assert by_time.due(501) and not by_time.due(0)
    by_steps = ResumeCheckpoint(Path("unused"), None, every_n_steps=3)
    assert [by_steps.due(step) for step in range(1, 7)] == [False, False, True] * 2
    assert (
        SMOKE.train.checkpoint_every_minutes == 15 and SMOKE.train.checkpoint_every_n_steps is None
    )


def tiny_run(tmp_path: Path, callbacks: list[L.Callback], steps: int = 6) -> torch.nn.Module:
    """A tiny BERT trained `steps` steps through seedvar's `trainer_for` and `fit`."""
    tokenizer = load_tokenizer(TINY_RANDOM)
    rows = [{**tokenizer("a man sleeps", f"the {i} men sleep"), "labels": i % 3} for i in range(64)]
    pairs = _Rows(rows)
    module = NLIClassifier(
        load_model(TINY_RANDOM, 0, SMOKE.task.labels),
        1e-3,
        0.0,
        0.0,
        steps,
        log_every_n_steps=10**6,
    )
    data = NLIDataModule(pairs, pairs, tokenizer.pad_token_id, 8, 64, 0, False)
    trainer = trainer_for("cpu", "32-true", 1, steps, 1.0, 10**6, callbacks)
    return fit(trainer, module, data)


class _Rows:
    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: int | str) -> object:
        return [row[key] for row in self.rows] if isinstance(key, str) else self.rows[key]


class HostSyncs(TorchFunctionMode):
    """Counts the calls that make the CPU wait for a GPU's result."""

    SYNCS = ("item", "__bool__", "tolist", "__int__", "__float__")

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if getattr(func, "__name__", "") in self.SYNCS:
            self.calls.append(func.__name__)
        return func(*args, **(kwargs or {}))


class CountSyncsPerStep(L.Callback):
    """Host syncs inside each training step (batch start to batch end), after the first."""

    def __init__(self) -> None:
        self.per_step: list[list[str]] = []

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        self.mode = HostSyncs()
        self.mode.__enter__()

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        self.mode.__exit__(None, None, None)
        self.per_step.append(self.mode.calls)


def test_a_training_step_never_waits_for_its_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """As a launch runs a seed (no progress bar: on a GPU it refreshes with the logged loss)."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    counted = CountSyncsPerStep()
    tiny_run(tmp_path, [counted])
    assert len(counted.per_step) == 6
    assert counted.per_step[1:] == [[]] * 5  # the attention mask, the loss, the clipping, AdamW


def test_an_unreadable_checkpoint_is_set_aside_and_the_seed_starts_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    saved = ResumeCheckpoint(tmp_path / "whole.ckpt", None, every_n_steps=3)
    tiny_run(tmp_path, [saved])
    assert readable(tmp_path / "whole.ckpt") and saved.saves[0][1] > 0
    config = SMOKE.model_copy(update={"output_dir": str(tmp_path / "runs")})
    job = SeedJob.of(config)
    job.work_dir.mkdir(parents=True)
    state = {"config_hash": config.hash(), "run_id": "run-of-the-crash"}
    (job.work_dir / RUN_STATE).write_text(json.dumps(state))
    (job.work_dir / CHECKPOINT).parent.mkdir()
    whole = (tmp_path / "whole.ckpt").read_bytes()
    (job.work_dir / CHECKPOINT).write_bytes(whole[: len(whole) // 2])  # a full disk's copy
    again = SeedJob.of(config)
    resumable = again.claim(config)
    assert resumable.checkpoint is None and resumable.stale_run_id == "run-of-the-crash"
    aside = list(again.keep_dir.glob("seed-0.unreadable-checkpoint.*.ckpt"))
    assert len(aside) == 1 and aside[0].stat().st_size == len(whole) // 2
    warning = capsys.readouterr().err
    assert warning.count("\n") == 1 and "cannot be read" in warning and str(aside[0]) in warning


def test_kept_weights_take_half_the_disk_in_bfloat16(tmp_path: Path):
    config = SMOKE.model_copy(update={"output_dir": str(tmp_path / "runs")})
    job = SeedJob.of(config)
    job.claim(config)
    job.save_model(load_model(TINY_RANDOM, 0, SMOKE.task.labels), load_tokenizer(TINY_RANDOM))
    weights = job.model_dir / "model.safetensors"
    before = load_file(weights)
    job.keep_weights_as("bfloat16")
    after = load_file(weights)
    floats = [name for name, tensor in before.items() if tensor.is_floating_point()]
    assert floats and all(after[name].dtype == torch.bfloat16 for name in floats)
    assert all(torch.equal(after[n], before[n].to(torch.bfloat16)) for n in floats)
    assert sum(t.numel() * t.element_size() for t in after.values()) < 0.51 * sum(
        t.numel() * t.element_size() for t in before.values()
    )


def test_the_venv_is_rebuilt_when_the_lock_kind_changes(tmp_path: Path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed-cpu").touch()
    planned = subprocess.run(
        ["make", "-n", f"VENV={venv}", "LOCK=gpu", str(venv / ".installed-gpu")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    assert f"rm -rf {venv}" in planned  # a CPU build of torch would stay under the GPU lock
    assert "torch.version.cuda" in planned  # and the GPU lock's torch is checked for CUDA
