"""BitNet: the default block with a norm inside each sublayer, between what it computes and its output projection.

The attention normalizes the joined heads (``attn_sub_norm``) before
``o_proj``, so the heads are read where ``o_proj`` takes them; the MLP
normalizes ``act(gate) * up`` (``ffn_sub_norm``) before ``down_proj``, so no
one tensor is both the gated product and what ``down_proj`` sums.
"""

from nnterp import GatedAttention, Mlp, TinyConfig, unavailable
from nnterp.families import default


class BitNetAttention(GatedAttention):
    """Each head's output as ``o_proj`` receives it: after ``attn_sub_norm``, whose scale all heads of a token share."""


class BitNetMlp(Mlp):
    mlp_neurons = unavailable(
        "BitNet normalizes act(gate) * up across the whole layer (ffn_sub_norm) before down_proj, so the gated "
        "product is not what down_proj sums; read mlp.ffn_sub_norm's input or down_proj's input natively"
    )


FAMILY = default.FAMILY.replace(
    name="bitnet",
    model_types=("bitnet",),
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": BitNetAttention, "layers.*.mlp": BitNetMlp},
    tiny={"bitnet": TinyConfig("bitnet", {"num_hidden_layers": 3})},
    skips={
        "bitnet": {
            "neurons_make_contribution": "BitNet normalizes act(gate) * up across the whole layer",
        },
    },
)
