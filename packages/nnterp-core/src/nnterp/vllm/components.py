"""The standard components on vLLM's own modules: the same values, flat over one request's tokens.

vLLM packs the tokens of every request in a step into one axis, and nnsight
serves each invoke its own span of it, so every value here is ``[tokens, ...]``
for one request (``FlatResidual``): a prompt's tokens on the step that reads
it, one token on each decode step. The stream is the sum of the block's two
halves (``Halves``); the contributions are what each sublayer returns, so
``layer_input + self_attn.attention_output + mlp.mlp_output == layer_output``
on every block, as on transformers.
"""

from __future__ import annotations

from torch import Tensor

from ..components import Attention, Layer, Mlp, Moe
from ..components.attention import each_interior
from ..descriptors import EProperty, redefine, unavailable
from ..layouts import FlatNeurons, FlatResidual, FlatRouterLogits
from .values import Halves

#: why vLLM serves no attention pattern or per-head interior
PAGED = (
    "vLLM's attention is one fused paged-attention kernel (queries, keys and values in, the heads' mixed values out): "
    "the scores, the pattern and the per-head values are never tensors a module passes; read them on the same "
    "checkpoint under StandardizedTransformer with attn_implementation='eager'"
)
#: why vLLM's gated MLP has no activation tensor of its own
FUSED_ACTIVATION = (
    "vLLM's act_fn (SiluAndMul, GeluAndMul) computes act(gate) * up in one call, so the activation alone is never "
    "a tensor; mlp_neurons is that product"
)
#: why vLLM's mixture serves its router logits and its output only
FUSED_EXPERTS = (
    "vLLM's FusedMoE routes and runs the experts in one kernel call taking the router logits: the chosen experts, "
    "their weights and each slot's output are never tensors a module passes; read router_logits and mlp_output, or "
    "the same checkpoint under StandardizedTransformer"
)


class FlatLayer(Layer):
    """A vLLM decoder block, ``(positions, hidden_states, residual) -> (hidden_states, residual)``.

    The pre-norm block of Llama, Qwen2, Qwen3 and Mistral as vLLM builds it:
    ``input_layernorm`` adds the two halves and norms the sum, the attention
    runs, ``post_attention_layernorm`` adds the attention's output to the
    residual half and norms that, and the block returns the MLP's output with
    the residual half. ``layer_input``, ``layer_mid`` and ``layer_output`` are
    the sums of the halves at those three places.
    """

    @Halves("inputs", "The residual stream entering this block", first=1)
    def layer_input(self, value: Tensor) -> FlatResidual:
        """The residual stream entering this block, ``[tokens, hidden_size]``: ``hidden_states + residual``.

        The sum of the two halves vLLM passes the block (the embeddings alone on
        the first block). With the contributions it is the identity the values
        are defined by: ``layer_input + attention_output + mlp_output ==
        layer_output``. A write (or an in-place edit) is handed on whole as
        ``hidden_states``, with ``residual`` zeroed.
        """
        return value

    @EProperty("input_layernorm.output", "What the attention is called with: its pre-norm's output", select=0)
    def attention_norm_output(self, value: Tensor) -> FlatResidual:
        """The attention's pre-norm output, ``[tokens, hidden_size]``: what the attention is called with."""
        return value

    @Halves("post_attention_layernorm.inputs", "The stream between the attention and the MLP")
    def layer_mid(self, value: Tensor) -> FlatResidual:
        """The residual stream between the sublayers, ``[tokens, hidden_size]``: ``layer_input + attention_output``.

        The sum of the halves the MLP's pre-norm adds. A write is handed on
        whole, the other half zeroed.
        """
        return value

    @EProperty("post_attention_layernorm.output", "What the MLP's pre-norm hands on", select=0)
    def mlp_norm_output(self, value: Tensor) -> FlatResidual:
        """The MLP's pre-norm output, ``[tokens, hidden_size]``."""
        return value

    @EProperty("mlp.input", "What the MLP is called with")
    def mlp_input(self, value: Tensor) -> FlatResidual:
        """The MLP's input, ``[tokens, hidden_size]``: ``mlp_norm_output``."""
        return value

    @Halves("output", "The residual stream leaving this block")
    def layer_output(self, value: Tensor) -> FlatResidual:
        """The residual stream leaving this block, ``[tokens, hidden_size]``: the sum of the two halves it returns.

        What the next block's ``layer_input`` is. A write is handed on whole as
        the first half, the residual half zeroed.
        """
        return value


@each_interior(lambda value: unavailable(PAGED))
class FlatAttention(Attention):
    """vLLM's attention module: its contribution, ``o_proj`` of the paged kernel's output; no interior (``PAGED``)."""

    @EProperty("output", "What the attention adds to the residual stream", select=0)
    def attention_output(self, value: Tensor) -> FlatResidual:
        """The attention's contribution to the residual stream, ``[tokens, hidden_size]``. In-place edits and assignment reach the model."""
        return value


class FlatMlp(Mlp):
    """vLLM's gated MLP: ``down_proj(act_fn(gate_up_proj(x)))``, the activation fused with the product."""

    @EProperty("output", "What the MLP adds to the residual stream", select=0)
    def mlp_output(self, value: Tensor) -> FlatResidual:
        """The MLP's contribution to the residual stream, ``[tokens, hidden_size]``. In-place edits and assignment reach the model."""
        return value

    mlp_activation = unavailable(FUSED_ACTIVATION)

    @EProperty("down_proj.input", "The neurons the down projection sums")
    def mlp_neurons(self, value: Tensor) -> FlatNeurons:
        """The neurons the down projection sums, ``[tokens, intermediate_size]``: ``act(gate) * up``. In-place edits and assignment reach the model."""
        return value

    @property
    def intermediate_size(self) -> int:
        """Width of the hidden layer: the down projection's input width."""
        return int(self.down_proj._module.input_size)


class FlatSandwichLayer(FlatLayer):
    """vLLM's Gemma-2/3 block: the MLP's pre-norm is ``pre_feedforward_layernorm`` (``post_attention_layernorm`` follows the attention)."""

    layer_mid = FlatLayer.layer_mid.at("pre_feedforward_layernorm.inputs")
    mlp_norm_output = FlatLayer.mlp_norm_output.at("pre_feedforward_layernorm.output")


class FlatPostNormAttention(FlatAttention):
    """An attention whose contribution is its post norm's output: ``post_attention_layernorm(attention(...))``."""

    attention_output = FlatAttention.attention_output.at("../post_attention_layernorm.output", select=None)


class FlatPostNormMlp(FlatMlp):
    """An MLP whose contribution is its post norm's output: ``post_feedforward_layernorm(mlp(...))``."""

    mlp_output = FlatMlp.mlp_output.at("../post_feedforward_layernorm.output", select=None)


class FlatMoe(Moe):
    """vLLM's mixture (Mixtral's ``block_sparse_moe``): ``experts(x, gate(x))``, one fused kernel (``FUSED_EXPERTS``)."""

    @EProperty("output", "What the MLP adds to the residual stream", select=0)
    def mlp_output(self, value: Tensor) -> FlatResidual:
        """The mixture's contribution to the residual stream, ``[tokens, hidden_size]``. In-place edits and assignment reach the model."""
        return value

    @EProperty("router.output", "The router's logits, before scoring", select=0)
    def router_logits(self, value: Tensor) -> FlatRouterLogits:
        """The router's logits, ``[tokens, num_experts]``: what the fused experts kernel routes by. Assignment reroutes."""
        return value

    @EProperty("output", "What the mixture hands on: its routed and shared experts' sum", select=0)
    def mixture_output(self, value: Tensor) -> FlatResidual:
        """The mixture's output, ``[tokens, hidden_size]``: ``mlp_output`` (no norm follows the mixture)."""
        return value

    def no_mixture(self) -> str | None:
        return None

    @property
    def num_experts(self) -> int:
        """Routed experts: the fused experts module's count (its ``moe_config``)."""
        return int(self.experts._module.moe_config.num_experts)

    @property
    def top_k(self) -> int:
        """Experts each token is routed to (the fused experts module's ``moe_config``)."""
        return int(self.experts._module.moe_config.experts_per_token)


redefine(
    FlatMoe,
    **{
        name: unavailable(FUSED_EXPERTS)
        for name in ("expert_weights", "expert_indices", "expert_outputs", "routed_output", "shared_expert_output")
    },
)
