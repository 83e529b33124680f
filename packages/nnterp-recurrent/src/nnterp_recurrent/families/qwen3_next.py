"""Qwen3-Next: gated DeltaNet blocks (``linear_attn``) and gated softmax attention blocks (``self_attn``), each with Qwen2-MoE's mixture.

The layer types alternate per ``config.layer_types``; a block has one mixer or
the other, and either's ``attention_output`` is what the block adds. The
softmax attention gates each head's output before ``o_proj``
(``GatedAttention``); the MLP is Qwen2-MoE's gated shared-expert mixture.
"""

from nnterp import GatedAttention
from nnterp_text.families import qwen2_moe

from ..components import LinearAttention

#: the transformers modules whose kernels route_kernels binds
MODELING = ("transformers.models.qwen3_next.modeling_qwen3_next",)

RENAME = qwen2_moe.RENAME
ENVOYS = {**qwen2_moe.ENVOYS, "layers.*.self_attn": GatedAttention, "layers.*.linear_attn": LinearAttention}
