"""Falcon: attention with its own arithmetic on one of two paths (rotary or ALiBi), and three block layouts.

``config.alibi`` picks the attention's path: rotary embeddings and a softmax
with no dropout, or BLOOM's ALiBi arithmetic with heads folded into the
batch; every interior value names its operation on both (``by_alibi``). The
block is sequential (``parallel_attn=False``), parallel with one norm (7B), or
the 40B ``new_decoder_architecture``: parallel, with ``ln_attn`` and ``ln_mlp``
(or one norm) and grouped-query keys broadcast to every head. The sublayers
return contributions; the block adds them.
"""

from typing import Any, Callable

from torch import Tensor

from nnterp import PARALLEL, Attention, EProperty, Family, HeadOutputs, Keys, Layer, Mlp, Residual, TinyConfig, Values, interface_reason

from . import bloom
from .bloom import HeadOutputsView


def _config(envoy: Any) -> Any:
    return envoy.root._module.config


def by_alibi(without: Any, with_alibi: Any) -> Callable[[Any], Any]:
    """A key (or select) that follows the attention's path: ``with_alibi`` under ``config.alibi``, else ``without``."""
    return lambda envoy: with_alibi if _config(envoy).alibi else without


def parallel(envoy: Any) -> bool:
    """Whether the block feeds the attention and the MLP the same stream (7B's ``parallel_attn``, or the 40B layout)."""
    config = _config(envoy)
    return bool(config.new_decoder_architecture or config.parallel_attn)


class FalconLayer(Layer):
    """A Falcon block: returns ``(hidden_states, attn_weights)``; sequential, or parallel with no mid stream."""

    returns_tuple = True
    layer_mid = Layer.layer_mid.at(unavailable=lambda envoy: PARALLEL if parallel(envoy) else None)
    mlp_norm_output = Layer.mlp_norm_output.at(
        lambda envoy: "mlp.input" if parallel(envoy) else "post_attention_layernorm.output"
    )


class FalconAttention(Attention):
    """Falcon's attention: its own arithmetic on the rotary or the ALiBi path; it returns its contribution.

    Under ``new_decoder_architecture`` the model broadcasts each key and value
    head to its whole group before the matmuls; keys and values are served
    one per group, ``num_kv_heads`` wide, and broadcast again on the way back.
    """

    attention_queries = Attention.attention_queries.at(
        by_alibi("source.apply_rotary_pos_emb_0.output", "source.query_layer_0.output"), select=by_alibi(0, None)
    )
    attention_scores = Attention.attention_scores.at(by_alibi("source.F_softmax_0.input", "source.F_softmax_1.input"))
    attention_probabilities = Attention.attention_probabilities.at(
        by_alibi("source.F_softmax_0.output", "source.self_attention_dropout_0.output")
    )

    def score_bias(self) -> Tensor | None:
        """ALiBi on the ALiBi path, ``[batch, num_heads, query, key]``; None on the rotary path.

        The model adds it twice: ``(scores + alibi) * inv_norm_factor`` in the
        attention, then ``attention_mask``, into which the model folded
        ``alibi / sqrt(head_dim)`` where a key is kept.
        """
        if not _config(self).alibi:
            return None
        _, kwargs = self.inputs
        alibi, mask = kwargs["alibi"], kwargs["attention_mask"]
        return alibi.view(mask.shape[0], self.num_heads, 1, -1) * self._module.inv_norm_factor + mask

    def kv_copies(self) -> int:
        """How many copies of each key and value head the model holds: its group size under the 40B layout, else 1."""
        return self.num_heads // self.num_kv_heads if self._module.new_decoder_architecture else 1

    def one_per_group(self, value: Tensor) -> Tensor:
        """``[batch, heads, seq, d]``, each kv head held ``kv_copies`` times, as ``[batch, num_kv_heads, seq, d]``: a view."""
        return value.unflatten(1, (self.num_kv_heads, self.kv_copies()))[:, :, 0]

    def broadcast(self, value: Tensor) -> Tensor:
        """``one_per_group`` undone: each kv head repeated over its group, as the model holds them."""
        copies = self.kv_copies()
        return value if copies == 1 else value.repeat_interleave(copies, dim=1)

    @EProperty("source.layer_past_update_0.output", Attention.attention_keys.description, interface_reason, 0)
    def attention_keys(self, value: Tensor) -> Keys:
        """The keys, ``[batch, num_kv_heads, seq, qk_head_dim]``: after the rotary embeddings, if any, as the cache hands them back."""
        return self.one_per_group(value)

    @attention_keys.transform
    def attention_keys(self, view: Tensor, raw: Tensor) -> Tensor:
        return self.broadcast(view)

    @attention_keys.postprocess
    def attention_keys(self, value: Tensor) -> Tensor:
        return self.broadcast(value)

    @EProperty("source.layer_past_update_0.output", Attention.attention_values.description, interface_reason, 1)
    def attention_values(self, value: Tensor) -> Values:
        """The values the pattern mixes, ``[batch, num_kv_heads, seq, head_dim]``, as the cache hands them back."""
        return self.one_per_group(value)

    @attention_values.transform
    def attention_values(self, view: Tensor, raw: Tensor) -> Tensor:
        return self.broadcast(view)

    @attention_values.postprocess
    def attention_values(self, value: Tensor) -> Tensor:
        return self.broadcast(value)

    @HeadOutputsView(
        by_alibi("source.attn_output_1.output", "source.flatten_0.output"),
        Attention.attention_head_outputs.description,
        interface_reason,
        folded=by_alibi(False, True),
    )
    def attention_head_outputs(self, value: Tensor) -> HeadOutputs:
        """Each head's output, ``[batch, seq, num_heads, head_dim]``: the pattern times the values, a view.

        The model holds them heads first on the rotary path, folded into the
        batch on the ALiBi path; an assignment goes back in that layout.
        """
        return value


class FalconMlp(Mlp):
    """Falcon's MLP, served as a copy: a parallel block adds the attention into the MLP's output tensor in place.

    ``mlp_output += attention_output`` would otherwise turn a saved
    ``mlp_output`` into the sum of both; edits and assignments go back to the
    model as copies for the same reason.
    """

    @EProperty("output", Mlp.mlp_output.description, select=0)
    def mlp_output(self, value: Tensor) -> Residual:
        """The MLP's contribution, ``[batch, seq, hidden_size]``, as a copy; in-place edits and assignment reach the model."""
        return value.clone()

    @mlp_output.transform
    def mlp_output(self, view: Tensor, raw: Tensor) -> Tensor:
        return view.clone()

    @mlp_output.postprocess
    def mlp_output(self, value: Tensor) -> Tensor:
        return value.clone()


FAMILY = Family(
    name="falcon",
    model_types=("falcon",),
    rename={
        **{native: alias for native, alias in bloom.FAMILY.rename.items() if native != "mlp.gelu_impl"},
        "mlp.act": "mlp.act_fn",
        # a 40B block calls the attention's norm ln_attn; the identity entry keeps the alias
        # resolving on the blocks that spell it input_layernorm
        "ln_attn": "input_layernorm",
        "input_layernorm": "input_layernorm",
    },
    envoys={"layers.*": FalconLayer, "layers.*.self_attn": FalconAttention, "layers.*.mlp": FalconMlp},
    # rotary, multi-query, parallel (7B); ALiBi, sequential (RW); the new decoder architecture (40B)
    tiny={
        "falcon": TinyConfig("falcon", {"num_hidden_layers": 3}),
        "falcon-alibi": TinyConfig("falcon", {"num_hidden_layers": 3, "alibi": True, "multi_query": False, "parallel_attn": False, "bias": True}),
        "falcon-new-decoder": TinyConfig("falcon", {"num_hidden_layers": 3, "new_decoder_architecture": True, "num_kv_heads": 2}),
    },
    skips={
        "falcon": {
            "mid_stream": "a parallel block",
        },
        "falcon-new-decoder": {
            "mid_stream": "a parallel block",
        },
    },
)
