"""DeepSeek-V4: several residual streams per token (manifold-constrained hyper-connections) around a sink attention and a mixture.

The blocks carry ``hc_mult`` streams, ``[batch, seq, hc_mult, hidden]``
(``StreamLayer``): around each sublayer a hyper-connection (``attn_hc``,
``ffn_hc``) collapses the streams into the one the sublayer reads, spreads its
output back over them and mixes the streams carried past it by a
Sinkhorn-normalized matrix. After the last block the model's ``hc_head``
collapses the streams for the final norm, so ``project_on_vocab`` (the logit
lens) is ``lm_head(norm(hc_head(streams)))``: what the model does to its last
``layer_output``, on any block's streams.

The attention is GPT-OSS's sink softmax over one shared key/value head
(``SinkAttention``). On its compressed layers (``compressed_sparse_attention``,
``heavily_compressed_attention``) a compressor appends pooled entries to the
keys, so the keys, values, scores and pattern run over more than the sequence:
those are unavailable there (``COMPRESSED``), the queries, head outputs and
contribution are served on every layer. The compressor pools fixed windows of
positions, pad tokens included, so a left-padded row differs from its prompt
alone once a window fills (``DeepseekV4Layer.padding_changes``). The
mixture's routing (sqrt-softplus scores, hashed on the first layers) is not
mapped, so the MLP is served as a plain ``Mlp``: its ``mlp_output``.
"""

from typing import Any

from nnterp import Mlp, StreamLayer, TinyConfig, interface_reason
from nnterp.families import default
from nnterp.logits import unembed

from .sinks import SinkAttention, interior

COMPRESSED = (
    "a compressed layer: its compressor appends pooled entries to the keys and values, so they, the scores and the "
    "pattern run over seq + compressed entries, not the sequence"
)


def compressed_reason(envoy: Any) -> str | None:
    """``COMPRESSED`` on a layer with a compressor, else why the interface's values are unavailable (or None)."""
    return COMPRESSED if getattr(envoy._module, "compressor", None) is not None else interface_reason(envoy)


#: the pattern's cast to the values' dtype, after the dropout
CAST = "to_0.output"


class DeepseekV4Attention(SinkAttention):
    """The sink attention, its key-axis values unavailable on the compressed layers (``COMPRESSED``), its pattern read
    after its cast to the values' dtype (``CAST``)."""

    attention_keys = SinkAttention.attention_keys.at(unavailable=compressed_reason)
    attention_values = SinkAttention.attention_values.at(unavailable=compressed_reason)
    attention_scores = SinkAttention.attention_scores.at(unavailable=compressed_reason)
    # the pattern as the values are mixed with it: cast to their dtype after the dropout (the sinks are float32, so the
    # softmax ran in float32 under a half-precision model)
    attention_probabilities = SinkAttention.attention_probabilities.at(interior(CAST), unavailable=compressed_reason)


class DeepseekV4Layer(StreamLayer):
    """DeepSeek-V4's block: several streams (``StreamLayer``) around an attention that may compress its keys."""

    def padding_changes(self) -> str | None:
        """Why a left-padded row's values differ from its prompt alone on this block, or None: the compressor pools
        fixed windows of positions, pad tokens included."""
        if getattr(self._module.self_attn, "compressor", None) is None:
            return None
        return "a compressed layer pools fixed windows of positions, pad tokens included, so left padding moves the windows"


def collapsed_for_the_head(model: Any, streams: Any) -> Any:
    """``lm_head(norm(hc_head(streams)))``: the model's own collapse of the streams (its ``hc_head``), then the final
    norm and the head, as the model does to its last block's ``layer_output``; a single stream is projected as is."""
    if streams.ndim == 4:
        streams = model.norm.parent.hc_head(streams)
    return unembed(model, streams)


#: the tiny sizes: three blocks, one of each attention kind, and a narrow grouped output projection
TINY = {
    "num_hidden_layers": 3,
    "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
    "mlp_layer_types": ["hash_moe", "moe", "moe"],
    "o_lora_rank": 8,
}

FAMILY = default.FAMILY.replace(
    name="deepseek_v4",
    model_types=("deepseek_v4",),
    envoys={"layers.*": DeepseekV4Layer, "layers.*.self_attn": DeepseekV4Attention, "layers.*.mlp": Mlp},
    project_on_vocab=collapsed_for_the_head,
    tiny={"deepseek_v4": TinyConfig("deepseek_v4", TINY)},
    skips={
        "deepseek_v4": {
            "padded_rows_match_alone": "pools fixed windows of positions",
            "head_outputs_make_the_projection": "no block with head outputs projects them through an o_proj module",
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
