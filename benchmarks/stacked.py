"""K seeds trained stacked in one process (training/stacked*.py) against the same K seeds as K
separate processes running at once, on the CPU, where a tiny model's steps are thought to be
launch-bound as a GPU's are.

For each K (`--seeds`, default 1, 4, 8 and 16) the same K seeds (init and data seed k for seed k)
train the same steps of uniformly shuffled batches of 32 real MNLI pairs (the paper's recipe:
AdamW at 2e-5, 10 % warmup, clipping at 1.0), fp32, three ways:
  - separate: K processes at once, each one seed through today's solo path (`trainer_for` and
    `fit` with NLIClassifier and NLIDataModule), the machine's CPUs split among them as
    benchmarks/seeds_at_once.py splits them (max(1, CPUs // K) torch threads each);
  - stacked, padded: one process with every CPU, StackedClassifier and StackedDataModule
    through the Trainer as tests/test_stacked.py runs them, each seed's batch padded as its solo
    run pads it, then to the longest of the K;
  - stacked, unpadded: the same on packed batches (each seed's real tokens only).
The pairs are cut to 128 tokens (the recipe's) and, in a second case, to 32: a step of little
arithmetic, where the operations' launches weigh most, as on a GPU (`--max-length`).

Every process is started, has loaded its data and trained two warm-up steps before any timing;
then each round each way trains its K seeds from a fresh draw, the ways taking turns (separate,
padded, unpadded, separate, ...) for `--rounds` rounds, and each reports its median. Timed: the
training window, from the first seed's first step to the last seed's last (the Trainer's
set-up and one validation batch not counted), as seed-steps per second; and the CPU seconds the
way's processes used for the whole run, as seed-steps per CPU-second. On a machine shared with
other work the CPU-second rate is the fairer one: how much of a busy machine's CPUs a way gets
depends on the other work and on how the kernel groups processes, not only on the way (here K
separate processes got less of it than one stacked process). Each way's last-step loss of
each seed is compared with the separate runs' (the same arithmetic: within float rounding).
Separate processes that would take more than half the memory available (about 0.65 GiB each)
are left out, saying so, and the stacked ways still run. Every process runs with
OMP_WAIT_POLICY=PASSIVE (see WAIT_POLICY).

Usage:  python benchmarks/stacked.py [--seeds 1 4 8 16] [--steps 16] [--rounds 3]
        [--max-length 128 32] [--size tiny bert-tiny]   (tiny: seedvar's tiny random BERT,
        width 32; bert-tiny: a random-init BERT of google/bert_uncased_L-2_H-128_A-2's size)
        python benchmarks/stacked.py --smoke DIR   (K = 2, 2 steps, once, into DIR)
Writes: benchmarks/results/stacked-cpu-<capability>.json (avx2, avx512-bf16, ...)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any

import datasets
import lightning as L
import psutil
import smoke
import torch
from transformers import BertConfig, BertForSequenceClassification, PreTrainedModel

from seedvar.config import load_config
from seedvar.data.sets import load_task_set
from seedvar.data.tokenized import tokenize_cached
from seedvar.offline_models import TINY_RANDOM
from seedvar.pretrained import load_tokenizer
from seedvar.training.datamodule import NLIDataModule
from seedvar.training.device import cpu_description, native_cpu_bf16
from seedvar.training.fit import fit, trainer_for
from seedvar.training.module import NLIClassifier
from seedvar.training.stacked import SeedStreams, initialised
from seedvar.training.stacked_data import StackedDataModule
from seedvar.training.stacked_module import StackedClassifier

REPO = Path(__file__).resolve().parents[1]
MNLI = REPO / "data" / "offline" / "mnli"
BATCH, EVAL_BATCH, MAX_LENGTH = 32, 32, 128
LEARNING_RATE, WEIGHT_DECAY, WARMUP, CLIP = 2e-5, 0.01, 0.1, 1.0  # the paper's recipe
LOG_EVERY = 50  # the recipe's log_every_n_steps
LABELS = ["entailment", "neutral", "contradiction"]
SIZES = {  # a random-init BERT's width, layers, heads and feed-forward width
    "tiny": None,  # seedvar's TINY_RANDOM (32, 2, 2, 64)
    "bert-tiny": (128, 2, 2, 512),  # google/bert_uncased_L-2_H-128_A-2's
}
SEPARATE, PADDED, UNPADDED = "separate", "stacked padded", "stacked unpadded"
WAYS = (SEPARATE, PADDED, UNPADDED)
MARK = "@@stacked@@ "  # a worker's protocol lines on its stdout; anything else is skipped
WORKER_MIB_GUESS = 700  # a worker's memory before one has been measured
# every process waits for its OpenMP threads' work asleep, not spinning: on a machine with
# more runnable threads than cores a spinning 2-thread step took 10x a passive one (measured here)
WAIT_POLICY = "PASSIVE"
WAIT_POLICY_WHY = (
    "OpenMP's default spin-wait on a busy machine: a 2-thread solo step of the tiny model took "
    "1.25-1.60 s spinning against 0.074-0.077 s passive (load average 7-9 on 2 CPUs)"
)
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")


@dataclass(frozen=True)
class Job:
    """What one worker process trains each time it is told to: `init_seeds` (one for a
    separate process, K for a stacked one) of `size`, `steps` steps, on `threads` threads."""

    data: str
    pad_token_id: int
    size: str
    init_seeds: list[int]
    stacked: bool
    steps: int
    threads: int


# The worker: one process, trains its job's seeds each time a line "go [padded|unpadded]" comes


class Clock(L.Callback):
    """The training window's ends (time.monotonic: one clock for every process of the
    machine) and the last step's loss (each seed's, on the stacked path)."""

    def __init__(self) -> None:
        self.start = self.end = 0.0
        self.losses = torch.empty(0)

    def on_train_start(self, *args: object) -> None:
        self.start = time.monotonic()

    def on_train_batch_end(self, trainer, module, outputs, *args: object) -> None:  # noqa: ANN001
        self.end = time.monotonic()
        self.losses = outputs.get("seed_losses", outputs["loss"]).detach().reshape(-1)


def drawn(size: str, init_seeds: Sequence[int]) -> tuple[list[PreTrainedModel], SeedStreams]:
    """Each seed's model and random stream as its solo run draws them (stacked.initialised):
    for `tiny` through `load_model`, else a BertConfig of the size with the same seeding."""
    dimensions = SIZES[size]
    if dimensions is None:
        return initialised(TINY_RANDOM, init_seeds, LABELS)
    width, layers, heads, feed_forward = dimensions
    models: list[PreTrainedModel] = []
    generators = []
    for seed in init_seeds:
        torch.manual_seed(seed)
        config = BertConfig(
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=feed_forward,
            id2label=dict(enumerate(LABELS)),
            label2id={label: i for i, label in enumerate(LABELS)},
        )
        models.append(BertForSequenceClassification(config))
        generator = torch.Generator()
        generator.set_state(torch.get_rng_state())
        generators.append(generator)
    return models, SeedStreams(generators)


def train(
    job: Job, train_set: datasets.Dataset, validation: datasets.Dataset, unpadded: bool
) -> dict[str, Any]:
    """Train the job's seeds once from a fresh draw: the training window, the whole run's
    seconds and CPU seconds, and each seed's last-step loss."""
    usage, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    clock = Clock()
    trainer = trainer_for("cpu", "32-true", 1, job.steps, CLIP, LOG_EVERY, [clock])
    models, streams = drawn(job.size, job.init_seeds)
    if job.stacked:  # through the Trainer, as tests/test_stacked.py runs it
        module = StackedClassifier(
            models,
            streams,
            job.init_seeds,
            LEARNING_RATE,
            WEIGHT_DECAY,
            WARMUP,
            job.steps,
            log_every_n_steps=LOG_EVERY,
        )
        data = StackedDataModule(
            train_set,
            validation,
            job.pad_token_id,
            BATCH,
            EVAL_BATCH,
            job.init_seeds,
            False,
            unpadded=unpadded,
        )
        trainer.fit(module, datamodule=data)
    else:
        (model,), (seed,) = models, job.init_seeds
        solo = NLIClassifier(
            model, LEARNING_RATE, WEIGHT_DECAY, WARMUP, job.steps, log_every_n_steps=LOG_EVERY
        )
        pad = job.pad_token_id
        fit(
            trainer, solo, NLIDataModule(train_set, validation, pad, BATCH, EVAL_BATCH, seed, False)
        )
    used = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "start": clock.start,
        "end": clock.end,
        "seconds": time.monotonic() - started,
        "cpu_seconds": used.ru_utime + used.ru_stime - usage.ru_utime - usage.ru_stime,
        "losses": clock.losses.tolist(),
        "rss_mib": used.ru_maxrss / 1024,
    }


def work(job: Job) -> None:
    """A worker: load the data, train two warm-up steps, say "ready", then train the job once
    for each line "go [padded|unpadded]" on stdin, answering with what `train` returns."""
    torch.set_num_threads(job.threads)
    train_set = datasets.load_from_disk(str(Path(job.data) / "train"))
    validation = datasets.load_from_disk(str(Path(job.data) / "validation"))
    warm = Job(**{**asdict(job), "steps": 2})
    for unpadded in (False, True) if job.stacked else (False,):
        train(warm, train_set.select(range(2 * BATCH)), validation, unpadded)
    print(MARK + "ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] != ["go"]:
            break
        result = train(job, train_set, validation, words[1:] == ["unpadded"])
        print(MARK + json.dumps(result), flush=True)


# The driver: starts the workers of each K, tells them to train in turns, and reports


class Worker:
    """A worker process running `job`; its stderr in `log`."""

    def __init__(self, job: Job, log: Path) -> None:
        threads = str(job.threads)
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        env.update(OMP_WAIT_POLICY=WAIT_POLICY, TQDM_DISABLE="1")
        self.log = log
        with log.open("w") as errors:
            self.process = subprocess.Popen(
                [sys.executable, __file__, "--worker", json.dumps(asdict(job))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                env=env,
                cwd=REPO,
            )

    def tell(self, line: str) -> None:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def answer(self) -> str:
        """The worker's next protocol line."""
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        for line in stdout:
            if line.startswith(MARK):
                return line[len(MARK) :].strip()
        tail = self.log.read_text()[-3000:]
        raise SystemExit(f"a worker stopped (exit {self.process.wait()}):\n{tail}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.tell("quit")
            self.process.wait(timeout=60)


def run_way(workers: list[Worker], line: str) -> dict[str, Any]:
    """Tell `workers` to train at once; their window, wall seconds, CPU seconds and losses."""
    started = time.monotonic()
    for worker in workers:
        worker.tell(line)
    results = [json.loads(worker.answer()) for worker in workers]
    return {
        "window_s": max(r["end"] for r in results) - min(r["start"] for r in results),
        "wall_s": time.monotonic() - started,
        "cpu_s": sum(r["cpu_seconds"] for r in results),
        "losses": [loss for r in results for loss in r["losses"]],
        "rss_mib": max(r["rss_mib"] for r in results),
    }


def measure_k(
    k: int, job: Job, rounds: int, cpus: int, logs: Path, no_separate: str | None
) -> dict[str, Any]:
    """The ways for K = `k` seeds of `job`'s size and data, `rounds` rounds in turns, each
    way's median; without the separate processes where `no_separate` says why."""
    seeds, name = list(range(k)), f"{job.size}-{Path(job.data).name}-{k}"
    threads = max(1, cpus // k)
    separate = [
        Worker(replace(job, init_seeds=[seed], threads=threads), logs / f"{name}-{seed}")
        for seed in ([] if no_separate else seeds)
    ]
    stacked = Worker(replace(job, init_seeds=seeds, stacked=True), logs / name)
    lines = {SEPARATE: "go", PADDED: "go padded", UNPADDED: "go unpadded"}
    ways = [way for way in WAYS if way != SEPARATE or separate]
    try:
        for worker in [*separate, stacked]:
            if worker.answer() != "ready":
                raise SystemExit(f"a worker did not start: {worker.log}")
        runs: dict[str, list[dict[str, Any]]] = {way: [] for way in ways}
        for _ in range(rounds):
            for way in ways:
                runs[way].append(run_way(separate if way == SEPARATE else [stacked], lines[way]))
            times = ", ".join(f"{way} {runs[way][-1]['window_s']:.2f} s" for way in ways)
            print(f"{name}: {times}", flush=True)
    finally:
        for worker in [*separate, stacked]:
            worker.close()
    measured = summary(k, job.steps, runs)
    if no_separate:
        measured["separate_skipped"] = no_separate
    return measured


def summary(k: int, steps: int, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each way's median rates over its rounds, the ratios stacked / separate, and how far
    each stacked seed's last loss is from its separate run's (relative)."""
    ways: dict[str, dict[str, Any]] = {}
    for way, rounds in runs.items():
        window = statistics.median(run["window_s"] for run in rounds)
        cpu = statistics.median(run["cpu_s"] for run in rounds)
        ways[way] = {
            "window_s_each_round": [run["window_s"] for run in rounds],
            "wall_s_each_round": [run["wall_s"] for run in rounds],
            "cpu_s_each_round": [run["cpu_s"] for run in rounds],
            "median_window_s": window,
            "seed_steps_per_s": k * steps / window,
            "seeds_per_hour": 3600 / window * k,
            "seed_steps_per_cpu_s": k * steps / cpu,
            "peak_rss_mib_per_process": max(run["rss_mib"] for run in rounds),
        }
    measured: dict[str, Any] = {"seeds": k, "steps_each": steps, "ways": ways}
    reference = SEPARATE if SEPARATE in runs else PADDED
    alone = torch.tensor(runs[reference][-1]["losses"])
    measured[f"last_loss_relative_difference_vs_{reference.replace(' ', '_')}"] = {
        way: (
            (torch.tensor(runs[way][-1]["losses"]) - alone).abs().max() / alone.abs().max()
        ).item()
        for way in runs
        if way != reference
    }
    if SEPARATE in runs:
        measured["stacked_vs_separate"] = {
            way: {
                "per_wall_s": ways[way]["seed_steps_per_s"] / ways[SEPARATE]["seed_steps_per_s"],
                "per_cpu_s": ways[way]["seed_steps_per_cpu_s"]
                / ways[SEPARATE]["seed_steps_per_cpu_s"],
            }
            for way in (PADDED, UNPADDED)
        }
    return measured


def prepare_data(folder: Path, steps: int, max_length: int) -> dict[str, Any]:
    """`steps` batches of real MNLI training pairs (one epoch) and one validation batch, cut to
    `max_length` tokens by the tiny model's tokenizer (bert-base-uncased's vocabulary), saved
    under `folder`; the pairs' mean and longest length, and the share of the uniform batches'
    padded places that is padding."""
    paper = load_config(None)
    tokenizer = load_tokenizer(TINY_RANDOM)
    sets = {"train": ("train_sample", steps * BATCH), "validation": ("validation_matched", BATCH)}
    lengths: list[int] = []
    for name, (file, rows) in sets.items():
        frame = load_task_set(paper, str(MNLI / f"{file}.parquet")).sample(n=rows, random_state=0)
        tokens = tokenize_cached(frame, tokenizer, max_length, folder / "cache", paper.task.text)
        tokens.save_to_disk(str(folder / name))
        lengths = lengths or [len(ids) for ids in tokens["input_ids"]]
    batches = [lengths[i : i + BATCH] for i in range(0, len(lengths), BATCH)]
    places = sum(len(batch) * max(batch) for batch in batches)
    return {
        "train_pairs": len(lengths),
        "mean_tokens": statistics.mean(lengths),
        "longest": max(lengths),
        "padding_share_one_seed": 1 - sum(lengths) / places,
    }


def cpu_flags() -> dict[str, bool]:
    """Which of CPU_FLAGS /proc/cpuinfo lists."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "").split()
    return {flag: flag in flags for flag in CPU_FLAGS}


def result_file() -> Path:
    """Where this machine's results go: one file per CPU capability."""
    capability = torch.backends.cpu.get_cpu_capability().lower()
    native = "-bf16" if native_cpu_bf16() else ""
    return REPO / "benchmarks" / "results" / f"stacked-cpu-{capability}{native}.json"


def unaffordable(k: int, worker_mib: float) -> str | None:
    """Why `k` separate workers would not fit in half the memory available now (the rest is
    the machine's other work's), or None."""
    available = psutil.virtual_memory().available / 2**20
    need = k * worker_mib
    if need <= available / 2:
        return None
    return f"{k} processes of {worker_mib:.0f} MiB: {need:.0f} MiB, {available:.0f} MiB available"


def table(results: dict[str, Any]) -> str:
    """The results as a short text table."""
    lines = [
        f"{'case':<22}{'K':>3}  {'way':<17}{'seed-steps/s':>13}{'per CPU-s':>10}"
        f"{'x sep.':>8}{'x sep./CPU-s':>13}"
    ]
    for case, by_k in results["cases"].items():
        for k, measured in by_k.items():
            ratios = measured.get("stacked_vs_separate", {})
            for way, rates in measured["ways"].items():
                ratio = ratios.get(way)
                versus = (
                    f"{ratio['per_wall_s']:>8.2f}{ratio['per_cpu_s']:>13.2f}"
                    if ratio
                    else f"{'-':>8}{'-':>13}"
                )
                lines.append(
                    f"{case:<22}{k:>3}  {way:<17}{rates['seed_steps_per_s']:>13.1f}"
                    f"{rates['seed_steps_per_cpu_s']:>10.1f}{versus}"
                )
            if "separate_skipped" in measured:
                lines.append(
                    f"{case:<22}{k:>3}  {SEPARATE:<17}skipped: {measured['separate_skipped']}"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 4, 8, 16], help="values of K")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", nargs="+", choices=sorted(SIZES), default=["tiny"])
    parser.add_argument(
        "--max-length", type=int, nargs="+", default=[128, 32], help="pairs cut to these lengths"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    smoke.add_option(parser)
    args = parser.parse_args()
    if args.worker:
        work(Job(**json.loads(args.worker)))
        return
    out = result_file()
    if args.smoke:
        out, args.seeds, args.steps, args.rounds = args.smoke / out.name, [2], 2, 1
        args.size, args.max_length = ["tiny"], [MAX_LENGTH]
    cpus = len(os.sched_getaffinity(0))
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    )
    results: dict[str, Any] = {
        "cpu": cpu_description(),
        "cpu_flags": cpu_flags(),
        "cpus": cpus,
        "torch": torch.__version__,
        "commit": commit.stdout.strip(),
        "load_average_before": os.getloadavg(),
        "precision": "32-true",
        "batch": BATCH,
        "steps_each": args.steps,
        "rounds": args.rounds,
        "threads": {SEPARATE: f"max(1, {cpus} // K) each", "stacked": cpus},
        "environment": {"OMP_WAIT_POLICY": WAIT_POLICY, "why": WAIT_POLICY_WHY},
        "data": {},
        "cases": {},
    }
    pad = load_tokenizer(TINY_RANDOM).pad_token_id
    worker_mib = float(WORKER_MIB_GUESS)
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        for max_length in args.max_length:
            data = Path(tmp) / f"pairs-to-{max_length}"
            results["data"][data.name] = prepare_data(data, args.steps, max_length)
            for size in args.size:
                by_k: dict[str, Any] = results["cases"].setdefault(f"{size}, {data.name}", {})
                job = Job(str(data), pad, size, [], False, args.steps, cpus)
                for k in args.seeds:
                    no_separate = unaffordable(k, worker_mib)
                    by_k[str(k)] = measure_k(k, job, args.rounds, cpus, logs, no_separate)
                    if not no_separate:
                        separate = by_k[str(k)]["ways"][SEPARATE]
                        worker_mib = separate["peak_rss_mib_per_process"]
    results["load_average_after"] = os.getloadavg()
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    before, after = results["load_average_before"], results["load_average_after"]
    print(f"load average {before} before, {after} after")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
