"""The families as vLLM builds them: each a diff of its transformers family, with vLLM's modules and flat values.

vLLM's own model classes keep transformers' module names where the block is the
same (``model.layers``, ``self_attn``, ``mlp``, the norms), so a vLLM family is
its transformers sibling with the ``Flat`` components and ``engine="vllm"``.
Its tiny checkpoints have a ``head_dim`` of 32: vLLM's CPU attention refuses 16.
"""

from __future__ import annotations

from ..families import default
from ..family import Family
from ..tiny import TinyConfig
from .components import (
    FlatAttention,
    FlatLayer,
    FlatMlp,
    FlatMoe,
    FlatPostNormAttention,
    FlatPostNormMlp,
    FlatSandwichLayer,
)

#: the widths a vLLM tiny checkpoint takes over the shared ones: four heads of 32 (the CPU attention's least head size)
WIDE = {"hidden_size": 128, "head_dim": 32, "num_hidden_layers": 3}

LLAMA = default.FAMILY.replace(
    name="vllm_llama",
    engine="vllm",
    model_types=("llama", "mistral", "qwen2", "qwen3"),
    envoys={"layers.*": FlatLayer, "layers.*.self_attn": FlatAttention, "layers.*.mlp": FlatMlp},
    tiny={
        "vllm_llama": TinyConfig("llama", WIDE),
        "vllm_mistral": TinyConfig("mistral", {**WIDE, "sliding_window": None}),
        "vllm_qwen2": TinyConfig("qwen2", WIDE),
        "vllm_qwen3": TinyConfig("qwen3", WIDE),
    },
)

GEMMA2 = LLAMA.replace(
    name="vllm_gemma2",
    model_types=("gemma2", "gemma3_text"),
    envoys={
        "layers.*": FlatSandwichLayer,
        "layers.*.self_attn": FlatPostNormAttention,
        "layers.*.mlp": FlatPostNormMlp,
    },
    tiny={
        "vllm_gemma2": TinyConfig("gemma2", {**WIDE, "final_logit_softcapping": 3.0, "attn_logit_softcapping": 5.0}),
        "vllm_gemma3_text": TinyConfig("gemma3_text", WIDE),
    },
)

MIXTRAL = LLAMA.replace(
    name="vllm_mixtral",
    model_types=("mixtral",),
    rename={**LLAMA.rename, "block_sparse_moe": "mlp", "block_sparse_moe.gate": "block_sparse_moe.router"},
    envoys={"layers.*": FlatLayer, "layers.*.self_attn": FlatAttention, "layers.*.mlp": FlatMoe},
    tiny={"vllm_mixtral": TinyConfig("mixtral", WIDE)},
)

#: every vLLM family, by name
FAMILIES: dict[str, Family] = {family.name: family for family in (LLAMA, GEMMA2, MIXTRAL)}
#: the vLLM family serving each model type
BY_MODEL_TYPE: dict[str, Family] = {
    model_type: family for family in FAMILIES.values() for model_type in family.model_types
}
