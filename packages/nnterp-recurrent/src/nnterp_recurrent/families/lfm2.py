"""LFM2: a hybrid of gated short-convolution blocks (``conv``, reachable as ``linear_attn``) and softmax attention blocks.

``config.layer_types`` says which mixer each block has; either is pre-normed
by ``operator_norm`` (``input_layernorm``) and its ``attention_output`` is what
the block adds, then the feed-forward (``feed_forward``, ``mlp``: ``w1``, ``w3``,
``w2``, a functional SiLU) pre-normed by ``ffn_norm``. The attention is the
shared interface's, with per-head norms on the queries and keys and its
projection called ``out_proj``. The final norm is ``embedding_norm``.
"""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import Mlp
from nnterp.families import default
from nnterp.tiny import TinyConfig

from transformers.models.lfm2.modeling_lfm2 import Lfm2ShortConv

from ..components import ShortConvolution
from ..components.short_convolution import NO_GATES, NO_TOKEN_STATE
from ..family import RecurrentFamily


class Lfm2Mlp(Mlp):
    """LFM2's SwiGLU, ``w2(silu(w1(x)) * w3(x))``: its activation is a functional SiLU of the forward, not a module."""

    mlp_activation = Mlp.mlp_activation.at("source.F_silu_0.output")


#: the recurrent checks a short convolution has nothing to judge with
SKIPS = {"gates_in_range": NO_GATES, "written_state_continues": NO_TOKEN_STATE}

#: a conv block, an attention block, a conv block: the window spans several tokens of the kit's prompts
TINY = {"num_hidden_layers": 3, "layer_types": ["conv", "full_attention", "conv"]}

#: LFM2's names, less its mixer's class (each sibling names its own, since the mixer's Conv1d is called conv too)
RENAME = {
    "model.layers": "layers",
    "model.embed_tokens": "embed_tokens",
    "model.embedding_norm": "norm",
    "operator_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "feed_forward": "mlp",
    "self_attn.out_proj": "self_attn.o_proj",
    "w1": "gate_proj",
    "w3": "up_proj",
    "w2": "down_proj",
}

FAMILY = RecurrentFamily(
    name="lfm2",
    model_types=("lfm2",),
    modeling=("transformers.models.lfm2.modeling_lfm2",),
    # the mixer by class: its own depthwise Conv1d is called conv too
    rename={**RENAME, Lfm2ShortConv: "linear_attn"},
    envoys={**default.FAMILY.envoys, "layers.*.mlp": Lfm2Mlp, "layers.*.linear_attn": ShortConvolution},
    tiny={"lfm2": TinyConfig("lfm2", TINY)},
    skips={"lfm2": SKIPS},
)
