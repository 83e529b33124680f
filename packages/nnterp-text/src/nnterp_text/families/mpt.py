"""MPT: attention with its own ALiBi arithmetic, and an MLP that adds the residual inside itself.

The block adds the attention through ``resid_attn_dropout``; ``MptMLP`` ends
in ``F.dropout(...) + residual``, so its output is a stream and its
contribution is the dropout's output.
"""

from nnterp import Attention, Family, HeadOutputs, Layer, Mlp, TinyConfig, interface_reason

from torch import Tensor

from .bloom import HeadOutputsView


class MptLayer(Layer):
    """An MPT block: returns ``(hidden_states, attn_weights)``."""

    returns_tuple = True


class MptAttention(Attention):
    """MPT's attention: its own matmuls and softmax; the block adds its output through ``resid_attn_dropout``."""

    attention_output = Attention.attention_output.at("../resid_attn_dropout.output", select=None)
    attention_queries = Attention.attention_queries.at("source.query_states_0.output", select=None)
    # keys and values as the cache hands them back: on a decode step, every token's so far
    attention_keys = Attention.attention_keys.at("source.cache_update_0.output", select=0)
    attention_values = Attention.attention_values.at("source.cache_update_0.output", select=1)
    attention_scores = Attention.attention_scores.at("source.nn_functional_softmax_0.input")
    attention_probabilities = Attention.attention_probabilities.at("source.nn_functional_dropout_0.output")

    def score_bias(self) -> Tensor:
        """ALiBi, ``position_bias`` as the block passes it, ``[num_heads, 1, max_seq_len]``: the kit cuts it to the last keys, as the attention does."""
        return self.inputs[1]["position_bias"]

    @HeadOutputsView("source.torch_matmul_1.output", Attention.attention_head_outputs.description, interface_reason)
    def attention_head_outputs(self, value: Tensor) -> HeadOutputs:
        """Each head's output, ``[batch, seq, num_heads, head_dim]``: ``matmul(pattern, values)``, a view with seq first."""
        return value


class MptMlp(Mlp):
    """MPT's MLP: it adds the residual itself, so its contribution is the output of ``F.dropout`` before that sum.

    Instrumented at construction, so ``mlp_output`` reads after ``mlp_neurons`` in one trace.
    """

    sourced = True

    mlp_output = Mlp.mlp_output.at("source.F_dropout_0.output", select=None)


FAMILY = Family(
    name="mpt",
    model_types=("mpt",),
    rename={
        "transformer.blocks": "layers",
        "transformer.wte": "embed_tokens",
        "transformer.norm_f": "norm",
        "attn": "self_attn",
        "attn.out_proj": "attn.o_proj",
        "norm_1": "input_layernorm",
        "norm_2": "post_attention_layernorm",
        "ffn": "mlp",
        "ffn.act": "ffn.act_fn",
    },
    envoys={"layers.*": MptLayer, "layers.*.self_attn": MptAttention, "layers.*.mlp": MptMlp},
    tiny={"mpt": TinyConfig("mpt", {"n_layers": 3, "n_heads": 4, "max_seq_len": 256, "use_cache": True})},
)
