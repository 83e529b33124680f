"""CodeGen: GPT-J's block and attention, with its softmax an ``nn.Softmax`` built and called on one line."""

from nnterp import TinyConfig

from . import gptj
from .own_attention import HelperAttention, inside_helper


class CodeGenAttention(HelperAttention):
    """The scores enter ``nn.Softmax(dim=-1)(...)``, whose call is ``call_0``."""

    attention_scores = HelperAttention.attention_scores.at(inside_helper("call_0.input"))


FAMILY = gptj.FAMILY.replace(
    name="codegen",
    model_types=("codegen",),
    envoys={**gptj.FAMILY.envoys, "layers.*.self_attn": CodeGenAttention},
    tiny={"codegen": TinyConfig("codegen", {"n_layer": 3, "rotary_dim": 8})},
    skips={
        "codegen": {
            "mid_stream": "a parallel block",
        },
    },
)
