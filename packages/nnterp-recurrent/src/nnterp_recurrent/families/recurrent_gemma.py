"""RecurrentGemma (Griffin): recurrent blocks (``linear_attn``, an RG-LRU) and local attention blocks, each with a gated MLP.

A pre-norm block, ``x + temporal_block(temporal_pre_norm(x))`` then
``+ mlp_block(channel_pre_norm(.))``, whichever the temporal block is; the
model calls both ``temporal_block``, aliased by class. The embeddings are
scaled by ``sqrt(hidden_size)`` in the model's forward, and the logits
softcapped at ``logits_soft_cap``.

transformers 5.25 numbers a call continuing a cache from 0 (the cache's
length is read off its first layer, a recurrent one that counts nothing):
the family's load hook bridges it (``transformers_bridge.continue_positions``).
"""

import dataclasses
from typing import Any

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import Attention, Layer, Mlp
from nnterp.tiny import TinyConfig

import torch
from transformers.models.recurrent_gemma import modeling_recurrent_gemma as modeling

from ..components.rg_lru import RealGatedLRU
from ..family import RecurrentFamily
from ..transformers_bridge import continue_positions


def project_on_vocab(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """``cap * tanh(lm_head(norm(hidden)) / cap)``, the model's softcap at ``logits_soft_cap``."""
    cap = model._module.config.logits_soft_cap
    return torch.tanh(model.lm_head(model.norm(hidden)) / cap) * cap


class GriffinLayer(Layer):
    """A RecurrentGemma block: the default pre-norm block, whose recurrent mixer's conv sees left padding."""

    def padding_changes(self) -> str | None:
        """Why a left-padded row differs from its prompt alone on a recurrent block: its conv runs over the pads."""
        if "linear_attn" not in self.__dict__:
            return None
        return (
            "RecurrentGemma's recurrent block runs its short conv (conv_1d, conv1d_width taps) over every position, "
            "the model masking none: a left-padded row's first tokens read the pads' inputs, which its prompt alone "
            "does not have (the RG-LRU itself resets where the row's positions start)"
        )


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class RecurrentGemmaFamily(RecurrentFamily):
    """RecurrentGemma's family: on each load, a continued call is numbered from the tokens its cache holds."""

    def built(self, model: Any) -> None:
        """Bridge transformers 5.25's positions of a continued call on this model (``continue_positions``)."""
        continue_positions(model)


FAMILY = RecurrentGemmaFamily(
    name="recurrent_gemma",
    model_types=("recurrent_gemma",),
    modeling=(modeling.__name__,),
    rename={
        "model.layers": "layers",
        "model.embed_tokens": "embed_tokens",
        "model.final_norm": "norm",
        "temporal_pre_norm": "input_layernorm",
        "channel_pre_norm": "post_attention_layernorm",
        "mlp_block": "mlp",
        modeling.RecurrentGemmaRecurrentBlock: "linear_attn",
        modeling.RecurrentGemmaAttention: "self_attn",
    },
    envoys={
        "layers.*": GriffinLayer,
        modeling.RecurrentGemmaAttention: Attention,
        modeling.RecurrentGemmaRecurrentBlock: RealGatedLRU,
        "layers.*.mlp": Mlp,
    },
    # two recurrent blocks and a local attention block, the model's own pattern: a model of recurrent blocks alone
    # cannot run (it reads the cache's length off an attention block)
    tiny={"recurrent_gemma": TinyConfig("recurrent_gemma", {"num_hidden_layers": 3})},
    project_on_vocab=project_on_vocab,
    skips={"recurrent_gemma": {"padded_rows_match_alone": "RecurrentGemma's recurrent block runs its short conv"}},
)
