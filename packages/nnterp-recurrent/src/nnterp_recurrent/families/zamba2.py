"""Zamba2: Mamba-2's pre-norm blocks, some of them hybrid: a shared transformer block whose output is added to the
Mamba-2 mixer's input, not to the stream.

A Mamba block (``Zamba2MambaDecoderLayer``) is Mamba-2's: ``x + mamba(norm(x))``,
its norm ``input_layernorm``, its mixer ``linear_attn``. A hybrid block
(``Zamba2HybridLayer``) first runs ``shared_transformer`` on
``concat(x, embeddings)``: its ``input_layernorm`` (twice the width), the
attention (``self_attn``), ``pre_ff_layernorm`` (``post_attention_layernorm``)
on the attention's output and the MLP (``feed_forward``, ``mlp``), with no
residual of its own; ``linear`` projects that, and the block's Mamba block
(``mamba_decoder``) returns ``x + mamba(norm(x + linear(T)))``. So on every
block ``layer_input + linear_attn.attention_output == layer_output``; the
hybrid block's attention and MLP serve their interior but no contribution,
since neither adds to the stream. The shared transformer's weights are tied
across the hybrid blocks (every ``num_mem_blocks``), its LoRA adapters not.
"""

from typing import Any

from nnterp import Attention, Layer, Mlp, unavailable
from nnterp.tiny import TinyConfig

from torch import Tensor
from transformers.models.zamba2 import modeling_zamba2 as modeling

from ..components.state_space import StateSpace
from ..family import RecurrentFamily

SHARED = (
    "a Zamba2 hybrid block adds only its Mamba-2 mixer's output to the stream: the shared transformer's {sublayer} "
    "feeds {into}, and linear(shared_transformer's output) is added to the mixer's input, before its norm; read "
    "{native} for this output, or layers[i].linear_attn.attention_output for what the block adds"
)
CONCAT_NORM = (
    "a Zamba2 hybrid block has two pre-norms: the attention's, over concat(layer_input, embeddings) and twice "
    "hidden_size wide, and the mixer's, over layer_input + linear(shared_transformer's output); read "
    "layers[i].shared_transformer.input_layernorm.output or layers[i].mamba_decoder.input_layernorm.output"
)
NO_MID = (
    "a Zamba2 hybrid block has no stream between its sublayers: its MLP's pre-norm reads the attention's output, "
    "and the block adds only its mixer's output to layer_input"
)


def _hybrid(envoy: Any) -> bool:
    return isinstance(envoy._module, modeling.Zamba2HybridLayer)


EMBEDDINGS_SHARED = (
    "every hybrid block hands the embeddings (layers[0].layer_input) to the shared transformer, beside its stream"
)


class Zamba2Layer(Layer):
    """Either kind of Zamba2 block: on a hybrid one the attention's pre-norm is twice as wide and there is no mid stream."""

    attention_norm_output = Layer.attention_norm_output.at(
        unavailable=lambda envoy: CONCAT_NORM if _hybrid(envoy) else None
    )
    layer_mid = Layer.layer_mid.at(unavailable=lambda envoy: NO_MID if _hybrid(envoy) else None)

    def read_beside_the_stream(self) -> str | None:
        return EMBEDDINGS_SHARED if self.index == 0 else None

    def contributions(self) -> tuple[str, ...]:
        """On a hybrid block the mixer's output alone: the shared transformer's output joins the mixer's input, not the stream."""
        return ("linear_attn.attention_output",) if _hybrid(self) else super().contributions()


class Zamba2SharedAttention(Attention):
    """The shared transformer's attention on a hybrid block: its interior; its output feeds the shared MLP."""

    attention_output = unavailable(
        SHARED.format(sublayer="attention", into="its pre_ff_layernorm and MLP", native="layers[i].self_attn.output[0]")
    )


class Zamba2SharedMlp(Mlp):
    """The shared transformer's MLP on a hybrid block: its neurons; its output goes through ``linear`` into the mixer's input."""

    mlp_output = unavailable(SHARED.format(sublayer="MLP", into="linear", native="layers[i].mlp.output"))

    def up_half(self) -> Tensor:
        """What the activation is multiplied by, ``[batch, seq, intermediate_size]``: ``gate_up_proj``'s second half plus its adapter's.

        Each hybrid block's LoRA adapter adds to the tied ``gate_up_proj``
        before the split, so ``gate_up_proj.output`` alone is not it. Read
        inside a trace, before ``mlp_activation``.
        """
        return self.source.gate_up_state_2.output[1]


FAMILY = RecurrentFamily(
    name="zamba2",
    model_types=("zamba2",),
    modeling=(modeling.__name__,),
    rename={
        "model.layers": "layers",
        "model.embed_tokens": "embed_tokens",
        "model.final_layernorm": "norm",
        "mamba": "linear_attn",
        "mamba_decoder.mamba": "linear_attn",
        "shared_transformer.self_attn": "self_attn",
        "shared_transformer.feed_forward": "mlp",
        "shared_transformer.pre_ff_layernorm": "post_attention_layernorm",
    },
    envoys={
        "layers.*": Zamba2Layer,
        "layers.*.linear_attn": StateSpace,
        "layers.*.self_attn": Zamba2SharedAttention,
        "layers.*.mlp": Zamba2SharedMlp,
    },
    tiny={
        # blocks: mamba, hybrid, mamba, hybrid: one shared transformer, tied, with LoRA adapters (kv heads == heads) and rotary
        "zamba2": TinyConfig(
            "zamba2",
            {
                "num_hidden_layers": 4,
                "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"],
                "n_mamba_heads": 8,
                "mamba_ngroups": 2,
                "mamba_d_state": 8,
                "chunk_size": 4,
                "num_key_value_heads": 4,
                "use_shared_attention_adapter": True,
                "adapter_rank": 8,
                "use_mem_rope": True,
            },
        ),
    },
    skips={
        "zamba2": {
            "mid_stream": "no post_attention_layernorm module on this block",
            "written_state_continues": "the chunk scan has no per-token state to walk or write",
        },
    },
)
