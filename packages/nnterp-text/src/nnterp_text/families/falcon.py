"""Falcon: the shared attention interface, rotary or ALiBi, and three block layouts.

The attention calls the shared interface whichever ``config.alibi`` picks:
rotary embeddings on the queries and keys, or none, ALiBi riding in the mask
the model builds (``alibi / sqrt(head_dim)`` where a key is kept). The keys
and values are held one per kv head (``num_kv_heads``: one under
``multi_query``, a group's under the 40B ``new_decoder_architecture``), the
interface broadcasting them to every query head. The block is sequential
(``parallel_attn=False``), parallel with one norm (7B), or the 40B layout:
parallel, with ``ln_attn`` and ``ln_mlp`` (or one norm). The sublayers return
contributions; the block adds them.
"""

from typing import Any

from nnterp import PARALLEL, Attention, EProperty, Family, Layer, Mlp, Residual, TinyConfig

from torch import Tensor

from . import bloom


def _config(envoy: Any) -> Any:
    return envoy.root._module.config


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
    """Falcon's attention: the shared interface's, its ALiBi (where ``config.alibi``) carried by the mask."""

    def score_bias(self) -> Tensor | None:
        """ALiBi, as the model folds it into the mask the attention receives: ``alibi / sqrt(head_dim)`` where a key is
        kept, ``[batch, num_heads, query, key]``; None on the rotary path, whose mask adds nothing where a key is kept."""
        if not _config(self).alibi:
            return None
        return self.inputs[1]["attention_mask"]


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
        "falcon-alibi": TinyConfig(
            "falcon",
            {"num_hidden_layers": 3, "alibi": True, "multi_query": False, "parallel_attn": False, "bias": True},
        ),
        "falcon-new-decoder": TinyConfig(
            "falcon", {"num_hidden_layers": 3, "new_decoder_architecture": True, "num_kv_heads": 2}
        ),
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
