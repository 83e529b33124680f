"""The default family: a pre-norm block on transformers' shared attention interface, laid out like Llama.

``model.layers[i]`` holds ``input_layernorm``, ``self_attn`` (with ``q_proj``,
``k_proj``, ``v_proj``, ``o_proj``), ``post_attention_layernorm`` and ``mlp``
(``gate_proj``, ``up_proj``, ``down_proj``, ``act_fn``); ``model.norm`` is the
final norm. Most families are this block under other names: their modules
write their ``FAMILY`` as a diff of this one (``default.FAMILY.replace(...)``).
"""

from ..components import Attention, Layer, Mlp
from ..family import Family
from ..tiny import TinyConfig

FAMILY = Family(
    name="default",
    model_types=("llama", "mistral", "qwen2", "qwen3"),
    rename={
        "model.layers": "layers",
        "model.embed_tokens": "embed_tokens",
        "model.norm": "norm",
    },
    envoys={
        "layers.*": Layer,
        "layers.*.self_attn": Attention,
        "layers.*.mlp": Mlp,
    },
    tiny={
        "llama": TinyConfig("llama", {"num_hidden_layers": 3}),
        "mistral": TinyConfig("mistral", {"num_hidden_layers": 3, "sliding_window": None}),
        "qwen2": TinyConfig("qwen2", {"num_hidden_layers": 3}),
        "qwen3": TinyConfig("qwen3", {"num_hidden_layers": 3}),
        # a config-only type of transformers that builds LlamaForCausalLM: served by its class, not listed
        "exaone": TinyConfig("exaone", {"num_hidden_layers": 3}),
    },
)
