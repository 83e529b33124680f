"""The sandwich block: pre-norms as on the default block, plus a norm on each sublayer's output before it is added.

``x + post_attention_norm(attn(input_norm(x)))``, then
``+ post_feedforward_norm(mlp(pre_feedforward_norm(.)))`` (Gemma-2/3, OLMo-2's
post norms, GLM-4). The contributions are the post norms' outputs, which is
what the block adds; the modules' own outputs are not. The norms go by
Gemma's names: ``input_layernorm``, ``post_attention_layernorm`` (after the
attention), ``pre_feedforward_layernorm`` and ``post_feedforward_layernorm``.
GLM-4's block has the default block's pre-norms (``post_attention_layernorm``
is the MLP's pre-norm, as on Llama) and names its post norms
``post_self_attn_layernorm`` and ``post_mlp_layernorm``: ``Glm4Attention`` and
``Glm4Mlp`` read those.
"""

from .attention import Attention
from .layer import Layer
from .mlp import Mlp


class SandwichLayer(Layer):
    """A block whose MLP pre-norm is ``pre_feedforward_layernorm`` (``post_attention_layernorm`` follows the attention)."""

    layer_mid = Layer.layer_mid.at("pre_feedforward_layernorm.input")
    mlp_norm_output = Layer.mlp_norm_output.at("pre_feedforward_layernorm.output")


class PostNormAttention(Attention):
    """An attention whose contribution is its post norm's output, ``post_attention_layernorm(attention(...))``."""

    attention_output = Attention.attention_output.at("../post_attention_layernorm.output", select=None)


class PostNormMlp(Mlp):
    """An MLP whose contribution is its post norm's output, ``post_feedforward_layernorm(mlp(...))``."""

    mlp_output = Mlp.mlp_output.at("../post_feedforward_layernorm.output", select=None)


class Glm4Attention(Attention):
    """An attention whose contribution is its post norm's output under GLM-4's name, ``post_self_attn_layernorm``.

    GLM-4's, the text model's of GLM-4.1V, GLM-4.6V and GLM-OCR, and Kolibri-1's.
    """

    attention_output = Attention.attention_output.at("../post_self_attn_layernorm.output", select=None)


class Glm4Mlp(Mlp):
    """An MLP whose contribution is its post norm's output under GLM-4's name, ``post_mlp_layernorm``.

    GLM-4's, and the text model's of GLM-4.1V, GLM-4.6V and GLM-OCR.
    """

    mlp_output = Mlp.mlp_output.at("../post_mlp_layernorm.output", select=None)
