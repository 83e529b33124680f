"""GPT-2: the default block under GPT-2's names, Conv1D projections, and its own upcast attention path."""

from nnterp import Attention, TinyConfig
from nnterp.components.attention import needs_eager
from nnterp.families import default

#: the root's names, shared by the families laid out like GPT-2 (GPT-J, GPT-Neo, CodeGen ...)
ROOT = {
    "transformer.h": "layers",
    "transformer.wte": "embed_tokens",
    "transformer.ln_f": "norm",
}


class GPT2Attention(Attention):
    """GPT-2's attention: the shared interface, unless ``reorder_and_upcast_attn`` takes it off."""

    def off_interface(self) -> str | None:
        reason = needs_eager(self)
        if reason is None and self._module.reorder_and_upcast_attn:
            return (
                "reorder_and_upcast_attn=True: under eager GPT-2 computes the attention in its own "
                "_upcast_and_reordered_attn, not the shared interface the values are read in; "
                "load with a config whose reorder_and_upcast_attn is False"
            )
        return reason


FAMILY = default.FAMILY.replace(
    name="gpt2",
    model_types=("gpt2", "gpt-sw3"),
    rename={
        **ROOT,
        "attn": "self_attn",
        "ln_1": "input_layernorm",
        "ln_2": "post_attention_layernorm",
        # two modules are called c_proj: the dotted aliases tell them apart
        "attn.c_proj": "attn.o_proj",
        "mlp.c_proj": "mlp.down_proj",
        "mlp.c_fc": "mlp.up_proj",
        "mlp.act": "mlp.act_fn",
    },
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": GPT2Attention},
    tiny={
        "gpt2": TinyConfig("gpt2", {"n_layer": 3}),
        "gpt2-reorder": TinyConfig("gpt2", {"n_layer": 3, "reorder_and_upcast_attn": True}),
        "gpt-sw3": TinyConfig("gpt-sw3", {"n_layer": 3}),
    },
    skips={
        "gpt2-reorder": {
            "head_outputs_are_pattern_against_values": "reorder_and_upcast_attn=True",
            "head_outputs_make_the_projection": "reorder_and_upcast_attn=True",
            "pattern_is_softmax_of_scores": "reorder_and_upcast_attn=True",
            "scores_are_queries_against_keys": "reorder_and_upcast_attn=True",
            "written_pattern_moves_logits": "reorder_and_upcast_attn=True",
        },
    },
)
