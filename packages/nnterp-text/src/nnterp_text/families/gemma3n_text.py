"""Gemma-3n (text): Gemma-2's sandwich sublayers inside AltUp, which carries several residual streams per token.

Each block is one AltUp step, the component ``nnterp_text.components.altup``
(``AltUpLayer``, where the streams and their identities are described); the
attention is Gemma-2's post-normed one, its output averaged into the active
stream (``LaurelAttention``). After the last block the model maps streams
``1..`` back through ``altup_unembed_projections`` to the first stream's
magnitude and averages the streams before the final norm:
``project_on_vocab`` does the same to any block's streams, so the logit lens
works unchanged.
"""

from typing import Any

from nnterp import PostNormAttention, TinyConfig
from nnterp.logits import softcapped

import torch
from torch import Tensor

from ..components.altup import CORRECT as CORRECT
from ..components.altup import PREDICT as PREDICT
from ..components.altup import AltUpLayer, averaged
from . import gemma2


class LaurelAttention(PostNormAttention):
    """The attention whose post-normed output the block averages with LAuReL's and the active stream: it adds it divided by ``sqrt(2)``."""

    attention_output = PostNormAttention.attention_output.scaled(averaged)


def collapsed_for_the_head(model: Any, hidden: Tensor) -> Tensor:
    """The model's own collapse of the streams, then the final norm, ``lm_head`` and the softcap; one stream as it is.

    As after the last block: stream 0 as it is, each other stream through its
    ``altup_unembed_projections`` and rescaled to stream 0's root-mean-square,
    then their mean.
    """
    if hidden.ndim == 4:
        text = model.norm.parent
        first = hidden[:, :, 0]
        target = torch.mean(first**2, dim=-1, keepdim=True) ** 0.5
        streams = [first]
        for index in range(1, hidden.shape[2]):
            projected = text.altup_unembed_projections[index - 1](hidden[:, :, index]).to(first.dtype)
            magnitude = torch.sqrt(torch.mean(projected**2, dim=-1, keepdim=True).clamp(min=1e-5))
            streams.append(projected * target / magnitude)
        hidden = torch.mean(torch.stack(streams), dim=0)
    return softcapped(model, hidden)


FAMILY = gemma2.FAMILY.replace(
    name="gemma3n_text",
    model_types=("gemma3n_text",),
    envoys={**gemma2.FAMILY.envoys, "layers.*": AltUpLayer, "layers.*.self_attn": LaurelAttention},
    project_on_vocab=collapsed_for_the_head,
    tiny={
        "gemma3n_text": TinyConfig(
            "gemma3n_text",
            {
                "num_hidden_layers": 4,
                "layer_types": ["sliding_attention", "full_attention"] * 2,
                "num_kv_shared_layers": 2,
                "hidden_size_per_layer_input": 16,
                "vocab_size_per_layer_input": 320,
                "laurel_rank": 8,
                "sliding_window": 4,
                "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0],
                "intermediate_size": 128,
            },
        )
    },
)
