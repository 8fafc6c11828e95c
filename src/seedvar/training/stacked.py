"""K seeds of one model as one: each weight stacked along a leading seed axis, each layer one
batched operation over the seeds, each seed its own random stream.

`stack_models` turns K models of one architecture into one model of the same class and
parameter names whose Linear, LayerNorm and Embedding layers hold the K seeds' weights as
(K, ...) tensors. Its forward is the model's own (transformers' code, unchanged) over K x B
rows, seed-major: rows k*B to (k+1)*B - 1 are seed k's batch and meet only seed k's weights.
Its dropouts draw each seed's masks from that seed's generator, in the order and shapes of its
solo run (its own rows and padded length, `SeedStreams.lengths`), so that a seed trains as it
would alone, whatever K and whoever its neighbours. (torch.func's vmap over stacked modules
would batch the layers too, but draws dropout from one generator for all seeds.)

Unpadded (`packed_logits`): each seed's real tokens only, sequence after sequence in its own row
of (K, N) places (N: the most tokens of any seed), through the dense layers; attention alone
meets each sequence in the padded layout (it has no weights), and each seed's dropout masks are
still drawn in its solo run's padded shapes, then gathered at its real tokens: exact against the
padded path.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface

from seedvar.pretrained import load_model
from seedvar.training.attention import mask_without_sync
from seedvar.training.dropout import attention_dropped_by, keep_mask

ATTENTION = "seedvar_stacked"  # the attention implementation registered below
# the axes of a seed's padded length in the tensors an encoder drops out: hidden states
# (rows, length, width), attention probabilities (rows, heads, length, length), pooled (rows, width)
LENGTH_AXES = {2: (), 3: (1,), 4: (2, 3)}


@dataclass
class Packing:
    """Where the tokens of a packed batch sit in the padded layouts. A packed batch holds K rows
    of N places: row k, seed k's B sequences one after another, then padding places.

    `solo` (K, N): each place's flat index in its seed's solo batch, (B, T_k) padded to its own
    longest (0 for a padding place); `padded` (K x N): its flat index in all K x B sequences
    padded to the longest of all, (K x B, T) (K x B x T, one past the end, for a padding place);
    `attention_mask` (K x B, T): that layout's real tokens; `firsts` (K, B): the place of each
    sequence's first token in its seed's row."""

    solo: torch.Tensor
    padded: torch.Tensor
    attention_mask: torch.Tensor
    firsts: torch.Tensor

    def pin_memory(self) -> Packing:
        """Page-locked."""
        return Packing(*(tensor.pin_memory() for tensor in astuple(self)))


@dataclass
class SeedStreams:
    """Each seed's random stream; and of the batch at hand, each seed's padded length in its
    solo run and, for a packed batch, its `Packing`."""

    generators: list[torch.Generator]
    lengths: list[int] = field(default_factory=list)
    packing: Packing | None = None

    def dropped(self, tensor: torch.Tensor, rate: float) -> torch.Tensor:
        """`tensor` (K x B rows, or K packed rows) with elements zeroed at `rate` and the rest
        scaled by 1 / (1 - rate); each seed's mask drawn from its own generator in the shape of
        its solo run's tensor (its rows, its padded length), the rest (padding) kept."""
        seeds = len(self.generators)
        if len(self.lengths) != seeds:
            raise ValueError(f"dropout needs the padded length of each of {seeds} seeds' batches")
        if self.packing is not None and tensor.dim() == 3:
            return tensor * (self._packed_keep(tensor, rate).to(tensor.dtype) / (1 - rate))
        rows = tensor.shape[0] // seeds
        keep = torch.ones(tensor.shape, dtype=torch.bool, device=tensor.device)
        for seed, (generator, length) in enumerate(zip(self.generators, self.lengths, strict=True)):
            region = [slice(seed * rows, (seed + 1) * rows)] + [slice(None)] * (tensor.dim() - 1)
            for axis in LENGTH_AXES[tensor.dim()]:
                region[axis] = slice(length)
            own = tuple(region)
            keep[own] = keep_mask(keep[own].shape, rate, generator).to(tensor.device)
        return tensor * (keep.to(tensor.dtype) / (1 - rate))

    def _packed_keep(self, tensor: torch.Tensor, rate: float) -> torch.Tensor:
        """The keep mask of packed hidden states (K, N, width): each seed's drawn as its solo
        run's (B, T_k, width), then gathered at the seed's places."""
        assert self.packing is not None
        rows, width = self.packing.firsts.shape[1], tensor.shape[-1]
        keep = torch.empty(tensor.shape, dtype=torch.bool, device=tensor.device)
        for seed, (generator, length) in enumerate(zip(self.generators, self.lengths, strict=True)):
            mask = keep_mask(torch.Size((rows, length, width)), rate, generator).to(tensor.device)
            keep[seed] = mask.view(-1, width)[self.packing.solo[seed]]
        return keep

    def states(self) -> list[torch.Tensor]:
        """The generators' states (for a resumable checkpoint)."""
        return [generator.get_state() for generator in self.generators]

    def restore(self, states: Sequence[torch.Tensor]) -> None:
        """Set the generators to what `states` returned."""
        for generator, state in zip(self.generators, states, strict=True):
            generator.set_state(state)


def initialised(
    name: str, init_seeds: Sequence[int], labels: list[str]
) -> tuple[list[PreTrainedModel], SeedStreams]:
    """Each seed's model as its solo run draws it (`load_model`), and its random stream as that
    run continues it: torch's global generator just after the model's initialisation."""
    models, generators = [], []
    for seed in init_seeds:
        models.append(load_model(name, seed, labels))
        generator = torch.Generator()
        generator.set_state(torch.get_rng_state())
        generators.append(generator)
    return models, SeedStreams(generators)


class StackedLinear(nn.Module):
    """K seeds' `nn.Linear` layers as one batched matrix multiply."""

    def __init__(self, layers: Sequence[nn.Linear]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.stack([layer.weight.detach() for layer in layers]))
        biases = [layer.bias for layer in layers]
        self.bias = (
            nn.Parameter(torch.stack([bias.detach() for bias in biases]))
            if all(bias is not None for bias in biases)
            else None
        )

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        rows = inputs.reshape(self.weight.shape[0], -1, inputs.shape[-1])
        weight = self.weight.transpose(1, 2)
        if self.bias is None:
            outputs = torch.bmm(rows, weight)
        else:
            outputs = torch.baddbmm(self.bias.unsqueeze(1), rows, weight)
        return outputs.reshape(*inputs.shape[:-1], -1)


class StackedLayerNorm(nn.Module):
    """K seeds' `nn.LayerNorm` layers (with weight and bias) as one."""

    def __init__(self, layers: Sequence[nn.LayerNorm]) -> None:
        super().__init__()
        if any(layer.weight is None or layer.bias is None for layer in layers):
            raise ValueError("only a LayerNorm with a weight and a bias can be stacked")
        self.normalized_shape = layers[0].normalized_shape
        self.eps = layers[0].eps
        self.weight = nn.Parameter(torch.stack([layer.weight.detach() for layer in layers]))
        self.bias = nn.Parameter(torch.stack([layer.bias.detach() for layer in layers]))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        rows = inputs.reshape(self.weight.shape[0], -1, inputs.shape[-1])
        normalised = F.layer_norm(rows, self.normalized_shape, eps=self.eps)
        scaled = torch.addcmul(self.bias.unsqueeze(1), normalised, self.weight.unsqueeze(1))
        return scaled.reshape(inputs.shape)


class StackedEmbedding(nn.Module):
    """K seeds' `nn.Embedding` tables as one lookup; the padding row, as nn.Embedding's, gets
    no gradient."""

    def __init__(self, tables: Sequence[nn.Embedding]) -> None:
        super().__init__()
        self.padding_idx = tables[0].padding_idx
        self.weight = nn.Parameter(torch.stack([table.weight.detach() for table in tables]))
        seeds, entries = self.weight.shape[:2]
        self.offsets: torch.Tensor
        offsets = torch.arange(seeds).unsqueeze(1) * entries
        self.register_buffer("offsets", offsets, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        seeds, entries, width = self.weight.shape
        per_seed = ids.reshape(seeds, -1)
        vectors = F.embedding(per_seed + self.offsets, self.weight.reshape(-1, width))
        if self.padding_idx is not None:
            padding = (per_seed == self.padding_idx).unsqueeze(-1)
            vectors = torch.where(padding, vectors.detach(), vectors)
        return vectors.reshape(*ids.shape, width)


class StackedDropout(nn.Module):
    """Dropout at rate `p`, each seed's mask from its own stream (`SeedStreams.dropped`)."""

    def __init__(self, p: float, streams: SeedStreams) -> None:
        super().__init__()
        self.p = p
        self.streams = streams

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return inputs
        return self.streams.dropped(inputs, self.p)


STACKED_LAYERS: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: StackedLinear,
    nn.LayerNorm: StackedLayerNorm,
    nn.Embedding: StackedEmbedding,
}


def stack_models(models: Sequence[PreTrainedModel], streams: SeedStreams) -> PreTrainedModel:
    """One model of the `models`' class and parameter names holding all their weights, stacked
    in their order; each seed's dropout from `streams`. The models must share an architecture
    built of Linear, LayerNorm and Embedding layers (BERT's family) and are left as they were."""
    if len(models) != len(streams.generators):
        raise ValueError(f"{len(models)} models but {len(streams.generators)} random streams")
    stacked = copy.deepcopy(models[0])
    for parent_name, parent in list(stacked.named_modules()):
        for name, child in list(parent.named_children()):
            path = f"{parent_name}.{name}" if parent_name else name
            if type(child) is nn.Dropout:
                setattr(parent, name, StackedDropout(child.p, streams))
            elif type(child) in STACKED_LAYERS:
                layers = [model.get_submodule(path) for model in models]
                setattr(parent, name, STACKED_LAYERS[type(child)](layers))
            elif any(True for _ in child.parameters(recurse=False)):
                raise ValueError(f"cannot stack {path}: a {type(child).__name__}")
    stacked.set_attn_implementation(ATTENTION)
    return stacked


def packed_logits(
    model: PreTrainedModel, inputs: dict[str, torch.Tensor], streams: SeedStreams
) -> torch.Tensor:
    """A stacked BERT classifier's logits (K, B, labels) for packed `inputs` (K, N): input_ids,
    token_type_ids and position_ids, laid out as `streams.packing` says; its pooler reads each
    sequence's first token."""
    packing = streams.packing
    if packing is None:
        raise ValueError("packed inputs need their packing")
    hidden = model.get_submodule("bert.embeddings")(**inputs)
    hidden = model.get_submodule("bert.encoder")(hidden).last_hidden_state
    seeds, rows = packing.firsts.shape
    firsts = hidden.gather(1, packing.firsts.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
    pooled = model.get_submodule("bert.pooler")(firsts.view(seeds * rows, 1, -1))
    logits = model.get_submodule("classifier")(model.get_submodule("dropout")(pooled))
    return logits.view(seeds, rows, -1)


def seed_weights(stacked: PreTrainedModel, seed: int) -> dict[str, torch.Tensor]:
    """The weights of the `seed`-th model stacked, as its own model's state dict."""
    return {name: weight[seed].detach().clone() for name, weight in stacked.named_parameters()}


def attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention over K x B rows (it has no weights: the rows stack as they are); with dropout,
    the probabilities are dropped by each seed's own mask (the module's StackedDropout). Over
    K packed rows, each sequence's tokens are placed in the padded layout to meet each other,
    and placed back."""
    drop = module.get_submodule("dropout")
    if not isinstance(drop, StackedDropout):
        raise TypeError(f"{type(module).__name__}'s dropout is not stacked")
    packing = drop.streams.packing
    if packing is None:
        return _padded_attention(
            module, drop, query, key, value, attention_mask, scaling, dropout, **kwargs
        )
    seeds, heads, places, width = query.shape
    rows, length = packing.attention_mask.shape

    def padded(tensor: torch.Tensor) -> torch.Tensor:
        tokens = tensor.transpose(1, 2).reshape(seeds * places, heads * width)
        layout = tokens.new_zeros(rows * length + 1, heads * width)
        layout = layout.index_copy(0, packing.padded, tokens)[:-1]
        return layout.view(rows, length, heads, width).transpose(1, 2)

    mask = packing.attention_mask[:, None, None, :]
    output, weights = _padded_attention(
        module, drop, padded(query), padded(key), padded(value), mask, scaling, dropout, **kwargs
    )
    layout = F.pad(output.reshape(rows * length, heads * width), (0, 0, 0, 1))
    return layout.index_select(0, packing.padded).view(seeds, places, heads, width), weights


def _padded_attention(
    module: nn.Module,
    drop: StackedDropout,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None,
    dropout: float,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention over K x B padded rows: SDPA, or with dropout its math path (`drop`)."""
    if dropout == 0.0:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, **kwargs
        )
    return attention_dropped_by(drop, query, key, value, attention_mask, scaling)


AttentionInterface.register(ATTENTION, attention)
AttentionMaskInterface.register(ATTENTION, mask_without_sync)
