"""Qwen3-Next: gated DeltaNet blocks (``linear_attn``) and gated softmax attention blocks (``self_attn``), each with Qwen2-MoE's mixture.

The layer types alternate per ``config.layer_types``; a block has one mixer or
the other, and either's ``attention_output`` is what the block adds. The
softmax attention gates each head's output before ``o_proj``
(``GatedAttention``); the MLP is Qwen2-MoE's gated shared-expert mixture
(``GatedSharedMoe``: OLMoE's router at ``gate``, a gated ``shared_expert``).
"""

from nnterp import GatedAttention, GatedSharedMoe
from nnterp.families import default
from nnterp.tiny import TinyConfig

from ..components import LinearAttention
from ..family import RecurrentFamily
from ..tiny import DELTANET

FAMILY = RecurrentFamily(
    name="qwen3_next",
    model_types=("qwen3_next",),
    modeling=("transformers.models.qwen3_next.modeling_qwen3_next",),
    rename={**default.FAMILY.rename, "mlp.gate": "mlp.router", "mlp.shared_expert": "mlp.shared_experts"},
    envoys={
        **default.FAMILY.envoys,
        "layers.*.self_attn": GatedAttention,
        "layers.*.mlp": GatedSharedMoe,
        "layers.*.linear_attn": LinearAttention,
    },
    tiny={"qwen3_next": TinyConfig("qwen3_next", DELTANET)},
    skips={
        "qwen3_next": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
