"""The LightningModule and prediction: dropout on while training, SDPA, torch.compile, order."""

from __future__ import annotations

from pathlib import Path

import datasets
import lightning as L
import numpy as np
import pytest
import torch
from transformers import BertForSequenceClassification

from seedvar.config import load_config
from seedvar.data.sources import canonical, read_source
from seedvar.data.tokenized import tokenize_cached
from seedvar.pretrained import OFFLINE_MINILM, TINY_RANDOM, load_model, load_tokenizer
from seedvar.training import device
from seedvar.training.datamodule import NLIDataModule
from seedvar.training.dropout import BitDropout, bit_dropout, keep_mask
from seedvar.training.module import NLIClassifier
from seedvar.training.predict import predict_logits
from tests.helpers import OFFLINE

TASK = load_config(None).task
LABELS = TASK.labels


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> tuple[datasets.Dataset, int]:
    """64 real MNLI pairs, tokenized (lengths vary), and the pad token id."""
    raw, origin = read_source(str(OFFLINE / "mnli" / "validation_matched.parquet"), OFFLINE)
    frame = canonical(raw, TASK.fields, TASK.text, LABELS, origin)
    tokenizer = load_tokenizer(TINY_RANDOM)
    cache = tmp_path_factory.mktemp("cache")
    tokenized = tokenize_cached(frame.head(64), tokenizer, 128, cache, TASK.text)
    return tokenized, tokenizer.pad_token_id


class TrainingModes(L.Callback):
    """Records, per training batch, whether every module of the model is in training mode."""

    def __init__(self) -> None:
        self.all_training: list[bool] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:  # noqa: ANN001
        self.all_training.append(all(m.training for m in module.model.modules()))


def fit(
    module: NLIClassifier,
    data: datasets.Dataset,
    pad_id: int,
    steps: int,
    callbacks: list[L.Callback],
    precision: str = "32-true",
) -> L.Trainer:
    datamodule = NLIDataModule(
        data, data, pad_id, batch_size=8, eval_batch_size=32, data_seed=0, group_by_length=True
    )
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=steps,
        precision=precision,
        gradient_clip_val=1.0,
        logger=False,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(module, datamodule=datamodule)
    return trainer


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_each_precision_trains_with_gradient_clipping_and_fused_adamw(examples, precision: str):
    """bf16-mixed is the paper profile's GPU precision: its fused AdamW step comes after
    seedvar's own clipping (Lightning's refuses a fused optimizer under mixed precision)."""
    data, pad_id = examples
    module = ClipRecorder(load_model(TINY_RANDOM, 0, LABELS), 1e-3, 0.0, 0.0, total_steps=2)
    module.after_clipping = []
    trainer = fit(module, data, pad_id, steps=2, callbacks=[], precision=precision)
    assert trainer.global_step == 2
    assert trainer.optimizers[0].defaults["fused"] is True
    assert len(module.after_clipping) == 2 and max(module.after_clipping) <= 1.0 + 1e-4


def test_clipping_scales_a_large_gradient_to_the_clip_norm():
    module = NLIClassifier(load_model(TINY_RANDOM, 0, LABELS), 1e-3, 0.0, 0.0, total_steps=1)
    for parameter in module.model.parameters():
        parameter.grad = torch.full_like(parameter, 3.0)
    before = total_norm(module)
    module.configure_gradient_clipping(None, gradient_clip_val=0.5)  # type: ignore[arg-type]
    assert before > 100 and total_norm(module) == pytest.approx(0.5, rel=1e-3)
    module.configure_gradient_clipping(None, gradient_clip_val=None)  # type: ignore[arg-type]
    assert total_norm(module) == pytest.approx(0.5, rel=1e-3)  # no clip value: untouched


def total_norm(module: NLIClassifier) -> float:
    grads = [p.grad for p in module.model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))


class ClipRecorder(NLIClassifier):
    """NLIClassifier that records the gradients' total norm right after it clips them."""

    after_clipping: list[float]

    def configure_gradient_clipping(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().configure_gradient_clipping(*args, **kwargs)
        self.after_clipping.append(total_norm(self))


def test_dropout_is_on_while_training_a_model_handed_over_in_eval_mode(examples):
    data, pad_id = examples
    model = load_model(TINY_RANDOM, 0, LABELS).eval()  # as from_pretrained returns it
    modes = TrainingModes()
    fit(
        NLIClassifier(model, 1e-3, 0.0, 0.0, total_steps=3),
        data,
        pad_id,
        steps=3,
        callbacks=[modes],
    )
    assert modes.all_training == [True, True, True]


def test_attention_is_pytorch_sdpa(examples):
    data, pad_id = examples
    model = load_model(TINY_RANDOM, 0, LABELS).eval()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        predict_logits(model, data, pad_id, batch_size=64)
    ops = {event.name for event in profile.events()}
    assert "aten::scaled_dot_product_attention" in ops


def test_predictions_come_back_in_row_order_whatever_the_batching(examples):
    data, pad_id = examples
    model = load_model(TINY_RANDOM, 0, LABELS).eval()
    one_by_one = predict_logits(model, data, pad_id, batch_size=1)
    with torch.inference_mode():
        row = {name: torch.tensor([values]) for name, values in data[0].items() if name != "labels"}
        first = model(**row).logits[0].numpy()
    np.testing.assert_allclose(one_by_one[0], first, atol=1e-5)
    for batch_size in (7, 64):
        np.testing.assert_allclose(
            predict_logits(model, data, pad_id, batch_size), one_by_one, atol=1e-5
        )


def test_bf16_predictions_stay_close_to_full_precision(examples):
    data, pad_id = examples
    model = load_model(TINY_RANDOM, 0, LABELS).eval()
    full = predict_logits(model, data, pad_id, batch_size=16)
    bf16 = predict_logits(model, data, pad_id, batch_size=16, autocast=torch.bfloat16)
    assert not np.array_equal(full, bf16)  # the autocast took effect
    np.testing.assert_allclose(bf16, full, atol=2e-2)


@pytest.mark.slow
def test_compiled_model_trains_and_keeps_its_weight_names(examples, tmp_path: Path):
    data, pad_id = examples
    plain = load_model(TINY_RANDOM, 0, LABELS)
    names = set(plain.state_dict())
    model = load_model(TINY_RANDOM, 0, LABELS)
    traced = []  # a forward hook runs at trace time too: there is_compiling() is True
    model.register_forward_pre_hook(lambda *_: traced.append(torch.compiler.is_compiling()))
    module = NLIClassifier(model, 1e-3, 0.0, 0.0, total_steps=2, compile=True)
    fit(module, data, pad_id, steps=2, callbacks=[])
    assert any(traced)
    assert set(module.model.state_dict()) == names
    assert any(
        not torch.equal(a, b)
        for a, b in zip(plain.parameters(), module.model.parameters(), strict=True)
    )
    module.model.save_pretrained(tmp_path)
    reloaded = type(plain).from_pretrained(tmp_path).eval()
    np.testing.assert_allclose(
        predict_logits(module.model, data, pad_id, 32),
        predict_logits(reloaded, data, pad_id, 32),
        atol=1e-4,
    )


def test_a_local_model_with_another_head_gets_a_new_three_way_head(tmp_path: Path):
    config = load_model(TINY_RANDOM, 0, LABELS).config
    config.num_labels = 2
    two_way = BertForSequenceClassification(config)
    two_way.save_pretrained(tmp_path)
    model = load_model(str(tmp_path), 0, LABELS)
    assert model.classifier.weight.shape == (3, config.hidden_size)
    assert model.config.id2label == {0: "entailment", 1: "neutral", 2: "contradiction"}
    assert torch.equal(model.bert.pooler.dense.weight, two_way.bert.pooler.dense.weight)


@pytest.mark.parametrize("native", [False, True])
def test_bf16_asked_for_on_a_cpu_without_it_is_warned_about_and_auto_is_not(monkeypatch, native):
    monkeypatch.setattr(device, "native_cpu_bf16", lambda: native)
    forced = load_config(None, ["train.precision=bf16-mixed", "train.accelerator=cpu"])
    warning = device.slow_bf16_here(forced)
    if native:
        assert warning is None
    else:
        assert warning.startswith("train.precision=bf16-mixed on a CPU without native bf16 (")
        assert warning.endswith("'auto' picks fp32")
        evaluation = forced.model_copy(
            update={"train": forced.train.model_copy(update={"eval_precision": "bf16"})}
        )
        assert device.slow_bf16_here(evaluation).startswith(
            "train.precision=bf16-mixed and train.eval_precision=bf16 on"
        )
    assert device.slow_bf16_here(load_config(None, ["train.accelerator=cpu"])) is None


def test_bit_dropout_masks_drop_at_the_models_rate_and_follow_the_seed():
    torch.manual_seed(0)
    first = keep_mask(torch.Size([1000, 1000]), 0.1)
    torch.manual_seed(0)
    again = keep_mask(torch.Size([1000, 1000]), 0.1)
    torch.manual_seed(1)
    other = keep_mask(torch.Size([1000, 1000]), 0.1)
    assert torch.equal(first, again) and not torch.equal(first, other)
    dropped_share = 1 - first.float().mean().item()
    assert abs(dropped_share - 6554 / 65536) < 4 * (0.1 * 0.9 / 1e6) ** 0.5  # 4 standard errors
    assert keep_mask(torch.Size([7]), 0.0).all()


def _padded_pairs() -> dict[str, torch.Tensor]:
    """16 real MNLI pairs of different lengths, padded to the longest."""
    raw, origin = read_source(str(OFFLINE / "mnli" / "validation_matched.parquet"), OFFLINE)
    frame = canonical(raw, TASK.fields, TASK.text, LABELS, origin).head(16)
    tokenizer = load_tokenizer(TINY_RANDOM)
    texts = [frame[field].tolist() for field in TASK.text]
    return dict(tokenizer(*texts, padding=True, return_tensors="pt"))


def test_training_with_bit_dropout_computes_the_models_attention_and_leaves_it_as_it_was(
    tmp_path: Path,
):
    batch = _padded_pairs()
    assert (batch["attention_mask"] == 0).any()  # padding the attention must mask
    model = load_model(TINY_RANDOM, 0, LABELS).eval()
    with torch.no_grad():
        plain = model(**batch).logits
    for module in model.modules():  # dropout that keeps every element: the math path alone
        if isinstance(module, torch.nn.Dropout):
            module.p = 1e-9
    with bit_dropout(model), torch.no_grad():
        model.train()
        assert model.config._attn_implementation == "seedvar_bit_dropout"
        assert not any(type(m) is torch.nn.Dropout for m in model.modules())
        masked = model(**batch).logits
    torch.testing.assert_close(masked, plain, atol=1e-5, rtol=1e-5)
    assert model.config._attn_implementation == "sdpa"
    assert all(type(m) is not BitDropout for m in model.modules())
    model.save_pretrained(tmp_path)
    assert "seedvar_bit_dropout" not in (tmp_path / "config.json").read_text()


def test_bit_dropout_drops_while_training_and_a_seed_repeats_it():
    batch = _padded_pairs()
    model = load_model(TINY_RANDOM, 0, LABELS).train()
    with bit_dropout(model), torch.no_grad():
        torch.manual_seed(5)
        first = model(**batch).logits
        torch.manual_seed(5)
        again = model(**batch).logits
        second = model(**batch).logits
        model.eval()
        without = model(**batch).logits
    assert torch.equal(first, again) and not torch.equal(first, second)
    assert not torch.allclose(first, without)


def test_a_pretrained_encoder_under_a_new_head_loads_without_a_word(capfd):
    """transformers' load report ("classifier.weight MISSING", "newly initialized") and its
    progress bar would print once per seed in every launch."""
    model = load_model(OFFLINE_MINILM, 0, LABELS)
    assert model.classifier.weight.shape == (3, model.config.hidden_size)
    assert capfd.readouterr() == ("", "")
