"""HY-V4: DeepSeek-V4's several residual streams, carried unmixed, around a gated sink attention with DSA and a grouped sigmoid mixture.

The hyper-connections (``attn_hc``, ``ffn_hc``) collapse the streams into the
sublayer's input and spread its output back as DeepSeek-V4's do, but have no
stream mixing: the streams are carried past each sublayer as they are
(``UNMIXED``), so ``after[k] == spread[k] * output + before[k]``, and a
hyper-connection returns ``(spread, collapsed)``. The model's ``hc_head``
collapses the streams before the final norm, as DeepSeek-V4's does
(``project_on_vocab`` is shared). HY-V4-VL's text model (``HYV4VLTextModel``)
is this block under the wrapper's names (the same hyper-connection and block
code), which the vision side would reuse; it is not served here.
"""

from typing import Any

from nnterp import GatedAttention, Layer, SigmoidMoe, StreamLayer, TinyConfig, unavailable

from . import deepseek_v4
from .sinks import SinkAttention, interior

UNMIXED = "HY-V4's hyper-connections carry the residual streams past each sublayer unmixed (the mixing is the identity)"


class HYV4Layer(StreamLayer):
    """DeepSeek-V4's stream block without the mixing: each hyper-connection returns ``(spread, collapsed)``."""

    UNMIXED = UNMIXED

    attention_stream_mixing = unavailable(UNMIXED)
    mlp_stream_mixing = unavailable(UNMIXED)
    attention_collapsed = StreamLayer.attention_collapsed.at(select=1)
    mlp_collapsed = StreamLayer.mlp_collapsed.at(select=1)

    def carries(self) -> str | None:
        return "the top-k selection a later shared DSA layer reuses (prev_topk_indices)"

    def skip(self, hidden: Any) -> None:
        """Skip this block, handing ``hidden`` on as its streams and the top-k selection it received as its own.

        The block returns ``(streams, topk_indices)`` and a later ``"shared"``
        DSA layer reuses the last full indexer's selection, which, with this
        block skipped, is the one this block was handed. Call it inside a
        trace, before anything in the block is read.
        """
        received = self.inputs[1].get("prev_topk_indices")
        super(Layer, self).skip((hidden, received))


class HYV4Attention(SinkAttention, GatedAttention):
    """The sink softmax (``SinkAttention``) whose head outputs are gated before ``o_proj`` (``GatedAttention``); the
    pattern read after its cast to the values' dtype, as DeepSeek-V4's."""

    attention_probabilities = SinkAttention.attention_probabilities.at(interior(deepseek_v4.CAST))


FAMILY = deepseek_v4.FAMILY.replace(
    name="hy_v4",
    model_types=("hy_v4",),
    rename={**deepseek_v4.FAMILY.rename, "mlp.gate": "mlp.router"},
    envoys={"layers.*": HYV4Layer, "layers.*.self_attn": HYV4Attention, "layers.*.mlp": SigmoidMoe},
    tiny={"hy_v4": TinyConfig("hy_v4", {"num_hidden_layers": 3, "mlp_layer_types": ["dense", "sparse", "sparse"]})},
)
