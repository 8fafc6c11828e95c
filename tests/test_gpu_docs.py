"""What docs/performance.md, docs/ray.md and params.yaml tell a user planning a GPU study, held
against the code they describe: what `ray.gpus_per_seed: auto` resolves to, the disk a 100-seed
study of BERT-base needs (from the model's and its optimizer's sizes), and that a GPU seed
trained again is not promised to be identical with its first training."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from seedvar.config import load_config
from seedvar.scale.cluster import ClusterInfo, seed_resources
from tests.helpers import REPO

GB = 1e9


def page(relative: str) -> str:
    """A doc's text, its lines joined (a sentence may wrap anywhere; a YAML comment's `#`s
    dropped)."""
    lines = [line.strip().removeprefix("#") for line in (REPO / relative).read_text().splitlines()]
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize(
    ("memory", "per_gpu"), [(80 * GB, 4), (141 * GB, 4), (24 * GB, 2), (16 * GB, 1)]
)
def test_auto_shares_each_gpu_of_this_machine_and_gives_one_gpu_a_seed_on_a_cluster(
    monkeypatch: pytest.MonkeyPatch, memory: float, per_gpu: int
) -> None:
    """torch.cuda's answer for the GPU's memory replaced: this machine has none."""
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda _: SimpleNamespace(total_memory=memory)
    )
    config = load_config(None, profile="paper")
    node = {"CPU": 64.0, "GPU": 8.0}
    here = ClusterInfo(None, [node], None)
    resources = seed_resources(config, here)
    assert (resources.gpus, here.slots(resources)) == (1 / per_gpu, 8 * per_gpu)
    small = ClusterInfo(None, [{"CPU": 16.0, "GPU": 8.0}], None)  # no more seeds than CPUs
    assert small.slots(seed_resources(config, small)) == min(16, 8 * per_gpu)
    cluster = ClusterInfo("ray://head:10001", [node, node], None)
    resources = seed_resources(config, cluster)
    assert (resources.gpus, cluster.slots(resources)) == (1.0, 16)
    ray, params = page("docs/ray.md"), page("params.yaml")
    assert "(`auto`: one when the cluster has GPUs" not in ray  # what they said before
    assert "gpus_per_seed: auto is one GPU each" not in params
    said = "at most 4 (4 on an 80 or 141 GB GPU, 2 on 24 GB, 1 on 16 GB;"
    assert said in ray and "an 8-GPU node trains up to 32 seeds at once" in ray
    assert "on a cluster ( `ray.address` set), one GPU a seed" in ray.replace("(`", "( `")
    assert "at most 4, so up to 32 at once on 8 GPUs of 80 GB, and is one GPU a seed" in params


@pytest.mark.slow  # BERT-base built and stepped once: 20 s on 2 busy cores
def test_the_disk_of_a_100_seed_study_follows_from_bert_bases_size() -> None:
    """BERT-base with a 3-way head, built from transformers' defaults (bert-base-uncased's
    shape), and AdamW's state after one step: the checkpoint of a running seed holds both."""
    from transformers import BertConfig, BertForSequenceClassification

    model = BertForSequenceClassification(BertConfig(num_labels=3))
    parameters = list(model.parameters())
    weights = sum(p.numel() * p.element_size() for p in parameters) / GB  # fp32
    optimizer = torch.optim.AdamW(parameters)
    for parameter in parameters:
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    moments = sum(
        t.numel() * t.element_size()
        for state in optimizer.state.values()
        for t in state.values()
        if t.dim() > 0
    )
    checkpoint = weights + moments / GB
    at_once = 8 * 4  # an 8-GPU node of 80 GB GPUs under `auto` (the test above)
    text = page("docs/performance.md")
    assert "0.44 GB in fp32" in text and round(weights, 2) == 0.44
    assert f"{weights:.2f} GB a seed, {100 * weights:.0f} GB for 100" in text
    assert round(checkpoint, 1) == 1.3 and "1.3 GB per running seed" in text
    assert f"{at_once * checkpoint:.0f} GB for 32 seeds at once" in text
    cuda = 10  # the CUDA environment, as the page measures it from the wheels
    need = 100 * weights + at_once * checkpoint + cuda
    assert 90 <= need <= 100 and "plan for **90-100 GB on an 8-GPU node**" in text
    assert "So about 50 GB on the node" not in text  # what it said before


def test_a_gpu_seed_trained_again_is_said_to_be_close_not_identical() -> None:
    performance, ray = page("docs/performance.md"), page("docs/ray.md")
    said = "A GPU seed trained again is close to its first training, not identical with it."
    assert said in performance
    assert "does not turn on `torch.use_deterministic_algorithms`" in performance
    assert "On a GPU a seed trained again or resumed is close to its first training" in ray
