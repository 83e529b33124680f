"""Nemotron-H: a hybrid whose every block is one pre-norm sublayer in a child named ``mixer``, of one of four kinds.

``config.layers_block_type`` says which: a Mamba-2 mixer (a ``StateSpace``,
served as ``linear_attn``), softmax attention without rotary embeddings
(``self_attn``), a plain MLP (``mlp``, ``down_proj(relu2(up_proj(x)))``) or a
mixture of experts (``mlp``). The standard name follows the module's class,
so each block exposes the sublayer it holds and lacks the others. The block's
one norm (``norm``) is ``input_layernorm`` whatever follows it, and the block
adds the sublayer's output to the stream: ``layer_input + attention_output``
or ``+ mlp_output`` is ``layer_output``.

The mixture (``NemotronHMoE``) is DeepSeek-V3's router (a sigmoid, a
selection bias, grouped choice, renormalized and scaled) over ungated experts
(``up_proj``, ``down_proj``), with a shared expert. Where the config has a
``moe_latent_size``, the routed experts run in a narrower space between
``fc1_latent_proj`` and ``fc2_latent_proj``: ``routed_output`` is what they
add back in the model's width, and each slot's output, which lives in the
latent space, is not served.
"""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import Layer, Moe, SigmoidMoe, needs_grouped_experts, unavailable
from nnterp.families import default
from nnterp.tiny import TinyConfig

from transformers.models.nemotron_h import modeling_nemotron_h as modeling

from ..components.state_space import StateSpace
from ..family import RecurrentFamily

#: a Mamba-2 mixer (Nemotron-H's own field names) and one block of each kind: Mamba-2, mixture, attention,
#: dense MLP, then Mamba-2 again so a decode step crosses two mixers
SIZES = {
    "mamba_num_heads": 8,
    "mamba_head_dim": 16,
    "n_groups": 2,
    "ssm_state_size": 8,
    "chunk_size": 4,
    "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp", "linear_attention"],
    "moe_shared_expert_intermediate_size": 32,
}

LATENT = (
    "the routed experts run in a latent space (config.moe_latent_size) and their slots are summed there, "
    "before fc2_latent_proj maps the sum back to the model's width: no slot has an output in the stream's "
    "width; read layers[i].mlp.experts.output for the latent sum, or zero a slot's expert_weights to see what it adds"
)


def latent_slots(envoy: "NemotronHMoe") -> str | None:
    """Why the per-slot expert outputs are unavailable: the grouped forward's, or the latent space they live in."""
    reason = needs_grouped_experts(envoy)
    if reason is not None:
        return reason
    return LATENT if envoy.latent() else None


#: the block types whose one sublayer is a feed-forward (``mlp``); the others hold a sequence mixer
FEED_FORWARD = ("mlp", "moe")


def feeds_forward(envoy: Layer) -> bool:
    """Whether this block's one sublayer is its MLP (a plain one or a mixture), not a sequence mixer."""
    return envoy._module.block_type in FEED_FORWARD


def mixer_block(envoy: Layer) -> str | None:
    """Why a mixer block's norm is not an MLP's: it feeds the attention or Mamba-2 mixer."""
    if feeds_forward(envoy):
        return None
    return "this block's one sublayer is a sequence mixer: its norm's output is attention_norm_output"


def mlp_block(envoy: Layer) -> str | None:
    """Why an MLP block's norm is not a mixer's: it feeds the MLP."""
    if not feeds_forward(envoy):
        return None
    return "this block's one sublayer is its MLP: its norm's output is mlp_norm_output"


class NemotronHLayer(Layer):
    """A Nemotron-H block: one norm (``input_layernorm``), then the one sublayer, whichever kind.

    The norm's output is ``attention_norm_output`` on a mixer block and
    ``mlp_norm_output`` on an MLP block. There is no stream between two
    sublayers (``layer_mid``).
    """

    attention_norm_output = Layer.attention_norm_output.at(unavailable=mlp_block)
    mlp_norm_output = Layer.mlp_norm_output.at("input_layernorm.output", unavailable=mixer_block)
    layer_mid = unavailable(
        "a Nemotron-H block holds one sublayer: no stream runs between two; layer_input is what its sublayer's norm reads"
    )


class NemotronHMoe(SigmoidMoe):
    """Nemotron-H's mixture: DeepSeek-V3's over ungated experts, with an optional latent projection.

    ``routed_output`` is read after ``fc2_latent_proj`` (an identity without
    a latent size), so ``routed_output + shared_expert_output ==
    mixture_output`` holds either way; ``expert_outputs`` is served only
    where the experts run in the model's width.
    """

    def latent(self) -> bool:
        """Whether the routed experts run in a latent space narrower than the stream (``config.moe_latent_size``)."""
        return self._module.config.moe_latent_size is not None

    routed_output = Moe.routed_output.at("fc2_latent_proj.output")
    expert_outputs = Moe.expert_outputs.at(unavailable=latent_slots)


FAMILY = RecurrentFamily(
    name="nemotron_h",
    model_types=("nemotron_h",),
    modeling=(modeling.__name__,),
    # by class: every block's one sublayer is its ``mixer``, and the standard name follows what the block holds
    rename={
        **default.FAMILY.rename,
        "model.embeddings": "embed_tokens",
        "model.norm_f": "norm",
        # the Mamba-2 mixer's own gated norm is a ``norm`` too
        modeling.NemotronHRMSNorm: "input_layernorm",
        modeling.NemotronHMamba2Mixer: "linear_attn",
        modeling.NemotronHAttention: "self_attn",
        # also names the mixture's shared expert ``mlp`` on the mixture: its one child of that class
        modeling.NemotronHMLP: "mlp",
        modeling.NemotronHMoE: "mlp",
        modeling.NemotronHTopkRouter: "router",
    },
    # a dense MLP is a NemotronHMoe too: its routing values say it routes nothing
    envoys={
        **default.FAMILY.envoys,
        "layers.*": NemotronHLayer,
        "layers.*.mlp": NemotronHMoe,
        "layers.*.linear_attn": StateSpace,
    },
    tiny={
        # grouped sigmoid routing: 8 experts in 2 groups, one group kept, weights scaled
        "nemotron_h": TinyConfig(
            "nemotron_h", {**SIZES, "n_routed_experts": 8, "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5}
        ),
        # the routed experts run in a latent space between fc1_latent_proj and fc2_latent_proj
        "nemotron_h-latent": TinyConfig("nemotron_h", {**SIZES, "moe_latent_size": 32}),
    },
    skips={
        "nemotron_h": {
            "mid_stream": "a Nemotron-H block holds one sublayer",
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
        "nemotron_h-latent": {
            "mid_stream": "a Nemotron-H block holds one sublayer",
            "rerouted_slot_runs_the_new_expert": "no mlp module on this block",
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
    },
)
