"""The nnterp family of the toy decoder: its names, and where its own attention arithmetic keeps each value.

Written as a diff of nnterp's sandwich components: the block and the MLP need
names only; the attention, whose arithmetic is its own, moves its interior
values onto the operations of its forward.
"""

import nnterp_toy  # noqa: F401 - registers the model with transformers' Auto classes
from nnterp import Family, PostNormAttention, PostNormMlp, SandwichLayer, TinyConfig

class ToyAttention(PostNormAttention):
    """The toy's attention: its own softmax, so the interior is read on its forward's operations."""

    def off_interface(self) -> None:
        return None  # no interface to be off: the arithmetic runs whatever the implementation

    attention_queries = PostNormAttention.attention_queries.at("source.q_0.output", select=None)
    # after the cache joins this call's keys and values to the earlier ones (the toy always keeps a cache)
    attention_keys = PostNormAttention.attention_keys.at("source.cache_update_0.output", select=0)
    attention_values = PostNormAttention.attention_values.at("source.cache_update_0.output", select=1)
    attention_scores = PostNormAttention.attention_scores.at("source.torch_softmax_0.input")
    attention_probabilities = PostNormAttention.attention_probabilities.at("source.torch_softmax_0.output")
    attention_head_outputs = PostNormAttention.attention_head_outputs.at("source.heads_0.output", select=None)

    @property
    def num_heads(self) -> int:
        return self._module.heads


FAMILY = Family(
    name="toy",
    model_types=("nnterp_toy",),
    model_classes=("ToyForCausalLM",),
    # the toy's module names, under the standard ones
    rename={
        "model.blocks": "layers",
        "model.embed": "embed_tokens",
        "model.final_norm": "norm",
        "head": "lm_head",
        "norm_in": "input_layernorm",
        "mix": "self_attn",
        "mix_out_norm": "post_attention_layernorm",
        "norm_ff": "pre_feedforward_layernorm",
        "ff": "mlp",
        "ff_out_norm": "post_feedforward_layernorm",
        "mix.out": "mix.o_proj",
        "ff.up": "ff.up_proj",
        "ff.act": "ff.act_fn",
        "ff.down": "ff.down_proj",
    },
    envoys={"layers.*": SandwichLayer, "layers.*.self_attn": ToyAttention, "layers.*.mlp": PostNormMlp},
    tiny={
        "nnterp_toy": TinyConfig(
            "nnterp_toy", {"width": 64, "depth": 3, "heads": 4, "ffn": 128, "vocab_size": 320, "bos_token_id": 0, "eos_token_id": 0}, load={}
        ),
    },
)
