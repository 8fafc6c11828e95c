"""Stacked training (training/stacked*.py): K seeds trained as one, each exact against its solo
run through today's path (`trainer_for` + `fit`), in fp32 on the CPU: every step's loss and the
final logits within TOLERANCE and the same validation accuracy, whatever K and whoever its
neighbours, padded or unpadded; a diverged seed is reported while its neighbours train on as
alone; a resumed run retraces the uninterrupted one."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import datasets
import lightning as L
import pytest
import torch
from transformers import BertForSequenceClassification

from seedvar.offline_models import TINY_RANDOM
from seedvar.pretrained import load_model, load_tokenizer
from seedvar.training.datamodule import NLIDataModule, PadToLongest
from seedvar.training.fit import fit, trainer_for
from seedvar.training.module import NLIClassifier
from seedvar.training.resume import ResumeCheckpoint
from seedvar.training.stacked import initialised, seed_weights
from seedvar.training.stacked_data import PackEachSeed, PadEachSeed, StackedDataModule
from seedvar.training.stacked_module import StackedClassifier

pytestmark = pytest.mark.slow  # each trains tiny models: 5 to 30 s on 2 busy cores

LABELS = ["entailment", "neutral", "contradiction"]
BATCH = 8
STEPS = 8  # 1.33 epochs of 48 rows: a second epoch's order, a validation between
CLIP = 0.05  # below every step's gradient norm: each seed's clipping is exercised
# fp32 on the CPU, relative to the largest value compared: the stacked path's batched matmuls
# and per-seed norms round differently from the solo path's (measured: at most 1.1e-7 on the
# losses and 3.2e-7 on the final logits, of K = 1, K = 3 and K = 3 unpadded)
TOLERANCE = 1e-6

TOKENIZER = load_tokenizer(TINY_RANDOM)
# pairs of 11 to 18 tokens: each seed's batches are padded to lengths of their own
ROWS = datasets.Dataset.from_list(
    [
        {
            **TOKENIZER(f"a man {'very ' * (i % 7)}tall sleeps", f"the {i} men sleep"),
            "labels": i % 3,
        }
        for i in range(48)
    ]
)
PROBES = PadToLongest(TOKENIZER.pad_token_id)([ROWS[i] for i in range(0, 48, 6)])


class Losses(L.Callback):
    """Each training step's loss (the solo path's), or each seed's (the stacked path's)."""

    def __init__(self) -> None:
        self.steps: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
        self.steps.append(outputs.get("seed_losses", outputs["loss"]).detach().clone())


class Poison(L.Callback):
    """Before step `step`, seed number `seed`'s classifier weights become NaN."""

    def __init__(self, seed: int, step: int) -> None:
        self.seed, self.step = seed, step

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:  # noqa: ANN001
        if trainer.global_step == self.step:
            with torch.no_grad():
                module.model.classifier.weight[self.seed] = float("nan")


def trainer(callbacks: list[L.Callback]) -> L.Trainer:
    return trainer_for("cpu", "32-true", 2, STEPS, CLIP, 10**6, callbacks)


@dataclass(frozen=True)
class Run:
    """What a seed's run is compared by: its loss at each step, its final logits on PROBES
    and its last validation accuracy."""

    losses: torch.Tensor
    logits: torch.Tensor
    accuracy: float

    def matches(self, alone: Run) -> None:
        """Within TOLERANCE of its solo run `alone` (relative to the largest value)."""
        for name in ("losses", "logits"):
            mine, theirs = getattr(self, name), getattr(alone, name)
            difference = ((mine - theirs).abs().max() / theirs.abs().max()).item()
            assert difference <= TOLERANCE, f"{name}: {difference:.1e} from the solo run's"
        assert self.accuracy == alone.accuracy


@functools.cache
def solo(init_seed: int, data_seed: int) -> Run:
    """One seed through today's path."""
    losses = Losses()
    module = NLIClassifier(
        load_model(TINY_RANDOM, init_seed, LABELS), 1e-3, 0.01, 0.25, STEPS, log_every_n_steps=10**6
    )
    data = NLIDataModule(ROWS, ROWS, TOKENIZER.pad_token_id, BATCH, 16, data_seed, False)
    run = trainer([losses])
    model = fit(run, module, data).eval()
    with torch.no_grad():
        logits = model(**PROBES).logits
    return Run(torch.stack(losses.steps), logits, float(run.callback_metrics["val/accuracy"]))


def stacked(
    init_seeds: list[int],
    data_seeds: list[int],
    callbacks: tuple[L.Callback, ...] = (),
    checkpoint: Path | None = None,
    unpadded: bool = False,
) -> tuple[StackedClassifier, list[Run]]:
    """Seeds trained stacked (numbered 0 to K - 1), from `checkpoint` if given, on packed
    batches if `unpadded`: the module and each seed's run, its final logits from its own model
    loaded with its weights (as a seed is published)."""
    losses = Losses()
    models, streams = initialised(TINY_RANDOM, init_seeds, LABELS)
    seeds = list(range(len(init_seeds)))
    module = StackedClassifier(
        models, streams, seeds, 1e-3, 0.01, 0.25, STEPS, log_every_n_steps=10**6
    )
    pad = TOKENIZER.pad_token_id
    data = StackedDataModule(ROWS, ROWS, pad, BATCH, 16, data_seeds, False, unpadded=unpadded)
    run = trainer([losses, *callbacks])
    run.fit(module, datamodule=data, ckpt_path=checkpoint, weights_only=False)
    runs = []
    for seed in seeds:
        own = BertForSequenceClassification(models[seed].config).eval()
        own.load_state_dict(seed_weights(module.model, seed))
        with torch.no_grad():
            logits = own(**PROBES).logits
        accuracy = float(run.callback_metrics[f"val/accuracy/seed-{seed}"])
        runs.append(Run(torch.stack(losses.steps)[:, seed], logits, accuracy))
    return module, runs


@pytest.fixture(autouse=True)
def no_progress_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TQDM_DISABLE", "1")


def test_one_stacked_seed_trains_as_todays_path():
    _, [run] = stacked([3], [5])
    run.matches(solo(3, 5))


def test_each_of_three_stacked_seeds_trains_as_it_does_alone():
    init_seeds, data_seeds = [0, 1, 2], [10, 11, 12]
    module, runs = stacked(init_seeds, data_seeds)
    assert module.diverged() == {}
    for run, init_seed, data_seed in zip(runs, init_seeds, data_seeds, strict=True):
        run.matches(solo(init_seed, data_seed))
    assert not torch.allclose(runs[0].logits, runs[1].logits)  # the seeds differ


def test_a_diverged_seed_is_reported_and_its_neighbours_train_as_alone():
    module, runs = stacked([0, 1, 2], [10, 11, 12], (Poison(seed=1, step=3),))
    assert module.diverged() == {1: 3}
    assert runs[1].losses[3:].isnan().all() and runs[1].losses[:3].isfinite().all()
    runs[0].matches(solo(0, 10))
    runs[2].matches(solo(2, 12))


def test_a_stacked_run_resumed_mid_epoch_retraces_the_uninterrupted_run(tmp_path: Path):
    saved = ResumeCheckpoint(tmp_path / "resume.ckpt", None, every_n_steps=5)
    _, whole = stacked([0, 1], [10, 11], (saved,))  # saved before step 5, in the first epoch
    _, resumed = stacked([0, 1], [10, 11], checkpoint=tmp_path / "resume.ckpt")
    for seed in (0, 1):
        assert torch.equal(resumed[seed].losses, whole[seed].losses[5:])
        assert torch.equal(resumed[seed].logits, whole[seed].logits)


def test_a_packed_batch_holds_each_seeds_real_tokens_only_in_the_padded_ones_places():
    rows = [ROWS[i] for i in range(3 * BATCH)]
    padded = PadEachSeed(TOKENIZER.pad_token_id, 3)(rows)
    packed = PackEachSeed(TOKENIZER.pad_token_id, 3)(rows)
    assert packed.packing is not None and packed.lengths == padded.lengths
    real = padded.inputs["attention_mask"].view(3, -1).sum(dim=1)
    assert packed.inputs["input_ids"].shape == (3, real.max())
    assert real.max() < padded.inputs["input_ids"].numel() / 3  # the padding left out
    places = torch.full((padded.inputs["input_ids"].numel() + 1,), TOKENIZER.pad_token_id)
    places[packed.packing.padded] = packed.inputs["input_ids"].flatten()
    assert torch.equal(places[:-1].view_as(padded.inputs["input_ids"]), padded.inputs["input_ids"])


def test_unpadded_stacked_seeds_train_as_they_do_alone_padded():
    module, runs = stacked([0, 1, 2], [10, 11, 12], unpadded=True)
    assert module.diverged() == {}
    for k, run in enumerate(runs):
        run.matches(solo(k, 10 + k))
