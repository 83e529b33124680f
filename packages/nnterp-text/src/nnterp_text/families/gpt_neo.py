"""GPT-Neo: the default block; its attention is one module down (``attn.attention``) and computed in ``_attn``."""

from nnterp import Layer, TinyConfig
from nnterp.families import default

from . import gpt2
from .own_attention import HelperAttention


class GPTNeoAttention(HelperAttention):
    """GPT-Neo's attention: ``_attn`` does not scale ``query @ key^T`` at all (the scale is folded into the weights)."""

    scaling = 1.0


class GPTNeoLayer(Layer):
    """GPT-Neo's block, which returns ``(hidden_states, attn_weights)``."""

    returns_tuple = True


FAMILY = default.FAMILY.replace(
    name="gpt_neo",
    model_types=("gpt_neo",),
    rename={
        # GPT-2's names, but for the attention: attn only hands its call on to the global or local attention under it
        **{native: standard for native, standard in gpt2.FAMILY.rename.items() if not native.startswith("attn")},
        "attn.attention": "self_attn",
        "attention.out_proj": "attention.o_proj",
    },
    envoys={**default.FAMILY.envoys, "layers.*": GPTNeoLayer, "layers.*.self_attn": GPTNeoAttention},
    # a global and a local layer, the window short enough to bite on a test prompt
    tiny={
        "gpt_neo": TinyConfig(
            "gpt_neo",
            {
                "num_layers": 3,
                "num_heads": 4,
                "attention_types": [[["global", "local"], 1], [["global"], 1]],
                "window_size": 4,
            },
        )
    },
)
