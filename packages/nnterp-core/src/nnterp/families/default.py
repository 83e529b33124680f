"""The default family: a pre-norm block on transformers' shared attention interface, laid out like Llama.

``model.layers[i]`` holds ``input_layernorm``, ``self_attn`` (with ``q_proj``,
``k_proj``, ``v_proj``, ``o_proj``), ``post_attention_layernorm`` and ``mlp``
(``gate_proj``, ``up_proj``, ``down_proj``, ``act_fn``); ``model.norm`` is the
final norm. Most families are this block under other names: their modules
import this one and write their ``RENAME`` as a diff of it.
"""

from ..components import Attention, Layer, Mlp
from ..tiny import TinyConfig

#: native module names to standard ones
RENAME = {
    "model.layers": "layers",
    "model.embed_tokens": "embed_tokens",
    "model.norm": "norm",
}

#: which component wraps which module, keyed by standard-name path suffixes
ENVOYS = {
    "layers.*": Layer,
    "layers.*.self_attn": Attention,
    "layers.*.mlp": Mlp,
}

#: the tiny checkpoints this family serves, shrunk alike
_SHRUNK = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    vocab_size=320,
    bos_token_id=0,
    eos_token_id=0,
    tie_word_embeddings=False,
)
llama = TinyConfig("llama", _SHRUNK)
mistral = TinyConfig("mistral", {**_SHRUNK, "sliding_window": None})
qwen2 = TinyConfig("qwen2", _SHRUNK)
qwen3 = TinyConfig("qwen3", {**_SHRUNK, "head_dim": 16})
