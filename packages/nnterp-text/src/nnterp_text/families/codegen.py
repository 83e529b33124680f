"""CodeGen: GPT-J's block and attention, with its softmax an ``nn.Softmax`` built and called on one line."""

from . import gptj
from .own_attention import HelperAttention, inside_helper

RENAME = gptj.RENAME


class CodeGenAttention(HelperAttention):
    """The scores enter ``nn.Softmax(dim=-1)(...)``, whose call is ``call_0``."""

    attention_scores = HelperAttention.attention_scores.at(inside_helper("call_0.input"))


ENVOYS = {**gptj.ENVOYS, "layers.*.self_attn": CodeGenAttention}
