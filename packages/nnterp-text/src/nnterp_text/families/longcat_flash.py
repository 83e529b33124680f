"""LongCat-Flash: two attention and MLP sub-blocks per layer, and a shortcut mixture of experts added at the layer's end.

A layer computes ``h1 = x + attn0(in0(x))``, ``h2 = h1 + mlps[0](post0(h1))``,
``h3 = h2 + attn1(in1(h2))`` and returns ``h3 + mlps[1](post1(h3)) + moe(post0(h1))``:
the mixture (``mlp``) reads what the first MLP reads and is added last. No one
attention or MLP output is what the layer adds to ``layer_input``, so both
contributions are unavailable. ``self_attn`` is the first sub-block's
attention (``self_attn[0]``): its interior and sizes are that module's, and
the second's are at ``self_attn[1]``. ``layer_mid`` is the stream after that
first attention, ``layer_input + self_attn[0]``'s output, where the mixture's
norm reads it. The mixture is a softmax router over the routed experts and
``zero_expert_num`` identity experts, its choice biased by
``e_score_correction_bias``, its weights scaled by ``routed_scaling_factor``.
"""

from typing import Any

from nnterp import Attention, Layer, Moe, TinyConfig, each_interior, unavailable
from nnterp.families import default

SUB_BLOCKS = (
    "a LongCat-Flash layer adds two attention sub-blocks, two dense MLPs (mlps[0], mlps[1]) and the shortcut "
    "mixture (mlp) to the stream, so no one {sublayer} output is what the layer adds to layer_input; read "
    "{native} for each sub-block's output"
)


class LongcatFlashLayer(Layer):
    """The first sub-block's norms: ``input_layernorm[0]`` before ``self_attn[0]``, ``post_attention_layernorm[0]`` before the MLPs."""

    norm_readers = {"attention_norm_output": "self_attn.0.input", "mlp_norm_output": "mlp.input"}

    attention_norm_output = Layer.attention_norm_output.at("input_layernorm.0.output")
    layer_mid = Layer.layer_mid.at("post_attention_layernorm.0.input")
    mlp_norm_output = Layer.mlp_norm_output.at("post_attention_layernorm.0.output")


@each_interior(lambda value: value.at(f"0.{value.key}"))
class LongcatFlashAttention(Attention):
    """The first sub-block's latent attention, ``self_attn[0]``, on the shared interface."""

    attention_output = unavailable(
        SUB_BLOCKS.format(sublayer="attention", native="self_attn[0].output[0] and self_attn[1].output[0]")
    )

    def _first(self, *names: str) -> Any:
        """A size of the first sub-block's attention module (``self_attn`` itself is the ModuleList holding both)."""
        first = self._module[0]
        return next((getattr(first, name) for name in names if getattr(first, name, None) is not None), None)


class LongcatFlashMoe(Moe):
    """The shortcut mixture: routed experts and identity experts, all routable."""

    mlp_output = unavailable(SUB_BLOCKS.format(sublayer="MLP", native="mlps[0].output, mlps[1].output and mlp.output"))

    @property
    def num_experts(self) -> int:
        """The router's classes, the width of ``router_logits``: the routed experts, then the identity experts."""
        return int(self.router._module.n_routed_experts)


FAMILY = default.FAMILY.replace(
    name="longcat_flash",
    model_types=("longcat_flash",),
    rename={**default.FAMILY.rename, "self_attn.0.o_proj": "self_attn.o_proj"},
    envoys={**default.FAMILY.envoys, "layers.*": LongcatFlashLayer, "layers.*.self_attn": LongcatFlashAttention, "layers.*.mlp": LongcatFlashMoe},
    # RoPE is sized by head_dim, which must equal qk_rope_head_dim; the aliased sizes are not shrunk by name
    tiny={"longcat_flash": TinyConfig("longcat_flash", {"zero_expert_num": 2, "head_dim": 8, "num_key_value_heads": 4, "moe_topk": 2, "ffn_hidden_size": 128, "expert_ffn_hidden_size": 32})},
    skips={
        "longcat_flash": {
            "contribution": "a LongCat-Flash layer adds two attention sub-blocks, two dense MLPs",
            "contribution_at_every_step": "a LongCat-Flash layer adds two attention sub-blocks, two dense MLPs",
            "mid_stream": "a LongCat-Flash layer adds two attention sub-blocks, two dense MLPs",
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "this family's experts run their own loop over experts",
        },
    },
)
