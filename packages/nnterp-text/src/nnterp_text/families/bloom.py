"""BLOOM: attention with its own ALiBi arithmetic, and both sublayers adding the residual inside themselves.

``BloomAttention`` and ``BloomMLP`` each end in ``dropout_add(x, residual, ...)``,
so their outputs are streams, not contributions: the contributions are the
first argument of that call. The attention multiplies with ``bmm``, heads
folded into the batch (``[batch * heads, seq, head_dim]``); ``HeadOutputsView``
serves its head outputs unfolded, and MPT's and Falcon's too.
"""

from typing import Any

from nnterp import Attention, Family, HeadOutputs, Layer, Mlp, TinyConfig, TokenEProperty, interface_reason, seq_first

from torch import Tensor

POST_LAYERNORM_RESIDUAL = (
    "apply_residual_connection_post_layernorm=True: each sublayer is added to its pre-norm's output, "
    "not to the stream entering it, so no contribution sums from layer_input to layer_output"
)


def post_layernorm_residual(envoy: Any) -> str | None:
    """Why the stream values are unavailable on a BLOOM block that adds to its norms' outputs, or None."""
    config = envoy.root._module.config
    return POST_LAYERNORM_RESIDUAL if config.apply_residual_connection_post_layernorm else None


class HeadOutputsView(TokenEProperty):
    """Head outputs as a matmul leaves them, served ``[batch, seq, heads, head_dim]`` for this invoke's rows.

    The model holds them ``[batch, heads, seq, head_dim]`` (a layout
    ``TokenEProperty`` serves as it is), or ``[batch * heads, seq, head_dim]``
    with the heads folded into the batch (BLOOM's), which nnsight cannot split
    by invoke: those rows are cut as ``TokenEProperty`` cuts a token-flat
    tensor. Either way the value is a view, so in-place edits land, and an
    assignment goes back in the model's layout.
    """

    def _as_shown(self, obj: Any, rows: Tensor) -> Tensor:
        return seq_first(rows)

    def _as_held(self, obj: Any, shown: Tensor) -> Tensor:
        return seq_first(shown)

    def _shown(self, obj: Any, raw: Any, last: str) -> Tensor:
        return seq_first(super()._shown(obj, raw, last))

    def _put(self, obj: Any, value: Tensor, location: str, last: str, raw: Any) -> None:
        super()._put(obj, seq_first(value), location, last, raw)


class BloomLayer(Layer):
    """A BLOOM block: returns ``(hidden_states, attention_probs)``; no mid stream under a post-norm residual."""

    returns_tuple = True
    layer_mid = Layer.layer_mid.at(unavailable=post_layernorm_residual)


class BloomAttention(Attention):
    """BLOOM's attention: ALiBi scores by ``baddbmm``, heads folded into the batch, the residual added inside.

    Instrumented at construction (``sourced``): ``attention_output`` is an
    operation in its forward, read after ``o_proj``'s output in one trace.
    """

    sourced = True

    attention_output = Attention.attention_output.at(
        "source.dropout_add_0.input", select=None, unavailable=post_layernorm_residual
    )
    attention_queries = Attention.attention_queries.at("source.self__reshape_0.output", select=0)
    # keys and values as the cache hands them back: on a decode step, every token's so far
    attention_keys = Attention.attention_keys.at("source.layer_past_update_0.output", select=0)
    attention_values = Attention.attention_values.at("source.layer_past_update_0.output", select=1)
    attention_scores = Attention.attention_scores.at("source.F_softmax_0.input")
    attention_probabilities = Attention.attention_probabilities.at("source.self_attention_dropout_0.output")

    def score_bias(self) -> Tensor:
        """ALiBi, ``beta * alibi`` as ``baddbmm`` adds it, ``[batch, num_heads, 1, key]``: a slope per head times the key's position."""
        alibi = self.inputs[1]["alibi"]
        return self._module.beta * alibi.view(-1, self.num_heads, *alibi.shape[1:])

    @HeadOutputsView("source.torch_bmm_0.output", Attention.attention_head_outputs.description, interface_reason)
    def attention_head_outputs(self, value: Tensor) -> HeadOutputs:
        """Each head's output, ``[batch, seq, num_heads, head_dim]``: ``bmm(pattern, values)``, unfolded.

        A view, so in-place edits land; an assignment is folded back. Joined
        and through ``o_proj``, it is ``o_proj``'s output.
        """
        return value


class BloomMlp(Mlp):
    """BLOOM's MLP: it adds the residual itself, so its contribution is ``dropout_add``'s first argument.

    Instrumented at construction, so ``mlp_output`` reads after ``mlp_neurons`` in one trace.
    """

    sourced = True

    mlp_output = Mlp.mlp_output.at("source.dropout_add_0.input", select=None, unavailable=post_layernorm_residual)


FAMILY = Family(
    name="bloom",
    model_types=("bloom",),
    rename={
        "transformer.h": "layers",
        "transformer.word_embeddings": "embed_tokens",
        "transformer.ln_f": "norm",
        "self_attention": "self_attn",
        "self_attention.dense": "self_attention.o_proj",
        "mlp.dense_h_to_4h": "mlp.up_proj",
        "mlp.gelu_impl": "mlp.act_fn",
        "mlp.dense_4h_to_h": "mlp.down_proj",
    },
    envoys={"layers.*": BloomLayer, "layers.*.self_attn": BloomAttention, "layers.*.mlp": BloomMlp},
    tiny={"bloom": TinyConfig("bloom", {"n_layer": 3})},
)
