"""Falcon-H1: Bamba's parts in one parallel block, the Mamba-2 mixer (``mamba``, served as ``linear_attn``) and the
softmax attention (``self_attn``) both reading the block's one pre-norm, with muP multipliers throughout.

Every block adds ``mamba(norm(x)) * ssm_out_multiplier + self_attn(norm(x) *
attention_in_multiplier) * attention_out_multiplier`` to the stream, then
Bamba's ``pre_ff_layernorm`` and ``feed_forward``. So each mixer's
``attention_output`` is its output times its multiplier (what the block adds),
``layer_mid`` is ``layer_input`` plus both, and ``layer_input +
linear_attn.attention_output + self_attn.attention_output + mlp.mlp_output ==
layer_output``. ``attention_norm_output`` is the norm's output, which the
attention reads times ``attention_in_multiplier``. The mixer's own multipliers
(``ssm_in_multiplier``, the ``mup_vector`` on its projection) act before the
scan, so its kernel's values are what the scan reads; the MLP's act inside it.
The logits are ``lm_head``'s times ``lm_head_multiplier``; ``embed_tokens``'s
output is scaled by ``embedding_multiplier`` before the first block.
"""

from typing import Any

from nnterp import Attention
from nnterp.logits import unembed
from nnterp.tiny import TinyConfig

from torch import Tensor

from ..tiny import SSD
from . import bamba

#: the SSD mixer in 8 heads of 8, every muP multiplier away from 1 so that a missed one shows
SIZES = {
    **SSD,
    "mamba_d_ssm": 64,
    "mamba_d_head": 8,
    "attention_in_multiplier": 0.7,
    "attention_out_multiplier": 0.6,
    "ssm_in_multiplier": 0.8,
    "ssm_out_multiplier": 1.3,
    "embedding_multiplier": 2.0,
    "lm_head_multiplier": 0.5,
    "key_multiplier": 0.9,
    "mlp_multipliers": [0.9, 1.1],
    "ssm_multipliers": [1.1, 0.9, 1.2, 0.8, 1.05],
}


class FalconH1Layer(bamba.BambaLayer):
    """A Falcon-H1 block: both mixers on ``input_layernorm``'s output, the Mamba-2 mixer called first, then the MLP."""

    SUBLAYERS = ("linear_attn", "self_attn", "mlp")


def attention_out_multiplier(envoy: Any) -> float:
    """The factor the block applies to the attention's output before adding it."""
    return envoy.parent._module.attn_out_multiplier


class FalconH1Attention(Attention):
    """Falcon-H1's attention: its contribution scaled by ``attention_out_multiplier``."""

    attention_output = Attention.attention_output.scaled(attention_out_multiplier)


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The final norm, ``lm_head``, then the model's ``lm_head_multiplier``."""
    return unembed(model, hidden) * model.text_config.lm_head_multiplier


def ssm_out_multiplier(envoy: Any) -> float:
    """The factor the block applies to the Mamba-2 mixer's output before adding it."""
    return envoy.parent._module.ssm_out_multiplier


class FalconH1Mixer(bamba.BambaMixer):
    """Falcon-H1's Mamba-2 mixer: its contribution scaled by ``ssm_out_multiplier``.

    Without the gated norm (``mamba_rms_norm=False``) the forward multiplies
    the scan's ``y`` by ``silu(z)`` after the kernel, on a decode step as on a
    prompt (since transformers 5.25 the decode update takes no ``z``), so
    ``attention_head_outputs`` is the kernel's output on every call, as on Bamba.
    """

    attention_output = bamba.BambaMixer.attention_output.scaled(ssm_out_multiplier)


FAMILY = bamba.FAMILY.replace(
    name="falcon_h1",
    model_types=("falcon_h1",),
    modeling=("transformers.models.falcon_h1.modeling_falcon_h1",),
    envoys={
        **bamba.FAMILY.envoys,
        "layers.*": FalconH1Layer,
        "layers.*.self_attn": FalconH1Attention,
        "layers.*.linear_attn": FalconH1Mixer,
    },
    project_on_vocab=project_on_vocab,
    tiny={
        # without the gated norm the forward multiplies y by silu(z); and the gated-norm variant, whose norm gates it
        "falcon_h1": TinyConfig("falcon_h1", SIZES),
        "falcon_h1-rmsnorm": TinyConfig("falcon_h1", {**SIZES, "mamba_rms_norm": True}),
    },
    skips={
        "falcon_h1": {
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
        "falcon_h1-rmsnorm": {
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
    },
)
