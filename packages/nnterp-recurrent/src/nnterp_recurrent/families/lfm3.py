"""LFM3: LFM2's conv and attention blocks in a sandwich: a norm on each sublayer's output before the block adds it.

``x + post_operator_norm(mixer(operator_norm(x)))``, then
``+ post_ffn_norm(feed_forward(ffn_norm(.)))``, under Gemma's names
(``post_attention_layernorm``, ``pre_feedforward_layernorm``,
``post_feedforward_layernorm``; identities where ``use_sandwich_norm`` is off):
either mixer's ``attention_output`` and the MLP's ``mlp_output`` are the post
norms' outputs. The attention is Qwen3's with a sigmoid gate per head before
``o_proj`` (``use_attention_gate``), sliding on some blocks; the conv mixer is
LFM2's, with a window of ``conv_L_cache`` (7) tokens.
"""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import GatedAttention, PostNormMlp, SandwichLayer
from nnterp.tiny import TinyConfig

from transformers.models.lfm3.modeling_lfm3 import Lfm3ShortConv

from ..components import ShortConvolution
from . import lfm2


class PostNormShortConvolution(ShortConvolution):
    """A short convolution whose contribution is its post norm's output, ``post_attention_layernorm(conv(...))``."""

    attention_output = ShortConvolution.attention_output.at("../post_attention_layernorm.output")


class Lfm3Attention(GatedAttention):
    """Qwen3's attention gated per head before ``o_proj``, its contribution the post norm's output."""

    attention_output = GatedAttention.attention_output.at("../post_attention_layernorm.output", select=None)


class Lfm3Mlp(PostNormMlp):
    """LFM2's SwiGLU, its contribution the post norm's output."""

    mlp_activation = lfm2.Lfm2Mlp.mlp_activation


FAMILY = lfm2.FAMILY.replace(
    name="lfm3",
    model_types=("lfm3",),
    modeling=("transformers.models.lfm3.modeling_lfm3",),
    rename={
        **{
            native: standard for native, standard in lfm2.RENAME.items() if native != "self_attn.out_proj"
        },  # o_proj here
        Lfm3ShortConv: "linear_attn",
        "post_operator_norm": "post_attention_layernorm",
        "ffn_norm": "pre_feedforward_layernorm",
        "post_ffn_norm": "post_feedforward_layernorm",
    },
    envoys={
        **lfm2.FAMILY.envoys,
        "layers.*": SandwichLayer,
        "layers.*.self_attn": Lfm3Attention,
        "layers.*.mlp": Lfm3Mlp,
        "layers.*.linear_attn": PostNormShortConvolution,
    },
    # conv, sliding attention, conv, full attention: the window (7) spans the kit's shorter prompts whole
    tiny={
        "lfm3": TinyConfig(
            "lfm3",
            {
                "num_hidden_layers": 4,
                "layer_types": ["conv", "sliding_attention", "conv", "full_attention"],
                "sliding_window": 4,
            },
        )
    },
    skips={"lfm3": lfm2.SKIPS},
)
